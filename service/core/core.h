// Core: the one object behind core's two faces, Experiments (the REST API
// and the sweeps) and Agents (the agent endpoint), with the daemon's own two
// calls. Only the daemon (and tests of core) hold it; it hands each adapter
// the face meant for it.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "service/core/agents.h"
#include "service/core/core_options.h"
#include "service/core/experiments.h"
#include "service/core/ports/metrics.h"
#include "service/core/ports/store.h"

namespace tfslurm {

class Core : public Experiments, public Agents {
 public:
  // Loads open experiments from the store and reconciles them with Slurm:
  // an attempt whose submission was interrupted is matched by job name, or
  // submitted now. Call once before serving. When slurmctld does not answer
  // or the submission fails, Tick goes on reconciling at every poll.
  [[nodiscard]] virtual Status Recover() = 0;
  // Periodic work (slurm_watch.h): polls Slurm every poll_interval_ms (one
  // RPC), times out barriers, marks lost tasks, ends unconfirmed reaps,
  // submits restarts. Safe to call from several threads at once.
  virtual void Tick() = 0;
};

// Core, made from its ports and config. `metrics` (which must outlive it;
// null: nothing is counted) hears what core counts; every observer is told
// of every batch of changes core commits.
std::unique_ptr<Core> NewCore(const CorePorts& ports, CoreConfig config, Metrics* metrics = nullptr,
                              std::vector<std::shared_ptr<CommitObserver>> observers = {});

}  // namespace tfslurm
