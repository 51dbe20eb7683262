#include "service/core/records.h"

namespace tfslurm {

const char* ExperimentStateName(ExperimentState state) {
  switch (state) {
    case ExperimentState::kQueued:
      return "queued";
    case ExperimentState::kStarting:
      return "starting";
    case ExperimentState::kRunning:
      return "running";
    case ExperimentState::kRestarting:
      return "restarting";
    case ExperimentState::kSucceeded:
      return "succeeded";
    case ExperimentState::kFailed:
      return "failed";
    case ExperimentState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::optional<ExperimentState> ParseExperimentState(std::string_view name) {
  for (ExperimentState s : kAllExperimentStates)
    if (name == ExperimentStateName(s)) return s;
  return std::nullopt;
}

bool IsTerminal(ExperimentState state) {
  return state == ExperimentState::kSucceeded || state == ExperimentState::kFailed ||
         state == ExperimentState::kCancelled;
}

const char* AttemptStateName(AttemptState state) {
  switch (state) {
    case AttemptState::kSubmitting:
      return "submitting";
    case AttemptState::kPending:
      return "pending";
    case AttemptState::kRunning:
      return "running";
    case AttemptState::kEnded:
      return "ended";
  }
  return "ended";
}

std::optional<AttemptState> ParseAttemptState(std::string_view name) {
  for (AttemptState s : {AttemptState::kSubmitting, AttemptState::kPending, AttemptState::kRunning,
                         AttemptState::kEnded})
    if (name == AttemptStateName(s)) return s;
  return std::nullopt;
}

const char* TaskStateName(TaskState state) {
  switch (state) {
    case TaskState::kPending:
      return "pending";
    case TaskState::kRegistered:
      return "registered";
    case TaskState::kRunning:
      return "running";
    case TaskState::kSucceeded:
      return "succeeded";
    case TaskState::kFailed:
      return "failed";
    case TaskState::kReaped:
      return "reaped";
    case TaskState::kLost:
      return "lost";
  }
  return "lost";
}

std::optional<TaskState> ParseTaskState(std::string_view name) {
  for (TaskState s :
       {TaskState::kPending, TaskState::kRegistered, TaskState::kRunning, TaskState::kSucceeded,
        TaskState::kFailed, TaskState::kReaped, TaskState::kLost})
    if (name == TaskStateName(s)) return s;
  return std::nullopt;
}

bool HasExited(TaskState state) {
  return state == TaskState::kSucceeded || state == TaskState::kFailed ||
         state == TaskState::kReaped;
}

const char* EndReasonName(EndReason reason) {
  switch (reason) {
    case EndReason::kSucceeded:
      return "succeeded";
    case EndReason::kCancelled:
      return "cancelled";
    case EndReason::kPreempted:
      return "preempted";
    case EndReason::kTimeout:
      return "timeout";
    case EndReason::kNodeFail:
      return "node_fail";
    case EndReason::kRetryableExit:
      return "retryable_exit";
    case EndReason::kPermanentExit:
      return "permanent_exit";
    case EndReason::kStartupError:
      return "startup_error";
    case EndReason::kStartFailed:
      return "start_failed";
    case EndReason::kStalled:
      return "stalled";
    case EndReason::kUnknown:
      return "unknown";
    case EndReason::kStoppedEarly:
      return "stopped_early";
  }
  return "unknown";
}

std::optional<EndReason> ParseEndReason(std::string_view name) {
  for (EndReason r : {EndReason::kSucceeded, EndReason::kCancelled, EndReason::kPreempted,
                      EndReason::kTimeout, EndReason::kNodeFail, EndReason::kRetryableExit,
                      EndReason::kPermanentExit, EndReason::kStartupError, EndReason::kStartFailed,
                      EndReason::kStalled, EndReason::kUnknown, EndReason::kStoppedEarly})
    if (name == EndReasonName(r)) return r;
  return std::nullopt;
}

const char* SweepStateName(SweepState state) {
  switch (state) {
    case SweepState::kRunning:
      return "running";
    case SweepState::kCompleted:
      return "completed";
    case SweepState::kCancelled:
      return "cancelled";
  }
  return "running";
}

std::optional<SweepState> ParseSweepState(std::string_view name) {
  for (SweepState s : {SweepState::kRunning, SweepState::kCompleted, SweepState::kCancelled})
    if (name == SweepStateName(s)) return s;
  return std::nullopt;
}

const char* SweepTrialStateName(SweepTrialState state) {
  switch (state) {
    case SweepTrialState::kRunning:
      return "running";
    case SweepTrialState::kEnded:
      return "ended";
    case SweepTrialState::kNotStarted:
      return "not_started";
  }
  return "running";
}

std::optional<SweepTrialState> ParseSweepTrialState(std::string_view name) {
  for (SweepTrialState s :
       {SweepTrialState::kRunning, SweepTrialState::kEnded, SweepTrialState::kNotStarted})
    if (name == SweepTrialStateName(s)) return s;
  return std::nullopt;
}

}  // namespace tfslurm
