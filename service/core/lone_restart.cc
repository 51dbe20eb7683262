#include "service/core/lone_restart.h"

#include "service/core/wording.h"

namespace tfslurm {

bool LoneRestart::OnExit(OpenExperiment& a, TaskIndex task, std::optional<int> exit_code,
                         std::optional<int> signal, const std::string& detail, Changes& c) {
  const AttemptRun& run = *a.attempt.run;
  if (a.user_cancelled || !run.RestartsAloneNow(task, exit_code, signal)) return false;
  const int cap = a.spec.restart.max_task_restarts;
  const int so_far = a.attempt.LoneRestartsSoFar();
  const TaskSlot& slot = run.task(task);
  const std::string who = TaskName(slot, task);
  if (so_far >= cap) {
    core_.Event(c, a, EventCode::kRestart,
                who + " " + HowItEnded(exit_code, signal, detail) + "; not restarted alone: " +
                    std::to_string(so_far) + " of " + std::to_string(cap) +
                    " lone restarts of this attempt are used (restart.max_task_restarts)");
    return false;
  }
  a.attempt.NoteLoneDeath(task, exit_code, signal, detail, c);
  core_.metrics().TaskRestartedAlone(slot.role.role);
  const std::string count =
      "restart " + std::to_string(so_far + 1) + " of " + std::to_string(cap) + " in this attempt";
  core_.Event(c, a, EventCode::kRestartedAlone,
              who + " " + HowItEnded(exit_code, signal, detail) +
                  "; its program starts again alone at " + slot.address + " (" + count +
                  "), and the chief trains on");
  return true;
}

bool LoneRestart::OnStandby(OpenExperiment& a, TaskIndex task,
                            const std::shared_ptr<TaskChannel>& channel, Changes& c) {
  switch (
      a.attempt.LoneAgentBack(task, channel, a.user_cancelled, core_.ports().clock.NowMs(), c)) {
    case LiveAttempt::LoneBack::kNotAlone:
      return false;
    case LiveAttempt::LoneBack::kRestarts:
      return true;
    case LiveAttempt::LoneBack::kEnded:
      core_.Event(c, a, EventCode::kExited,
                  a.attempt.TaskEnd(task) + "; not restarted: the attempt ended meanwhile (" +
                      a.attempt.outcome().reason + ")");
      return false;
  }
  return false;
}

}  // namespace tfslurm
