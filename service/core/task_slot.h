// One task of an attempt as core tracks it: its place, its agent's link and
// its lifecycle phase (TaskPhase), whose transitions are TaskSlot's methods.
//
// Thread safety: none; the caller serializes (core holds CoreState::mu()).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/enum_names.h"
#include "service/core/placement.h"
#include "service/core/records.h"

namespace tfslurm {

// Where a task is in its attempt, as core's rules need it. The user's view
// (TaskState: registered or running, lost, reaped, ...) is TaskSlot::state,
// kept beside it: it is what the store and the API show, and it also moves
// without core's rules (a silent task is lost while its phase stays).
//
//   kUnregistered --Register--> kRegistered --SendShutdown--> kStopping
//   kRegistered --BeginLoneRestart--> kRestartingAlone
//   kRestartingAlone --SendShutdown--> kStoppingAlone
//   kRestartingAlone --EndLoneRestart--> kRegistered
//   kStoppingAlone --EndLoneRestart--> kStopping
//   kRegistered, kStopping --MarkExited--> kExited
//   kUnregistered --MarkExited--> kExitedUnregistered --Register--> kExited
//
// Register in any other phase is an agent's reconnection and leaves the
// phase as it is. There is no way back from an exit: an attempt's task runs
// once (a lone restart is not an exit; a restart in place is a new attempt).
enum class TaskPhase {
  // No agent has registered for it yet.
  kUnregistered,
  // Its agent has registered and its program has not been seen to end:
  // waiting for the barrier, or running once assignments are out (the run's
  // assignments_sent, and TaskSlot::state, tell which: core's rules for the
  // task are the same either side of the barrier).
  kRegistered,
  // Its program died and is restarted alone (restart.max_task_restarts): its
  // agent is to come back in standby and be given its Assignment again. The
  // death is in exit_code, signal and detail.
  kRestartingAlone,
  // Sent a Shutdown; its exit is not reported yet.
  kStopping,
  // Sent a Shutdown while restarting alone: when its agent is back, its
  // death becomes its exit (LiveAttempt::LoneAgentBack).
  kStoppingAlone,
  // Its exit is known (reported, judged gone, or replayed from the store).
  // Whether a Shutdown had been sent is no longer asked once it has ended.
  kExited,
  // Its exit was reported by an agent that never registered with this
  // service (a registration lost in a crash, or an agent out of protocol):
  // the exit counts, and the task still counts as missing for the barrier
  // until its agent registers.
  kExitedUnregistered,
};

// Its names, for logs and test traces (base/enum_names.h; names_test.cc
// checks the table is complete).
inline constexpr EnumName<TaskPhase> kTaskPhaseNames[] = {
    {TaskPhase::kUnregistered, "unregistered"},
    {TaskPhase::kRegistered, "registered"},
    {TaskPhase::kRestartingAlone, "restarting_alone"},
    {TaskPhase::kStopping, "stopping"},
    {TaskPhase::kStoppingAlone, "stopping_alone"},
    {TaskPhase::kExited, "exited"},
    {TaskPhase::kExitedUnregistered, "exited_unregistered"},
};
std::string_view TaskPhaseName(TaskPhase phase);

// A transition asked from a phase that does not allow it is refused: it
// returns false and changes nothing. The callers ask only from the phases
// allowed (TaskSlot's queries, AttemptRun::RestartsAloneNow and TasksToReap
// choose them), so a refusal is a bug in core, never an agent's doing; it is
// a no-op rather than an abort, because an agent's report must never bring
// the service down (and the tests check refusals in every build type).
class TaskSlot {
 public:
  TaskRole role;
  int component = 0;  // its job component (core/components.h); 0 in a plain job
  std::string node;
  std::string address;  // host:port
  int node_id = 0;      // SLURM_NODEID: the node's index in the allocation
  int local_id = 0;     // SLURM_LOCALID: the task's index on its node
  // Its program's end: its exit once exited(), its death while
  // restarting_alone().
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string detail;  // the agent's word on why it ended (OnExit)
  // Its agent, beside its program's phase:
  // - kVanished: its stream ended without an exit report, or the service
  //   restarted since it last registered, and no new stream has
  //   registered: the agent may be gone (killed, its node lost), and with
  //   it, through PR_SET_PDEATHSIG, most likely its program. Only while the
  //   program has not been seen to end.
  // - kStandingBy: its program has ended and its agent waits in the job for
  //   the next attempt (restart.in_allocation), on the channel core holds
  //   for it. Only once the program has ended.
  // - kNormal: neither (its stream is up, or it has not registered yet, or
  //   it is gone after reporting its program's end).
  enum class AgentLink { kNormal, kVanished, kStandingBy };
  AgentLink agent = AgentLink::kNormal;
  bool vanished() const { return agent == AgentLink::kVanished; }
  bool standing_by() const { return agent == AgentLink::kStandingBy; }
  // The task's state as users see it (records.h).
  TaskState state = TaskState::kPending;

  TaskPhase phase() const { return phase_; }
  // Its agent has registered (and its exit, if any, came after).
  bool registered() const {
    return phase_ != TaskPhase::kUnregistered && phase_ != TaskPhase::kExitedUnregistered;
  }
  bool exited() const {
    return phase_ == TaskPhase::kExited || phase_ == TaskPhase::kExitedUnregistered;
  }
  // Sent a Shutdown whose exit has not been reported.
  bool shutdown_sent() const {
    return phase_ == TaskPhase::kStopping || phase_ == TaskPhase::kStoppingAlone;
  }
  bool restarting_alone() const {
    return phase_ == TaskPhase::kRestartingAlone || phase_ == TaskPhase::kStoppingAlone;
  }
  // Exited, of a failure that repeats at every start (its agent's
  // judgement: an exec failure; Python's ImportError, SyntaxError, "can't
  // open file") before the attempt trained a step. A fact of the exit, like
  // its code, so only MarkExited sets it.
  bool failed_at_startup() const { return exited() && failed_at_startup_; }

  // Its agent registered. Returns true for its first registration (the
  // phase moved); false for a reconnection, which leaves the phase as is.
  bool Register();
  // kRegistered -> kStopping, kRestartingAlone -> kStoppingAlone.
  bool SendShutdown();
  // kRegistered -> kRestartingAlone.
  bool BeginLoneRestart();
  // Its agent is back after a lone restart: kRestartingAlone -> kRegistered
  // (its program starts again, or its death is recorded as its exit next),
  // kStoppingAlone -> kStopping (its death is its exit next).
  bool EndLoneRestart();
  // kRegistered, kStopping -> kExited; kUnregistered -> kExitedUnregistered.
  // Not while restarting alone (EndLoneRestart first) nor once exited.
  bool MarkExited(bool failed_at_startup);
  // A restarted service rebuilds the slot from the store
  // (CoreState::Load): a fresh slot (kUnregistered) takes the phase the
  // stored task implies, kRegistered or kRestartingAlone; exits are replayed
  // through MarkExited, in their order.
  bool Restore(TaskPhase phase);

 private:
  TaskPhase phase_ = TaskPhase::kUnregistered;
  bool failed_at_startup_ = false;
};

}  // namespace tfslurm
