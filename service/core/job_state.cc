// Job state names and predicates: plain logic, usable without libslurm.
#include "service/core/ports/slurm.h"

namespace tfslurm::slurm {

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kPending:
      return "PENDING";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kSuspended:
      return "SUSPENDED";
    case JobState::kCompleted:
      return "COMPLETED";
    case JobState::kCancelled:
      return "CANCELLED";
    case JobState::kFailed:
      return "FAILED";
    case JobState::kTimeout:
      return "TIMEOUT";
    case JobState::kNodeFail:
      return "NODE_FAIL";
    case JobState::kPreempted:
      return "PREEMPTED";
    case JobState::kBootFail:
      return "BOOT_FAIL";
    case JobState::kDeadline:
      return "DEADLINE";
    case JobState::kOutOfMemory:
      return "OUT_OF_MEMORY";
    case JobState::kUnknown:
      return "UNKNOWN";
  }
  return "UNKNOWN";
}

bool IsFinished(JobState state) {
  return state != JobState::kPending && state != JobState::kRunning &&
         state != JobState::kSuspended && state != JobState::kUnknown;
}

}  // namespace tfslurm::slurm
