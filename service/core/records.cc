#include "service/core/records.h"

namespace tfslurm {

bool IsTerminal(ExperimentState state) {
  return state == ExperimentState::kSucceeded || state == ExperimentState::kFailed ||
         state == ExperimentState::kCancelled;
}

bool HasExited(TaskState state) {
  return state == TaskState::kSucceeded || state == TaskState::kFailed ||
         state == TaskState::kReaped;
}

}  // namespace tfslurm
