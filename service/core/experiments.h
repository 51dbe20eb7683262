// Experiments: the lifecycle of every experiment, from submission to its
// end. Decides; does I/O only through the Store and SlurmClient interfaces
// and TaskChannels given to it, and reads time from an injected Clock, so
// tests drive it with fakes and no sleeps.
//
// Thread safety: every public method may be called from any thread. One
// mutex guards the in-memory state of open experiments; Slurm RPCs are made
// outside it.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "service/core/agent_messages.h"
#include "service/core/attempt_run.h"
#include "service/core/memory.h"
#include "service/core/records.h"
#include "service/core/spec.h"
#include "service/core/status.h"
#include "service/slurm/sbatch_script.h"
#include "service/slurm/slurm_client.h"
#include "service/store/store.h"

namespace tfslurm {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() = 0;
};

// Secrets and generated ids.
class Randomness {
 public:
  virtual ~Randomness() = default;
  virtual std::string NewSecret() = 0;        // 32 random bytes, hex
  virtual std::string NewExperimentId() = 0;  // matches the id pattern
};

std::unique_ptr<Clock> NewSystemClock();
std::unique_ptr<Randomness> NewSystemRandomness();
std::string Sha256Hex(const std::string& data);

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
};

// What GET /experiments/{id} shows.
struct ExperimentView {
  ExperimentRecord experiment;
  std::vector<AttemptRecord> attempts;
  std::vector<TaskRecord> tasks;  // of the current attempt
  std::vector<EventRecord> events;
};

// Result of a dry run or a submission.
struct SubmitResult {
  ExperimentRecord experiment;
  AttemptRecord attempt;
  MemoryPlan memory;
};

class Experiments {
 public:
  Experiments(store::Store& store, slurm::SlurmClient& slurm, Clock& clock, Randomness& random,
              LifecycleConfig config);
  ~Experiments();

  // Where agents reach the service; set once the agent endpoint listens.
  void SetLaunch(const slurm::AgentLaunch& launch);

  // Loads open experiments from the store and reconciles them with Slurm:
  // an attempt whose submission was interrupted is matched by job name, or
  // submitted now. Call once before serving. When slurmctld does not answer
  // or the submission fails, Tick goes on reconciling at every poll.
  Status Recover();

  // Validates, stores the intent, submits. `dry_run` validates and renders
  // only: nothing is stored or submitted.
  StatusOr<SubmitResult> Submit(const nlohmann::json& spec, const std::string& owner, bool dry_run);
  Status Cancel(const std::string& id, const std::string& why);
  // Starts a new attempt of a finished experiment with the same MODEL_DIR, so
  // the program restores its latest checkpoint. The restart budget starts
  // over. FailedPrecondition while the experiment still runs.
  StatusOr<AttemptRecord> Resume(const std::string& id);
  StatusOr<ExperimentView> Get(const std::string& id);

  // Agent protocol. Register attaches `channel` for the task; the reply
  // (Assignment or Refused) arrives through it, now or when the barrier
  // completes.
  void OnRegister(const TaskRef& ref, const RegisterInfo& info,
                  std::shared_ptr<TaskChannel> channel);
  Status OnHeartbeat(const TaskRef& ref);
  Status OnProgress(const TaskRef& ref, int64_t step, const std::string& path);
  Status OnExited(const TaskRef& ref, std::optional<int> exit_code, std::optional<int> signal,
                  bool reaped);
  // The stream of `channel` broke; the agent may reconnect.
  void OnDisconnect(const TaskRef& ref, const TaskChannel* channel);

  // Periodic work: polls Slurm every poll_interval_ms (one RPC), times out
  // barriers, marks lost tasks, ends unconfirmed reaps, submits restarts.
  // Safe to call from several threads at once; only one of them polls.
  void Tick();

  store::Store& store() { return store_; }

 private:
  struct Active;           // an open experiment in memory
  struct Actions;          // Slurm calls to make after releasing the lock
  struct PreparedAttempt;  // a submission checked and rendered, not yet recorded

  StatusOr<std::unique_ptr<Active>> Load(const ExperimentRecord& record);
  StatusOr<PartitionShape> Partition(const std::string& name);
  // Caller holds mu_. Checks a TaskRef against the current attempt.
  StatusOr<Active*> FindTask(const TaskRef& ref);
  void Event(store::Changes& c, const Active& a, const std::string& what, const std::string& why);
  void SetState(store::Changes& c, Active& a, ExperimentState state, const std::string& why);
  // Writes `c` to the store and empties it. A failed write is logged; the
  // in-memory state goes on.
  void Commit(store::Changes& c);
  // Writes every set of `batch` in one transaction.
  void CommitAll(std::span<const store::Changes> batch);
  // To every connected task, or only to `only_proc`.
  void SendAssignments(Active& a, store::Changes& c, int only_proc = -1);
  void ReapRemaining(Active& a, store::Changes& c, const std::string& reason);
  void OnOutcome(Active& a, store::Changes& c);
  void OnJobUpdate(Active& a, const slurm::JobInfo* job, int64_t poll_seq, store::Changes& c);
  void FinishAttempt(Active& a, EndReason reason, const std::string& why, store::Changes& c);
  void CheckTimers(Active& a, store::Changes& c, Actions& actions);
  // Checks and renders attempt `number` (directories, partition, memory)
  // without changing `a` or the store: its failure leaves everything as it was.
  StatusOr<PreparedAttempt> PrepareAttempt(const Active& a, int number);
  // Records the intent, then submits. With `queued_why`, the experiment moves
  // to queued in the intent's own transaction.
  StatusOr<AttemptRecord> SubmitAttempt(Active& a, PreparedAttempt prepared, bool create,
                                        const std::string& queued_why = "");
  // An automatic submission could not be prepared: retried later when the
  // cause is transient, else the experiment fails with the reason.
  void OnSubmissionNotPrepared(Active& a, int number, const Status& why, store::Changes& c);
  // Caller holds mu_. A restart or a resubmission: prepares attempt `number`
  // and submits it, or handles the failure to prepare it as above.
  void SubmitAutomatically(Active& a, int number, const std::string& queued_why = "");
  int64_t NextSubmitRetryMs(Active& a);
  void RunActions(Actions& actions);
  // Caller holds mu_. Adopts the job of an attempt still `submitting` from
  // `jobs`, or queues its submission in `actions`.
  void ReconcileSubmission(Active& a, const std::vector<slurm::JobInfo>& jobs, store::Changes& c,
                           Actions& actions);

  store::Store& store_;
  slurm::SlurmClient& slurm_;
  Clock& clock_;
  Randomness& random_;
  LifecycleConfig config_;

  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Active>> active_;
  // Tick reads it outside mu_ (the poll must not hold the lock), and Tick
  // may run on several threads: the one that advances it polls.
  std::atomic<int64_t> last_poll_ms_{0};
  // Counts jobs as Slurm accepts them; see Active::job_known_seq.
  std::atomic<int64_t> job_seq_{0};

  std::mutex partition_mu_;
  std::map<std::string, std::pair<int64_t, PartitionShape>> partition_cache_;
};

}  // namespace tfslurm
