// The lifecycle's shared state: the open experiments in memory, the lock
// that guards them, the ports, and what every part of the lifecycle does to
// an experiment (record an event, change its state, commit changes, load it
// from the store). The parts are submission.h, agent_protocol.h,
// slurm_watch.h and restart_policy.h; experiments.h is their facade.
//
// Thread safety: `mu` guards `open` and every OpenExperiment in it. The other
// members are set before serving and read-only afterwards, except
// `job_seq`, which is atomic. Polls, cancels and step kills go to Slurm
// outside `mu`; a resume and an automatic submission hold it across their
// submission, as a user's first submission does not.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "schema/mutex.h"
#include "schema/status.h"
#include "service/core/agent_messages.h"
#include "service/core/attempt_run.h"
#include "service/core/ports/accounts.h"
#include "service/core/ports/clock.h"
#include "service/core/ports/files.h"
#include "service/core/ports/metrics.h"
#include "service/core/ports/slurm.h"
#include "service/core/ports/store.h"
#include "service/core/records.h"
#include "service/core/sbatch_script.h"
#include "service/core/spec.h"

namespace tfslurm {

struct LifecycleConfig {
  std::string output_root;
  slurm::AgentLaunch launch;
  std::vector<std::string> job_environment;  // KEY=VALUE for every job
  int64_t poll_interval_ms = 2000;
  int64_t barrier_timeout_ms = 5 * 60 * 1000;  // from the job's start
  int heartbeat_interval_ms = 5000;
  int lost_after_missed_heartbeats = 4;
  int shutdown_grace_ms = 10000;  // SIGTERM -> SIGKILL in the agent
  // After the grace, the service ends the step itself through Slurm.
  int64_t reap_timeout_margin_ms = 5000;
  int64_t partition_cache_ms = 30000;
  // An automatic submission (a restart, or one interrupted by a crash) that
  // fails on something transient (slurmctld, the disk) is tried again after
  // this delay, doubled per failure up to the maximum.
  int64_t submit_retry_ms = 5000;
  int64_t submit_retry_max_ms = 5 * 60 * 1000;
  SpecLimits limits;
  store::ScalarLimits scalar_limits;
};

// The ports core works through (core/ports/).
struct LifecyclePorts {
  store::Store& store;
  slurm::SlurmClient& slurm;
  Clock& clock;
  Randomness& random;
  Files& files;
  Accounts& accounts;
};

// An open experiment in memory: its records, the current attempt's tasks and
// the channels of the agents connected for them.
struct OpenExperiment {
  ExperimentRecord record;
  ExperimentSpec spec;
  AttemptRecord attempt;
  std::unique_ptr<AttemptRun> run;
  std::vector<TaskRecord> tasks;
  std::map<int, std::shared_ptr<TaskChannel>> channels;
  std::set<int> heartbeat_dirty;  // tasks whose heartbeat is not persisted yet
  bool user_cancelled = false;
  int64_t job_started_ms = 0;
  int64_t reap_deadline_ms = 0;
  int64_t reap_started_ms = 0;  // when the first Shutdown of the reaping went out
  // When this attempt last made progress: its assignments (training
  // starts), then each new checkpoint step. progress.stall_timeout_s runs
  // from here.
  int64_t last_progress_ms = 0;
  // The largest step of this attempt's training scalars: a larger one is
  // progress too.
  std::optional<int64_t> max_scalar_step;
  // An event has said this attempt's scalars were not all kept (the
  // agent's reports are not refused: that would stop the program).
  bool scalar_notice_given = false;
  // Bad-node memory: nodes the attempt's end points at, for the next
  // automatic attempt to exclude (Submission::ExcludeSuspects). With
  // suspects_if_down, only those Slurm reports unavailable then (a
  // NODE_FAIL names the job's nodes, not the one that failed).
  std::vector<std::string> suspect_nodes;
  bool suspects_if_down = false;
  std::string suspect_why;
  std::set<std::string> lost_nodes;  // nodes of this attempt's tasks that went lost
  bool step_killed = false;
  // A heterogeneous job's component job ids, from the last poll (empty for a
  // plain job): ending its step means signalling each.
  std::vector<int64_t> component_job_ids;
  bool job_cancel_sent = false;
  // Set when the service itself ended the attempt (barrier timeout), so the
  // job's CANCELLED state is not taken for a user's scancel.
  std::optional<EndReason> decided_reason;
  int64_t cancel_sent_at_ms = 0;
  bool start_seen_in_slurm = false;
  // This process has seen the attempt's job in Slurm (or Slurm took it from
  // this process). False after a restart of the service until a poll finds it.
  bool job_seen = false;
  // Automatic submissions that failed in a row, for the retry backoff.
  int submit_failures = 0;
  // An attempt still `submitting` (its submission was interrupted, or Slurm
  // did not answer) is looked up in Slurm by name, then submitted, at the
  // first poll from this time on.
  int64_t reconcile_at_ms = 0;
  // When Slurm's answer named this attempt's job, in submission order: a
  // poll whose snapshot began before it cannot have seen the job.
  int64_t job_known_seq = 0;
};

class Lifecycle {
 public:
  Lifecycle(LifecyclePorts ports, LifecycleConfig config)
      : ports(ports), config(std::move(config)) {}

  // `observer` is told of every write from now on. Call before serving.
  void ObserveCommits(std::shared_ptr<store::CommitObserver> observer);

  // Writes `batch` in one transaction and tells the observers.
  Status Apply(std::span<const store::Changes> batch);
  // Writes `c` and empties it. A failed write is logged; the in-memory
  // state goes on.
  void Commit(store::Changes& c);
  // Writes every set of `batch` in one transaction, as Commit.
  void CommitAll(std::span<const store::Changes> batch);

  void Event(store::Changes& c, const OpenExperiment& e, const std::string& what,
             const std::string& why);
  // Records why the current attempt ended (its end_reason) and counts it.
  void EndAttempt(OpenExperiment& a, EndReason reason);
  void SetState(store::Changes& c, OpenExperiment& e, ExperimentState state,
                const std::string& why);

  // An open experiment as the store has it, with its current attempt's
  // tasks as they were last recorded; agents get a fresh heartbeat window.
  StatusOr<std::unique_ptr<OpenExperiment>> Load(const ExperimentRecord& record);

  const LifecyclePorts ports;
  // Set before serving (Experiments::SetMetrics); NoMetrics until then.
  Metrics* metrics = &no_metrics_;
  // Set before serving (the agent endpoint's address arrives after
  // construction, through Experiments::SetLaunch); read-only afterwards.
  LifecycleConfig config;

  Mutex mu;
  std::map<std::string, std::unique_ptr<OpenExperiment>> open ABSL_GUARDED_BY(mu);
  // Counts jobs as Slurm accepts them; see OpenExperiment::job_known_seq.
  std::atomic<int64_t> job_seq{0};

 private:
  NoMetrics no_metrics_;
  std::vector<std::shared_ptr<store::CommitObserver>> observers_;
};

}  // namespace tfslurm
