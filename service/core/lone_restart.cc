#include "service/core/lone_restart.h"

#include <numeric>

#include "service/core/wording.h"

namespace tfslurm {
namespace {

int RestartsSoFar(const LiveAttempt& at) {
  return std::accumulate(at.tasks.begin(), at.tasks.end(), 0,
                         [](int sum, const TaskRecord& t) { return sum + t.restarts; });
}

}  // namespace

bool LoneRestart::OnExit(OpenExperiment& a, int proc, std::optional<int> exit_code,
                         std::optional<int> signal, const std::string& detail, Changes& c) {
  AttemptRun& run = *a.attempt.run;
  if (a.user_cancelled || !run.RestartsAloneNow(proc, exit_code, signal)) return false;
  const int cap = a.spec.restart.max_task_restarts;
  const int so_far = RestartsSoFar(a.attempt);
  TaskSlot& slot = run.mutable_task(proc);
  const std::string who = TaskName(slot, proc);
  if (so_far >= cap) {
    core_.Event(c, a, EventCode::kRestart,
                who + " " + HowItEnded(exit_code, signal, detail) + "; not restarted alone: " +
                    std::to_string(so_far) + " of " + std::to_string(cap) +
                    " lone restarts of this attempt are used (restart.max_task_restarts)");
    return false;
  }
  slot.restarting_alone = true;
  slot.exit_code = exit_code;
  slot.signal = signal;
  slot.detail = detail;
  // Stored with the task, which stays running: a running task with a death
  // on record is one restarting alone, also for a restarted tfslurmd
  // (CoreState::Load).
  TaskRecord& t = a.attempt.tasks[proc];
  ++t.restarts;
  t.exit_code = exit_code;
  t.signal = signal;
  t.detail = detail;
  c.tasks.push_back(t);
  core_.metrics().TaskRestartedAlone(slot.role.role);
  const std::string count =
      "restart " + std::to_string(so_far + 1) + " of " + std::to_string(cap) + " in this attempt";
  core_.Event(c, a, EventCode::kRestartedAlone,
              who + " " + HowItEnded(exit_code, signal, detail) +
                  "; its program starts again alone at " + slot.address + " (" + count +
                  "), and the chief trains on");
  return true;
}

bool LoneRestart::OnStandby(OpenExperiment& a, int proc,
                            const std::shared_ptr<TaskChannel>& channel, Changes& c) {
  AttemptRun& run = *a.attempt.run;
  TaskSlot& slot = run.mutable_task(proc);
  if (!slot.restarting_alone) return false;
  slot.restarting_alone = false;
  if (run.outcome().kind == Outcome::kUndecided && !slot.shutdown_sent && !a.user_cancelled) {
    run.SetVanished(proc, false);
    a.attempt.channels[proc] = channel;
    TaskRecord& t = a.attempt.tasks[proc];
    t.last_heartbeat = core_.ports().clock.NowMs();
    t.exit_code.reset();
    t.signal.reset();
    t.detail.clear();
    c.tasks.push_back(t);
    return true;
  }
  // The attempt ended while the program was down: it is not started again,
  // and its death is its exit.
  const std::optional<int> exit_code = slot.exit_code;
  const std::optional<int> signal = slot.signal;
  const std::string detail = slot.detail;
  run.OnExit(proc, exit_code, signal, /*reaped=*/false, detail);
  TaskRecord& t = a.attempt.tasks[proc];
  t.state = run.task(proc).state;
  t.exit_code = exit_code;
  t.signal = signal;
  t.detail = detail;
  t.ended_at = core_.ports().clock.NowMs();
  c.tasks.push_back(t);
  core_.Event(c, a, EventCode::kExited,
              TaskName(slot, proc) + " " + HowItEnded(exit_code, signal, detail) +
                  "; not restarted: the attempt ended meanwhile (" + run.outcome().reason + ")");
  return false;
}

}  // namespace tfslurm
