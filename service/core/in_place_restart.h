// Restarts inside the allocation (restart.in_allocation): when an attempt
// fails while its Slurm job runs and every agent is still there, the next
// attempt starts in the same job. Each agent has stopped its program and
// waits in the job (Register.standby); the service records the new attempt
// (same job, same secret, `in_place`) and sends each agent NextAttempt, and
// the agents register for it on fresh ports, through the barrier, as at a
// job's start. No job goes back to Slurm's queue. When that cannot work (a
// task's agent is gone, a node is to be excluded, too little time is left,
// the job has ended) the restart is a new Slurm job, and an event says why.
// docs/restarts.md has the whole story.
//
// The whole of it is here: the agents that come back to wait (OnStandby,
// OnSpare, and a NextAttempt told again to one that missed it), the
// decision (Decide: as the last agent comes back, SlurmWatch::OnStandby,
// and at each Tick), what may stand in the way (Obstacle), the
// next attempt (Begin) and the release of the agents when none comes. The
// agent protocol and the Slurm watch make one call each (OnStandby;
// Decide, then FinishAttempt's Obstacle and Begin), and whether an attempt
// may still restart in its job is one rule (OpenExperiment::
// MayRestartInPlace).
//
// Thread safety: every method needs core's lock held.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "service/core/agent_messages.h"
#include "service/core/core_state.h"
#include "service/core/node_slots.h"

namespace tfslurm {

// What the standing-by tasks of a failed attempt say about its end.
struct InPlaceCheck {
  enum Kind {
    kNotApplicable,  // not an attempt that restarts in place, or not yet decided
    kWaiting,        // some task's agent has not come back to wait yet
    kReady,          // every agent waits, nothing stands in the way: the attempt ends now
    kLetTheJobEnd,   // every agent waits, but the next attempt cannot run here (`why`):
                     // they are released, and the job's end decides as without them
    kGiveUp,         // an agent did not come back in time: the job is ended, `why`
  } kind = kNotApplicable;
  EndReason reason = EndReason::kRetryableExit;
  std::string why;
};

class InPlaceRestart {
 public:
  explicit InPlaceRestart(CoreState& core) : core_(core) {}

  // Whether the attempt's end can be decided now, from its tasks alone,
  // while its job still runs: an in_allocation attempt that failed, whose
  // agents all stopped their programs and wait in the job, and whose next
  // attempt can run in the job (Obstacle). A failure by SIGTERM is left to
  // the job's end: it may be Slurm's time limit or a preemption.
  InPlaceCheck Check(OpenExperiment& e, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());

  // Check, and what follows from it at each Tick: an attempt whose next one
  // cannot run in its job (kLetTheJobEnd, kGiveUp) gives up the restart in
  // place, says why in an event, and releases every waiting agent; the
  // caller then ends the attempt (kReady) or the job (kGiveUp).
  InPlaceCheck Decide(OpenExperiment& e, int64_t now, Changes& c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());

  // An agent back to wait in its job (Register.standby) once its program
  // ended, as FindAgent placed it (`found`, `place`): one of an earlier
  // attempt that missed its NextAttempt (the next attempt began in this job
  // while it was away) is told again; a refused one is told why; a spare's
  // waits (OnSpare); a task's whose attempt may still restart here waits
  // for the next attempt (Decide, once the last is back:
  // SlurmWatch::OnStandby); any other is released.
  void OnStandby(const TaskRef& ref, const RegisterInfo& info, std::shared_ptr<TaskChannel> channel,
                 const StatusOr<OpenExperiment*>& found, const ProcPlace& place)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());

  // A spare node's agent registered (Register, or Register.standby): told it
  // is a spare, held waiting, or released when no attempt can use it.
  void OnSpare(OpenExperiment& e, const TaskRef& ref, const RegisterInfo& info,
               std::shared_ptr<TaskChannel> channel) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());

  // Why the next attempt cannot start in the current attempt's job; nullopt
  // when it can.
  std::optional<std::string> Obstacle(const OpenExperiment& e, int64_t now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());

  // Records the next attempt in the current one's job and moves every
  // waiting agent to it. The current attempt's end is recorded already.
  void Begin(OpenExperiment& e, Changes& c, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());

 private:
  // Makes the log directory of `r`, the next attempt in place, as the job's
  // account, and reads the step it starts from; "" (and why in `note`) when
  // the tasks' output stays where it is.
  std::string PrepareLogDir(const OpenExperiment& e, AttemptRecord& r, std::string& note)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // Tells an agent of an earlier attempt of the job the NextAttempt it
  // missed; false when it is not such an agent.
  bool TellNextAttempt(const TaskRef& ref, const RegisterInfo& info, TaskChannel& channel)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());

  CoreState& core_;
};

// Tells every agent that waits in the attempt's job (TaskSlot::standing_by,
// and the spares) that no further attempt comes to it: each exits.
void ReleaseWaitingAgents(LiveAttempt& attempt, const std::string& why);

// Where attempt `number` of experiment `id` logs: its job's working
// directory, or, for an attempt in place, where its agents move their
// tasks' output.
std::string AttemptLogDir(const std::string& output_root, const std::string& id, int number);

}  // namespace tfslurm
