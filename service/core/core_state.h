// Core's shared state: the open experiments in memory, the lock that guards
// them, the ports and the config, and what every part of core does to an
// experiment (record an event, change its state, commit changes, load it
// from the store). The parts are submission.h, agent_protocol.h,
// slurm_watch.h and restart_policy.h; experiments_impl.h puts them
// together behind the facade (experiments.h).
//
// Thread safety: mu() guards the open experiments (Find, Add, All,
// CloseEnded) and every OpenExperiment; clang's
// thread-safety analysis checks that (the accessors carry the annotations).
// The ports, the config, the metrics and the observers are given at
// construction and never change; the job sequence is atomic. Writes to the
// store are ordered by a lock of their own, taken after mu(), and the
// barrier's, the exit reports', a Tick's and a restart in place's are made
// once mu() is released (CommitAfterUnlock). Polls, cancels
// and step kills go to Slurm outside the lock; a resume and an automatic
// submission hold it across their submission, as a user's first submission
// does not.
#pragma once

#include <algorithm>
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
  // The open experiments: those core watches, from their submission until
  // they are final and their last job has left Slurm. Find: null when `id`
  // is not open. Add opens `e` under its record's id (an attempt replaced
  // whole, a resume, a load). All lists them in id order, valid until the
  // next Add or CloseEnded. CloseEnded
  // forgets those that are over (OpenExperiment::Over).
  OpenExperiment* Find(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Add(std::unique_ptr<OpenExperiment> e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AnyOpen() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !open_.empty(); }
  std::vector<OpenExperiment*> All() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseEnded() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Counts jobs as Slurm accepts them; see LiveAttempt::job_known_seq.
  int64_t NextJobSeq() { return ++job_seq_; }
  int64_t LastJobSeq() const { return job_seq_.load(); }

  // Writes `batch` in one transaction and tells the observers, after
  // whatever CommitAfterUnlock queued: the store sees every write in the
  // order core decided it. A batch of nothing returns at once: it waits for
  // no write in progress.
  Status Apply(std::span<const Changes> batch) ABSL_LOCKS_EXCLUDED(write_mu_, queue_mu_);
  // Writes `c` and empties it. A failed write is logged; the in-memory
  // state goes on.
  void Commit(Changes& c) ABSL_LOCKS_EXCLUDED(write_mu_, queue_mu_);
  // Queues `c` to be written by WriteQueued once the caller has released
  // mu(), and empties it: for a commit whose size would hold every agent's
  // message up behind core's lock (the barrier's, with every task's row: 24
  // ms of 4,096 rows in bench/RESULTS.md's profile; a Tick's registrations
  // and heartbeats; a restart in place's new task rows), or that comes from
  // every agent at once (the exit reports of a failure's Shutdowns, then
  // written together). A Commit or Apply made
  // meanwhile writes it first. Failures are logged, as Commit's. Returns
  // whether anything was queued (an empty `c` is not): only then need the
  // caller wait for WriteQueued.
  bool CommitAfterUnlock(Changes& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
      ABSL_LOCKS_EXCLUDED(queue_mu_);
  // Writes what CommitAfterUnlock queued and returns once it is in the
  // store, written by this thread or by another that got there first.
  void WriteQueued() ABSL_LOCKS_EXCLUDED(mu_, write_mu_, queue_mu_);

  void Event(Changes& c, const OpenExperiment& e, EventCode what, const std::string& why);
  // Ends the current attempt as `reason` (LiveAttempt::End: its end reason,
  // `why`, and with `ended_at` its state) and counts it.
  void EndAttempt(OpenExperiment& a, EndReason reason, const std::string& why, Changes& c,
                  std::optional<int64_t> ended_at = std::nullopt);
  void SetState(Changes& c, OpenExperiment& e, ExperimentState state, const std::string& why);

  // An open experiment as the store has it, with its current attempt's
  // tasks as they were last recorded; agents get a fresh heartbeat window.
  StatusOr<std::unique_ptr<OpenExperiment>> Load(const ExperimentRecord& record);

  // How long a running task may be silent before it shows lost: this many
  // heartbeat intervals (config's lost_after_missed_heartbeats).
  int64_t LostAfterMs() const {
    return int64_t{config_.heartbeat_interval_ms} * config_.lost_after_missed_heartbeats;
  }
  // The reconnect window (docs/restarts.md, "Network faults"): how long a
  // running task may be silent before it is gone and its attempt fails.
  int64_t GoneAfterMs() const { return std::max(LostAfterMs(), config_.reconnect_window_ms); }
  // Whether the service itself is cut off from the cluster (its host
  // unreachable): it has heard from no agent for LostAfterMs and its last
  // poll of Slurm failed. A silence of every task at once is then taken
  // for the service's own, and no task counts as lost meanwhile
  // (docs/restarts.md, "Network faults").
  bool CutOff(int64_t now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return now < quiet_until_ms_ || (!slurm_answered_ && now - last_heard_ms_ > LostAfterMs());
  }
  // An agent's message came at `now`; a poll of Slurm did or did not get
  // an answer. The first news after the service was cut off gives every
  // running task a fresh window to be heard: kQuietAfterCutOffMs, or the
  // reconnect window if longer. An agent's stream that was cut comes back
  // only when TCP retransmits into it again (the interval doubles through
  // an outage, so up to as long as the outage lasted) or when its gRPC
  // keepalive gives it up (a ping every 60 s, 20 s to answer) and the agent
  // reconnects (its backoff is at most 5 s): within 85 s whatever the
  // outage.
  static constexpr int64_t kQuietAfterCutOffMs = 85000;
  void HeardFromAgent(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PolledSlurm(bool answered, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

 private:
  const CorePorts ports_;
  const CoreConfig config_;
  Metrics& metrics_;
  const std::vector<std::shared_ptr<CommitObserver>> observers_;
  // Writes what CommitAfterUnlock queued, in one transaction.
  void WriteQueuedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_) ABSL_LOCKS_EXCLUDED(queue_mu_);
  // One transaction to the store, then the observers.
  Status Write(std::span<const Changes> batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  Mutex mu_;
  std::map<std::string, std::unique_ptr<OpenExperiment>> open_ ABSL_GUARDED_BY(mu_);
  // When an agent's message last came (the start counts as one), and
  // whether the last poll of Slurm got an answer (CutOff).
  int64_t last_heard_ms_ ABSL_GUARDED_BY(mu_) = ports_.clock.NowMs();
  bool slurm_answered_ ABSL_GUARDED_BY(mu_) = true;
  // No task counts as lost before this (FreshWindow).
  int64_t quiet_until_ms_ ABSL_GUARDED_BY(mu_) = 0;
  void FreshWindow(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Held across every write to the store, taken after mu_ when both are:
  // writes reach the store one at a time, in the order they were decided.
  Mutex write_mu_ ABSL_ACQUIRED_AFTER(mu_);
  // Guards only the queue, so that queueing under mu_ never waits for a
  // write in progress.
  Mutex queue_mu_ ABSL_ACQUIRED_AFTER(write_mu_);
  std::vector<Changes> queued_ ABSL_GUARDED_BY(queue_mu_);
  std::atomic<int64_t> job_seq_{0};
};

}  // namespace tfslurm
