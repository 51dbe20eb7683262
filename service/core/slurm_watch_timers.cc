// SlurmWatch's timers (slurm_watch.h): the barrier, stalls, reaping,
// repeated cancels, heartbeats and restarts in place, run at every Tick for
// each open experiment.
#include <csignal>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "service/core/slurm_watch.h"
#include "service/core/wording.h"

namespace tfslurm {
namespace {

// A restart in place (InPlaceRestart::Begin) left nodes out: Slurm is asked
// to shrink the job once core's lock is released.
void TakeShrink(OpenExperiment& a, std::vector<std::pair<int64_t, std::string>>& shrink_jobs) {
  if (auto shrink = a.attempt.TakeShrink()) shrink_jobs.push_back(std::move(*shrink));
}

}  // namespace

void SlurmWatch::CheckInPlace(OpenExperiment& a, int64_t now, Changes& c, Actions& actions) {
  const InPlaceCheck check = in_place_.Decide(a, now, c);
  if (check.kind == InPlaceCheck::kReady) return FinishAttempt(a, check.reason, check.why, c);
  if (check.kind == InPlaceCheck::kGiveUp) a.attempt.CancelJobOnce(actions.cancel_jobs);
}

void SlurmWatch::OnStandby(const std::string& id) {
  Actions actions;
  {
    MutexLock lock(core_.mu());
    OpenExperiment* found = core_.Find(id);
    if (!found) return;
    OpenExperiment& a = *found;
    LiveAttempt& at = a.attempt;
    const AttemptRun& run = *at.run;
    // Amortized O(1) per standby: a task found waiting is not looked at
    // again (one that stopped waiting since makes CheckInPlace say so).
    while (at.standby_scan_from < run.size() &&
           run.task(TaskIndex(at.standby_scan_from)).standing_by())
      ++at.standby_scan_from;
    if (at.standby_scan_from < run.size()) return;
    Changes c;
    CheckInPlace(a, core_.ports().clock.NowMs(), c, actions);
    TakeShrink(a, actions.shrink_jobs);
    if (!c.empty()) core_.Commit(c);
  }
  RunActions(actions);
}

void SlurmWatch::CheckTimers(OpenExperiment& a, Changes& c, Actions& actions) {
  const int64_t now = core_.ports().clock.NowMs();
  CheckBarrier(a, now, c, actions);
  CheckStall(a, now, c);
  CheckReaping(a, now, c, actions);
  RepeatCancel(a, now, actions);
  CheckHeartbeats(a, now, c);
  CheckNodesLeft(a, now, c);
  CheckInPlace(a, now, c, actions);
  TakeShrink(a, actions.shrink_jobs);  // this Tick's restart in place, or an agent's
  if (a.record.state == ExperimentState::kRestarting &&
      a.attempt.record.state == AttemptState::kEnded && now >= a.record.next_attempt_at)
    actions.restarts.push_back(a.record.id);
}

void SlurmWatch::CheckBarrier(OpenExperiment& a, int64_t now, Changes& c, Actions& actions) {
  // The barrier: every task must register within the timeout of the job's start.
  if (!a.attempt.BarrierTimedOut(now, core_.config().barrier_timeout_ms)) return;
  const AttemptRun& run = *a.attempt.run;
  std::vector<TaskIndex> missing = run.MissingRegistrations();
  std::string names;
  for (size_t i = 0; i < missing.size() && i < 20; ++i)
    names += (i ? ", " : "") + TaskName(run.task(missing[i]), missing[i]);
  if (missing.size() > 20) names += ", ...";
  std::string why = "barrier timeout after " + Seconds(core_.config().barrier_timeout_ms) + ": " +
                    std::to_string(missing.size()) + " of " + std::to_string(run.size()) +
                    " tasks never registered: " + names;
  // A task that never started because its container did not: the
  // runtime's words, and a failure that repeats at every start.
  std::optional<std::string> container =
      missing.empty() ? std::nullopt : ContainerStartFailure(a, a.ProcOfTask(missing.front()));
  if (container)
    why += "; the container did not start for " +
           TaskName(run.task(missing.front()), missing.front()) + ": " + *container;
  a.attempt.Fail({Outcome::kFailed, why},
                 container ? EndReason::kStartupError : EndReason::kStartFailed);
  agents_.ReapRemaining(a, c, why);
  a.record.reason = why + "; cancelling the job";
  c.experiment = a.record;
  a.attempt.CancelJobOnce(actions.cancel_jobs);
}

void SlurmWatch::CheckStall(OpenExperiment& a, int64_t now, Changes& c) {
  // A hang: training runs (its agents may well heartbeat) but makes no new
  // step. The attempt ends like a failure, as its own restart class.
  const int64_t stall_ms = int64_t{a.spec.stall_timeout_s} * 1000;
  const std::optional<int64_t> quiet = a.attempt.StalledFor(now, stall_ms);
  if (!quiet) return;
  const LiveAttempt::Liveness live =
      a.attempt.LivenessAt(now, 2 * int64_t{core_.config().heartbeat_interval_ms});
  // Tasks that stopped heartbeating, all on one node, point at it.
  if (live.silent_nodes.size() == 1 && live.alive_count > 0) {
    a.suspects.nodes = {*live.silent_nodes.begin()};
    a.suspects.only_if_down = false;
    a.suspects.why = "attempt " + std::to_string(a.attempt.number()) +
                     " stalled and only its tasks there had stopped heartbeating";
  }
  const std::optional<int64_t> last_step = a.attempt.LastStep(a.record.checkpoint_step);
  std::string last = last_step ? "the last, step " + std::to_string(*last_step) + ", came " +
                                     Seconds(*quiet) + " ago"
                               : "none since training started " + Seconds(*quiet) + " ago";
  std::string why =
      "stalled: no new step for " + Seconds(stall_ms) + " (progress.stall_timeout_s); " + last +
      "; " + std::to_string(live.alive_count) + " of " + std::to_string(a.attempt.run->size()) +
      " tasks still heartbeating" + (live.alive.empty() ? "" : ": " + live.alive);
  a.attempt.Fail({Outcome::kFailed, why}, EndReason::kStalled);
  core_.Event(c, a, EventCode::kStalled, why);
  agents_.ReapRemaining(a, c, why);
  a.record.reason = why + "; ending the attempt";
  c.experiment = a.record;
}

void SlurmWatch::CheckReaping(OpenExperiment& a, int64_t now, Changes& c, Actions& actions) {
  // Reaping: tasks that did not confirm within the grace are ended by Slurm.
  if (!a.attempt.ReapOverdue(now)) return;
  const AttemptRun& run = *a.attempt.run;
  std::vector<TaskIndex> unconfirmed = run.UnconfirmedShutdowns();
  // Every task confirmed, and the job may host the next attempt: the
  // restart in place decides (CheckInPlace), not the deadline.
  if (unconfirmed.empty() && a.spec.restart.in_allocation && !a.attempt.GaveUpInPlace() &&
      !a.user_cancelled)
    return;
  if (!unconfirmed.empty()) {
    std::string names;
    for (TaskIndex task : unconfirmed)
      names += (names.empty() ? "" : ", ") + TaskName(run.task(task), task);
    const std::vector<int64_t> step_jobs = a.attempt.StepJobIds();
    core_.Event(c, a, EventCode::kReaping,
                names + " did not confirm the Shutdown; ending step " +
                    std::to_string(a.attempt.job_id()) + ".0 through Slurm");
    actions.kill_steps.insert(actions.kill_steps.end(), step_jobs.begin(), step_jobs.end());
  }
  a.attempt.StepKilled(a.spec.restart.in_allocation
                           ? std::to_string(unconfirmed.size()) +
                                 " tasks did not confirm their Shutdown in time"
                           : "");
  // A failed attempt's job has nothing left to do.
  if (run.outcome().kind == Outcome::kFailed) a.attempt.CancelJobOnce(actions.cancel_jobs);
}

void SlurmWatch::RepeatCancel(OpenExperiment& a, int64_t now, Actions& actions) {
  // A cancel Slurm did not act on (slurmctld down, a lost RPC) is repeated
  // while the job is still there.
  if (a.user_cancelled)
    a.attempt.RepeatCancel(now, 10 * int64_t{core_.config().poll_interval_ms}, actions.cancel_jobs);
}

void SlurmWatch::CheckNodesLeft(OpenExperiment& a, int64_t now, Changes& c) {
  // Silent past the reconnect window: gone, with or without spare nodes
  // (docs/restarts.md, "Network faults"); never while the service hears
  // no agent at all (the silence is its own).
  for (const LiveAttempt::GoneTask& gone :
       a.attempt.TasksGone(now, core_.CutOff(now), core_.GoneAfterMs())) {
    const bool undecided = a.attempt.run->outcome().kind == Outcome::kUndecided;
    a.attempt.TaskGone(gone.task, gone.why, core_.ports().clock.NowMs(), c);
    const std::string reason = a.attempt.TaskNameOf(gone.task) + " is gone: " + gone.why;
    core_.Event(c, a, EventCode::kLost, reason);
    if (!undecided) {
      a.attempt.BlameNode();
      continue;
    }
    a.attempt.Fail({Outcome::kFailed, reason, EndReason::kNodeFail}, EndReason::kNodeFail);
    agents_.ReapRemaining(a, c, "attempt failed: " + reason);
    a.record.reason = "attempt " + std::to_string(a.attempt.number()) + " failed: " + reason +
                      "; stopping its tasks";
    a.record.updated_at = core_.ports().clock.NowMs();
    c.experiment = a.record;
  }
}

void SlurmWatch::CheckHeartbeats(OpenExperiment& a, int64_t now, Changes& c) {
  // Heartbeats: a task silent for several intervals is lost (it may come
  // back), unless every agent is silent: then the service is the one cut off.
  if (!core_.CutOff(now)) {
    const int64_t lost_after = core_.LostAfterMs();
    for (const auto& [task, silent_ms] : a.attempt.MarkSilentLost(
             now, lost_after, std::max(lost_after, int64_t{core_.config().reconnect_window_ms}), c))
      core_.Event(c, a, EventCode::kLost,
                  a.attempt.TaskNameOf(task) + " sent no heartbeat for " + Seconds(silent_ms));
  }
  a.attempt.FlushHeartbeats(c);
}

}  // namespace tfslurm
