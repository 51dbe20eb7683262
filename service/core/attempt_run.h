// The tasks of one attempt: rendezvous (barrier), success policy and what to
// reap. Pure logic over task events; the caller (Experiments) persists,
// talks to agents and to Slurm.
//
// Thread safety: not thread-safe, not even the const methods (AllRegistered
// and AnyUnconfirmedShutdown move cached cursors): the caller serializes
// (core holds CoreState::mu()).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "service/core/components.h"
#include "service/core/placement.h"
#include "service/core/records.h"
#include "service/core/spec.h"
#include "service/core/task_slot.h"

namespace tfslurm {

// The JSON-lines file in MODEL_DIR that TFSLURM_SCALARS_FILE names.
inline constexpr const char* kScalarsFileName = "tfslurm-scalars.jsonl";

// What the exits so far decide about the attempt.
struct Outcome {
  enum Kind { kUndecided, kSucceeded, kFailed } kind = kUndecided;
  std::string reason;
  // Failed only: the restart class of the exit that decided it:
  // kRetryableExit (killed by a signal, 137, 143), kStartupError (a failure
  // that repeats at every start, before the attempt's first step),
  // kPermanentExit (1, 2, 126, 127, ...) or kTimeout (killed by SIGUSR1, the
  // time-limit warning: KilledByTimeLimitWarning in wording.h).
  EndReason failure = EndReason::kPermanentExit;
  // Failed only: the deciding exit was a SIGTERM (or 143), what Slurm sends
  // every task at a time limit, a preemption or a cancel: only the job's end
  // tells which, so the attempt is not judged before it.
  bool by_sigterm = false;
};

class AttemptRun {
 public:
  AttemptRun(const ExperimentSpec& spec, int attempt);

  int attempt() const { return attempt_; }
  int size() const { return static_cast<int>(tasks_.size()); }
  TaskIndices indices() const { return TaskIndices(size()); }
  // The job's components: one for a plain job.
  const std::vector<JobComponent>& components() const { return components_; }
  const TaskSlot& task(TaskIndex t) const { return tasks_[t.value()]; }
  TaskSlot& mutable_task(TaskIndex t) { return tasks_[t.value()]; }

  // Records a registration. Returns true when this one completed the barrier:
  // every task has registered and assignments can go out.
  bool Register(TaskIndex task, const std::string& node, const std::string& address, int node_id,
                int local_id);
  bool AllRegistered() const;
  bool assignments_sent() const { return assignments_sent_; }
  void MarkAssigned();

  Framework framework() const { return spec_.framework; }
  // The cluster object of TF_CONFIG (after the barrier; see tf_config.h).
  // TensorFlow only.
  std::string ClusterSpec() const;
  // The task's environment but TF_CONFIG (the Assignment carries that). For
  // PyTorch, torch.distributed's env:// variables; for JAX, jax.distributed's
  // (after the barrier: they name rank 0's address and port).
  std::vector<std::pair<std::string, std::string>> TaskEnv(TaskIndex task,
                                                           const std::string& model_dir) const;
  // The task that checkpoints: the chief, else worker 0; PyTorch, JAX: rank 0.
  // nullopt for a job with neither (a ps-and-evaluator-only cluster).
  std::optional<TaskIndex> CheckpointingTask() const { return checkpointing_task_; }

  // Records a task's exit and returns the attempt's outcome so far. Once
  // decided, the outcome does not change.
  // A failure that would not be retried (exit 1, say) is counted as
  // retryable while another task's agent has vanished: peers of a lost ps
  // fail with their own errors a moment after it, and the attempt must be
  // judged by the cause, not by whichever report arrived first.
  // `detail`: why, in the agent's words (empty: only the status is known);
  // it follows the exit in the outcome's reason.
  // `at_startup`: its agent judged it a failure that repeats at every start;
  // it counts as one (startup_error) only before the attempt's first step.
  Outcome OnExit(TaskIndex task, std::optional<int> exit_code, std::optional<int> signal,
                 bool reaped, const std::string& detail = "", bool at_startup = false);
  // The attempt has trained a step: a new checkpoint or training scalar.
  // From then on no failure is a start-up error.
  void MarkStepTrained() { step_trained_ = true; }
  // The agent's stream ended without an exit report (true), or a new stream
  // registered for the task (false).
  void SetVanished(TaskIndex task, bool vanished) {
    TaskSlot& t = tasks_[task.value()];
    if (vanished)
      t.agent = TaskSlot::AgentLink::kVanished;
    else if (t.vanished())
      t.agent = TaskSlot::AgentLink::kNormal;
  }
  const Outcome& outcome() const { return outcome_; }
  // Decides from outside the tasks (barrier timeout, job ended, cancel).
  void Decide(Outcome outcome);

  // Tasks that are registered, not exited and not sent a Shutdown (phase
  // kRegistered or kRestartingAlone: a worker restarting alone is told too,
  // and its death is its exit when its agent is back); the caller sends one
  // and calls MarkShutdownSent.
  std::vector<TaskIndex> TasksToReap() const;
  void MarkShutdownSent(TaskIndex task) {
    if (!tasks_[task.value()].SendShutdown()) return;
    first_unconfirmed_ = std::min(first_unconfirmed_, static_cast<size_t>(task.value()));
  }
  // Tasks sent a Shutdown that have not confirmed their exit.
  std::vector<TaskIndex> UnconfirmedShutdowns() const;
  // Whether UnconfirmedShutdowns is not empty, in amortized O(1) per call
  // (asked at every exit report).
  bool AnyUnconfirmedShutdown() const;
  std::vector<TaskIndex> MissingRegistrations() const;

  // True for the exits success waits for under the spec's policy.
  bool IsTracked(TaskIndex task) const;

  // Whether task `task` is one whose program may be restarted alone
  // (core/lone_restart.h): a worker or evaluator, not the reporting task,
  // of TensorFlow with parameter servers and restart.max_task_restarts > 0.
  bool MayRestartAlone(TaskIndex task) const;
  // Whether its program's death now is restarted alone, the count aside:
  // it may be, it died by a signal other than SIGTERM (or 137), nobody
  // asked it to stop, the attempt is undecided, and the reporting task and
  // every ps run (registered, their agents connected).
  bool RestartsAloneNow(TaskIndex task, std::optional<int> exit_code,
                        std::optional<int> signal) const;

 private:
  Outcome Evaluate(TaskIndex task);
  // CheckpointingTask's answer, from the roles (fixed for the attempt).
  std::optional<TaskIndex> FindCheckpointingTask() const;
  void AddTorchEnv(TaskIndex task, std::vector<std::pair<std::string, std::string>>& env) const;
  void AddJaxEnv(TaskIndex task, std::vector<std::pair<std::string, std::string>>& env) const;

  ExperimentSpec spec_;
  std::vector<JobComponent> components_;
  int attempt_;
  std::vector<TaskSlot> tasks_;
  // Found once: every Assignment asks, and a scan for a chief among
  // 16,384 workers per Assignment made a TensorFlow storm O(N^2) (issue 49).
  std::optional<TaskIndex> checkpointing_task_;
  mutable size_t first_unregistered_ = 0;  // see AllRegistered
  mutable size_t first_unconfirmed_ = 0;   // see AnyUnconfirmedShutdown
  bool assignments_sent_ = false;
  bool step_trained_ = false;
  Outcome outcome_;
};

// 137 and 143 are SIGKILL and SIGTERM seen through a shell; a signal means
// the task was killed from outside (OOM killer, node trouble, preemption).
bool IsRetryableExit(std::optional<int> exit_code, std::optional<int> signal);

}  // namespace tfslurm
