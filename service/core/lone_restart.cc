#include "service/core/lone_restart.h"

#include "service/core/wording.h"

namespace tfslurm {

bool LoneRestart::OnExit(OpenExperiment& a, TaskIndex task, std::optional<int> exit_code,
                         std::optional<int> signal, const std::string& detail, Changes& c) {
  if (a.user_cancelled) return false;
  const int cap = a.spec.restart.max_task_restarts;
  const LiveAttempt::LoneDeath death =
      a.attempt.RestartAlone(task, exit_code, signal, detail, cap, c);
  if (death.kind == LiveAttempt::LoneDeath::kNotAlone) return false;
  const std::string how = death.name + " " + HowItEnded(exit_code, signal, detail);
  if (death.kind == LiveAttempt::LoneDeath::kCapped) {
    core_.Event(c, a, EventCode::kRestart,
                how + "; not restarted alone: " + std::to_string(death.so_far) + " of " +
                    std::to_string(cap) +
                    " lone restarts of this attempt are used (restart.max_task_restarts)");
    return false;
  }
  core_.metrics().TaskRestartedAlone(death.role);
  const std::string count = "restart " + std::to_string(death.so_far + 1) + " of " +
                            std::to_string(cap) + " in this attempt";
  core_.Event(c, a, EventCode::kRestartedAlone,
              how + "; its program starts again alone at " + death.address + " (" + count +
                  "), and the chief trains on");
  return true;
}

bool LoneRestart::OnStandby(OpenExperiment& a, TaskIndex task,
                            const std::shared_ptr<TaskChannel>& channel, Changes& c) {
  const LiveAttempt::LoneReturn back =
      a.attempt.LoneAgentBack(task, channel, a.user_cancelled, core_.ports().clock.NowMs(), c);
  if (back.kind == LiveAttempt::LoneBack::kEnded) core_.Event(c, a, EventCode::kExited, back.ended);
  return back.kind == LiveAttempt::LoneBack::kRestarts;
}

}  // namespace tfslurm
