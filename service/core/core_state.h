// Core's shared state: the open experiments in memory, the lock that guards
// them, the ports and the config, and what every part of core does to an
// experiment (record an event, change its state, commit changes, load it
// from the store). The parts are submission.h, agent_protocol.h,
// slurm_watch.h and restart_policy.h; experiments_impl.h puts them
// together behind the facade (experiments.h).
//
// Thread safety: mu() guards open() and every OpenExperiment in it; clang's
// thread-safety analysis checks that (the accessors carry the annotations).
// The ports, the config, the metrics and the observers are given at
// construction and never change; the job sequence is atomic. Polls, cancels
// and step kills go to Slurm outside the lock; a resume and an automatic
// submission hold it across their submission, as a user's first submission
// does not.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "service/core/core_options.h"
#include "service/core/open_experiment.h"
#include "service/core/ports/metrics.h"
#include "service/core/ports/store.h"
#include "service/core/records.h"

namespace tfslurm {

class CoreState {
 public:
  CoreState(CorePorts ports, CoreConfig config, Metrics& metrics,
            std::vector<std::shared_ptr<CommitObserver>> observers)
      : ports_(ports),
        config_(std::move(config)),
        metrics_(metrics),
        observers_(std::move(observers)) {}

  const CorePorts& ports() const { return ports_; }
  const CoreConfig& config() const { return config_; }
  Metrics& metrics() { return metrics_; }

  Mutex& mu() ABSL_LOCK_RETURNED(mu_) { return mu_; }
  // Every open experiment, by id.
  std::map<std::string, std::unique_ptr<OpenExperiment>>& open()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return open_;
  }

  // Counts jobs as Slurm accepts them; see LiveAttempt::job_known_seq.
  int64_t NextJobSeq() { return ++job_seq_; }
  int64_t LastJobSeq() const { return job_seq_.load(); }

  // Writes `batch` in one transaction and tells the observers.
  Status Apply(std::span<const Changes> batch);
  // Writes `c` and empties it. A failed write is logged; the in-memory
  // state goes on.
  void Commit(Changes& c);
  // Writes every set of `batch` in one transaction, as Commit.
  void CommitAll(std::span<const Changes> batch);

  void Event(Changes& c, const OpenExperiment& e, const std::string& what, const std::string& why);
  // Records why the current attempt ended (its end_reason) and counts it.
  void EndAttempt(OpenExperiment& a, EndReason reason);
  void SetState(Changes& c, OpenExperiment& e, ExperimentState state, const std::string& why);

  // An open experiment as the store has it, with its current attempt's
  // tasks as they were last recorded; agents get a fresh heartbeat window.
  StatusOr<std::unique_ptr<OpenExperiment>> Load(const ExperimentRecord& record);

 private:
  const CorePorts ports_;
  const CoreConfig config_;
  Metrics& metrics_;
  const std::vector<std::shared_ptr<CommitObserver>> observers_;
  Mutex mu_;
  std::map<std::string, std::unique_ptr<OpenExperiment>> open_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> job_seq_{0};
};

}  // namespace tfslurm
