#include "service/core/task_slot.h"

namespace tfslurm {

std::string_view TaskPhaseName(TaskPhase phase) {
  return NameIn(kTaskPhaseNames, phase, "unknown");
}

bool TaskSlot::Register() {
  switch (phase_) {
    case TaskPhase::kUnregistered:
      phase_ = TaskPhase::kRegistered;
      return true;
    case TaskPhase::kExitedUnregistered:
      phase_ = TaskPhase::kExited;
      return true;
    default:
      return false;  // a reconnection
  }
}

bool TaskSlot::SendShutdown() {
  switch (phase_) {
    case TaskPhase::kRegistered:
      phase_ = TaskPhase::kStopping;
      return true;
    case TaskPhase::kRestartingAlone:
      phase_ = TaskPhase::kStoppingAlone;
      return true;
    default:
      return false;
  }
}

bool TaskSlot::BeginLoneRestart() {
  if (phase_ != TaskPhase::kRegistered) return false;
  phase_ = TaskPhase::kRestartingAlone;
  return true;
}

bool TaskSlot::EndLoneRestart() {
  switch (phase_) {
    case TaskPhase::kRestartingAlone:
      phase_ = TaskPhase::kRegistered;
      return true;
    case TaskPhase::kStoppingAlone:
      phase_ = TaskPhase::kStopping;
      return true;
    default:
      return false;
  }
}

bool TaskSlot::MarkExited(bool failed_at_startup) {
  switch (phase_) {
    case TaskPhase::kRegistered:
    case TaskPhase::kStopping:
      phase_ = TaskPhase::kExited;
      break;
    case TaskPhase::kUnregistered:
      phase_ = TaskPhase::kExitedUnregistered;
      break;
    default:
      return false;
  }
  failed_at_startup_ = failed_at_startup;
  return true;
}

bool TaskSlot::Restore(TaskPhase phase) {
  if (phase_ != TaskPhase::kUnregistered ||
      (phase != TaskPhase::kRegistered && phase != TaskPhase::kRestartingAlone))
    return false;
  phase_ = phase;
  return true;
}

}  // namespace tfslurm
