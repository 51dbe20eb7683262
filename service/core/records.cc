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

std::optional<ExperimentState> ParseExperimentState(const std::string& name) {
  for (ExperimentState s : kAllExperimentStates)
    if (name == ExperimentStateName(s)) return s;
  return std::nullopt;
}

bool IsTerminal(ExperimentState state) {
  return state == ExperimentState::kSucceeded || state == ExperimentState::kFailed ||
         state == ExperimentState::kCancelled;
}

}  // namespace tfslurm
