// The persistent shapes of the service: experiments, attempts, tasks and
// events, as core/ reasons about them and store/ keeps them. Times are Unix
// milliseconds; 0 means "not yet".
//
// Thread safety: plain values; the functions are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/enum_names.h"
#include "service/core/node_slots.h"
#include "service/core/task_identity.h"

namespace tfslurm {

// queued -> starting -> running -> succeeded | failed | cancelled, with
// restarting between attempts.
enum class ExperimentState {
  kQueued,
  kStarting,
  kRunning,
  kRestarting,
  kSucceeded,
  kFailed,
  kCancelled
};

// Each enum's names, in one table (base/enum_names.h): the store, the API
// and the tests read them from here.
inline constexpr EnumName<ExperimentState> kExperimentStateNames[] = {
    {ExperimentState::kQueued, "queued"},       {ExperimentState::kStarting, "starting"},
    {ExperimentState::kRunning, "running"},     {ExperimentState::kRestarting, "restarting"},
    {ExperimentState::kSucceeded, "succeeded"}, {ExperimentState::kFailed, "failed"},
    {ExperimentState::kCancelled, "cancelled"}};

inline const char* ExperimentStateName(ExperimentState state) {
  return NameIn(kExperimentStateNames, state);
}
inline std::optional<ExperimentState> ParseExperimentState(std::string_view name) {
  return ValueIn(kExperimentStateNames, name);
}
bool IsTerminal(ExperimentState state);

// An attempt is one Slurm job, in the service's view:
//   submitting: intent recorded, Slurm has not confirmed a job id yet
//   pending, running: as Slurm says
//   ended: final; its EndReason classifies why
enum class AttemptState { kSubmitting, kPending, kRunning, kEnded };

inline constexpr EnumName<AttemptState> kAttemptStateNames[] = {
    {AttemptState::kSubmitting, "submitting"},
    {AttemptState::kPending, "pending"},
    {AttemptState::kRunning, "running"},
    {AttemptState::kEnded, "ended"}};

inline const char* AttemptStateName(AttemptState state) {
  return NameIn(kAttemptStateNames, state);
}
inline std::optional<AttemptState> ParseAttemptState(std::string_view name) {
  return ValueIn(kAttemptStateNames, name);
}

// pending -> registered -> running -> succeeded | failed | reaped, or lost
// while its agent misses heartbeats (and back to what it was when one comes).
enum class TaskState { kPending, kRegistered, kRunning, kSucceeded, kFailed, kReaped, kLost };

inline constexpr EnumName<TaskState> kTaskStateNames[] = {
    {TaskState::kPending, "pending"}, {TaskState::kRegistered, "registered"},
    {TaskState::kRunning, "running"}, {TaskState::kSucceeded, "succeeded"},
    {TaskState::kFailed, "failed"},   {TaskState::kReaped, "reaped"},
    {TaskState::kLost, "lost"}};

inline const char* TaskStateName(TaskState state) { return NameIn(kTaskStateNames, state); }
inline std::optional<TaskState> ParseTaskState(std::string_view name) {
  return ValueIn(kTaskStateNames, name);
}
// Succeeded, failed or reaped: its program has exited.
bool HasExited(TaskState state);

// Why an attempt ended: the restart classes of schema/experiment-spec.md.
enum class EndReason {
  kSucceeded,
  kCancelled,  // by the user
  kPreempted,
  kTimeout,
  kNodeFail,
  kRetryableExit,  // killed by a signal, 137, 143
  kPermanentExit,  // 1, 2, 126, 127 and anything else
  // A failure that repeats on every start, before the attempt's first step:
  // the program could not be executed (a missing file, no permission, a bad
  // workdir), or Python could not open the script, import a module or
  // parse a file. Not restarted unless restart.on names it.
  kStartupError,
  kStartFailed,  // barrier timeout, submission refused
  // No new step within progress.stall_timeout_s while the tasks ran: a hang
  // (a deadlocked collective, a stuck input pipeline).
  kStalled,
  // The job left Slurm while tfslurmd was down (Slurm forgets finished jobs
  // after MinJobAge) before any task reported how it ended.
  kUnknown,
  // A sweep's trial its early-stopping rule ended (sweeps/early_stopping.h):
  // cancelled in Slurm, never restarted.
  kStoppedEarly,
};

inline constexpr EnumName<EndReason> kEndReasonNames[] = {
    {EndReason::kSucceeded, "succeeded"},
    {EndReason::kCancelled, "cancelled"},
    {EndReason::kPreempted, "preempted"},
    {EndReason::kTimeout, "timeout"},
    {EndReason::kNodeFail, "node_fail"},
    {EndReason::kRetryableExit, "retryable_exit"},
    {EndReason::kPermanentExit, "permanent_exit"},
    {EndReason::kStartupError, "startup_error"},
    {EndReason::kStartFailed, "start_failed"},
    {EndReason::kStalled, "stalled"},
    {EndReason::kUnknown, "unknown"},
    {EndReason::kStoppedEarly, "stopped_early"}};

inline const char* EndReasonName(EndReason reason) { return NameIn(kEndReasonNames, reason); }
inline std::optional<EndReason> ParseEndReason(std::string_view name) {
  return ValueIn(kEndReasonNames, name);
}

// What an event says happened (EventRecord::what), for people and for
// filters; docs/design.md ("Events") says when each is written.
enum class EventCode {
  kSubmitting,      // an attempt's intent is recorded
  kSubmitted,       // Slurm took it
  kRetry,           // a submission is tried again later
  kRecovered,       // a submission a crash interrupted, reconciled by job name
  kState,           // the experiment's state changed: "from -> to: why"
  kJob,             // the job's news from Slurm: started, ended, gone
  kReconnected,     // an agent's stream came back
  kAssigned,        // the barrier completed: assignments sent
  kCheckpoint,      // a new checkpoint step
  kHeartbeat,       // a lost task heartbeats again
  kScalars,         // training scalars not kept (once per attempt)
  kLost,            // a task is lost (silence, or its node left the job)
  kExited,          // a task's program ended
  kReaped,          // a task's program ended for a Shutdown
  kReaping,         // Shutdowns sent, or a step ended through Slurm
  kStalled,         // no new step for progress.stall_timeout_s
  kExclude,         // the bad-node memory's decision
  kRestart,         // a restart's kind: in place, in a new job, and why
  kRestartedAlone,  // a task's program started again alone
  kStoppedEarly,    // a sweep's early-stopping rule stopped the trial
};

inline constexpr EnumName<EventCode> kEventCodeNames[] = {
    {EventCode::kSubmitting, "submitting"},
    {EventCode::kSubmitted, "submitted"},
    {EventCode::kRetry, "retry"},
    {EventCode::kRecovered, "recovered"},
    {EventCode::kState, "state"},
    {EventCode::kJob, "job"},
    {EventCode::kReconnected, "reconnected"},
    {EventCode::kAssigned, "assigned"},
    {EventCode::kCheckpoint, "checkpoint"},
    {EventCode::kHeartbeat, "heartbeat"},
    {EventCode::kScalars, "scalars"},
    {EventCode::kLost, "lost"},
    {EventCode::kExited, "exited"},
    {EventCode::kReaped, "reaped"},
    {EventCode::kReaping, "reaping"},
    {EventCode::kStalled, "stalled"},
    {EventCode::kExclude, "exclude"},
    {EventCode::kRestart, "restart"},
    {EventCode::kRestartedAlone, "restarted_alone"},
    {EventCode::kStoppedEarly, "stopped_early"}};

inline const char* EventCodeName(EventCode code) { return NameIn(kEventCodeNames, code); }
inline std::optional<EventCode> ParseEventCode(std::string_view name) {
  return ValueIn(kEventCodeNames, name);
}

struct ExperimentRecord {
  std::string id;
  std::string owner;
  std::string spec_json;  // canonical form (ExperimentSpec::ToJson)
  ExperimentState state = ExperimentState::kQueued;
  std::string reason;  // why it is in this state, for people
  int current_attempt = 0;
  int restarts = 0;  // automatic restarts so far
  std::string model_dir;
  int64_t mem_per_task_mb = 0;
  std::string mem_explanation;
  std::optional<int64_t> checkpoint_step;
  std::string checkpoint_path;
  int64_t created_at = 0;
  int64_t updated_at = 0;
  int64_t next_attempt_at = 0;  // restarting: when the next attempt is submitted
  // Nodes the next automatic attempts leave out (--exclude), in the order
  // they were added; a resume clears them.
  std::vector<std::string> excluded_nodes;
  // spec_json's revision: 1 as submitted, one more for each resume that
  // changed it (SpecRevisionRecord keeps each).
  int spec_revision = 1;
};

// One revision of an experiment's spec, kept whole: what its attempts of
// that revision ran.
struct SpecRevisionRecord {
  std::string experiment_id;
  int revision = 1;
  std::string spec_json;  // canonical form
  int64_t created_at = 0;
  std::string changes;  // for people, what changed from the revision before; empty for 1
};

// Tasks of one attempt in one role and state, counted.
struct TaskStateCount {
  std::string role;
  TaskState state = TaskState::kPending;
  int count = 0;
};

// What a list shows of an experiment, read in one query per page rather than
// one per experiment: the experiment (spec_json left empty), its current
// attempt's Slurm facts and, for an open experiment, that attempt's tasks
// counted by role and state.
struct ExperimentSummary {
  ExperimentRecord experiment;
  bool has_attempt = false;
  int64_t slurm_job_id = 0;  // 0 until Slurm confirms the submission
  std::string nodes;
  std::string slurm_state;
  std::vector<TaskStateCount> task_counts;
};

// An attempt as the store keeps it (AttemptState says what `state` means).
struct AttemptRecord {
  std::string experiment_id;
  int number = 0;
  std::string secret_sha256;
  std::string job_name;  // tfx-<id>-a<number>: how reconciliation finds the job
  int64_t slurm_job_id = 0;
  AttemptState state = AttemptState::kSubmitting;
  std::string slurm_state;
  std::optional<EndReason> end_reason;  // once ended
  std::string reason;
  std::string nodes;  // Slurm's node list, compressed (node[1-3])
  std::string sbatch_script;
  std::optional<int64_t> start_step;  // checkpoint step the attempt started from
  // Started inside the Slurm job of the attempt before it, whose agents
  // restarted their programs (restart.in_allocation): its job, job name and
  // secret are that attempt's.
  bool in_place = false;
  // Which of the job's nodes run the tasks and which wait as spares
  // (resources.spare_nodes; node_slots.h). The same job's attempts in place
  // differ when a spare took a node's place.
  NodeSlots node_slots;
  int spec_revision = 1;  // the spec revision it ran (SpecRevisionRecord)
  int exit_code = 0;      // the batch script's, when Slurm reports it
  int64_t submitted_at = 0;
  int64_t started_at = 0;
  int64_t ended_at = 0;
};

// A task of an attempt as the store keeps it: by its index in the
// experiment, not by the SLURM_PROCID of the agent running it
// (task_identity.h).
struct TaskRecord {
  std::string experiment_id;
  int attempt = 0;
  TaskIndex task;
  std::string role;
  int index = 0;
  std::string node;
  std::string address;  // host:port
  int local_rank = 0;   // SLURM_LOCALID: its index on its node (PyTorch's LOCAL_RANK)
  TaskState state = TaskState::kPending;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string detail;  // why it ended, in its agent's words (Exited.detail); may be empty
  int64_t registered_at = 0;
  int64_t last_heartbeat = 0;
  int64_t ended_at = 0;
  // How many times its program was restarted alone in this attempt
  // (restart.max_task_restarts).
  int restarts = 0;
  // Its failure repeats at every start and came before the attempt's first
  // step (EndReason::kStartupError; AttemptRun::OnExit).
  bool startup_error = false;
};

struct EventRecord {
  int64_t id = 0;  // assigned by the store
  std::string experiment_id;
  int attempt = 0;
  int64_t at = 0;
  EventCode what = EventCode::kState;
  std::string why;  // sentence for people
};

// A training scalar as the reporting task's agent sends it (schema/
// agent.proto, Scalar): from a TensorBoard event file or the JSON-lines file.
struct ScalarPoint {
  std::string tag;
  int64_t step = 0;
  double wall_time = 0;         // seconds since the Unix epoch
  std::optional<double> value;  // nullopt: NaN or an infinity was reported
};

// What the store keeps of one tag of an experiment: its points across
// attempts, downsampled (ScalarLimits), ordered by (attempt, step).
struct ScalarSeries {
  struct Point {
    int attempt = 0;
    int64_t step = 0;
    double wall_time = 0;
    std::optional<double> value;
  };
  std::string tag;
  int64_t reported = 0;  // points ever reported for the tag, before downsampling
  std::vector<Point> points;
};

// A sweep: trials of one base experiment over a parameter space
// (sweeps/sweep_spec.h). running -> completed (every trial has ended) |
// cancelled (by its owner; its running trials are cancelled).
enum class SweepState { kRunning, kCompleted, kCancelled };

inline constexpr EnumName<SweepState> kSweepStateNames[] = {{SweepState::kRunning, "running"},
                                                            {SweepState::kCompleted, "completed"},
                                                            {SweepState::kCancelled, "cancelled"}};

inline const char* SweepStateName(SweepState state) { return NameIn(kSweepStateNames, state); }
inline std::optional<SweepState> ParseSweepState(std::string_view name) {
  return ValueIn(kSweepStateNames, name);
}

struct SweepRecord {
  std::string id;
  std::string owner;      // every trial's owner
  std::string spec_json;  // canonical form (SweepSpec::ToJson)
  SweepState state = SweepState::kRunning;
  std::string reason;  // why it is in this state, for people
  int trials = 0;      // how many it runs in all
  int64_t created_at = 0;
  int64_t updated_at = 0;
};

// A trial from the sweep's point of view: started (its experiment
// <sweep>-<index> is stored in the same transaction as this row, so a trial
// is started exactly when its row exists), then ended once its experiment
// has ended and its Slurm job is gone; or not_started when its submission
// was refused for good.
enum class SweepTrialState { kRunning, kEnded, kNotStarted };

inline constexpr EnumName<SweepTrialState> kSweepTrialStateNames[] = {
    {SweepTrialState::kRunning, "running"},
    {SweepTrialState::kEnded, "ended"},
    {SweepTrialState::kNotStarted, "not_started"}};

inline const char* SweepTrialStateName(SweepTrialState state) {
  return NameIn(kSweepTrialStateNames, state);
}
inline std::optional<SweepTrialState> ParseSweepTrialState(std::string_view name) {
  return ValueIn(kSweepTrialStateNames, name);
}

struct SweepTrialRecord {
  std::string sweep_id;
  int index = 0;  // 1-based
  std::string experiment_id;
  std::string params_json;  // {"env.LR": 0.001, ...}
  SweepTrialState state = SweepTrialState::kRunning;
  std::optional<EndReason> end_reason;  // its experiment's last attempt's, once ended
  // Its objective (SweepObjective) when it ended; while it runs, the
  // sweep's view reads it from its scalars.
  std::optional<double> objective;
  std::optional<int64_t> objective_step;
  // The last step its objective's tag reported: where it is (while it runs)
  // or where its programs stopped (once ended; a trial stopped at a rung
  // reports on until they have).
  std::optional<int64_t> last_step;
  int rungs_passed = 0;     // early stopping: the rungs it has gone past
  double node_seconds = 0;  // its attempts' nodes x running time, once ended
  std::string note;         // why it stopped early, or was not started
  int64_t started_at = 0;
  int64_t ended_at = 0;
};

// An API token. Only its SHA-256 is kept; the token itself is shown once.
struct TokenRecord {
  std::string sha256;
  std::string user;
  bool admin = false;
  int64_t created_at = 0;
};

}  // namespace tfslurm
