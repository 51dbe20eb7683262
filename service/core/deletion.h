// Deletion: an ended experiment removed from the store, with its files if
// asked (POST /experiments/{id}/delete), and the retention sweep that deletes
// the store's rows of experiments ended long ago (CoreConfig::
// retain_ended_ms). Its files are set aside under core's lock, so the id is
// free at once, and removed after it is released.
//
// Thread safety: Delete and SweepIfDue may be called from any thread and
// take core's lock themselves.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "service/core/core_state.h"
#include "service/core/experiments.h"

namespace tfslurm {

class Deletion {
 public:
  explicit Deletion(CoreState& core) : core_(core) {}

  // FailedPrecondition while the experiment is open (naming its state),
  // Unavailable while its last job is still finishing, NotFound for no such
  // experiment. With `files`, <output root>/<id> goes too, removed as the
  // owner's account, never following a symlink out of it.
  StatusOr<DeleteResult> Delete(const std::string& id, bool files) ABSL_LOCKS_EXCLUDED(core_.mu());
  // The retention sweep, when it is on and due: at most 100 experiments a
  // sweep, rows only.
  void SweepIfDue() ABSL_LOCKS_EXCLUDED(core_.mu());

 private:
  CoreState& core_;
  std::atomic<int64_t> last_sweep_ms_{0};
};

}  // namespace tfslurm
