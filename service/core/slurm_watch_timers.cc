// SlurmWatch's timers (slurm_watch.h): the barrier, stalls, reaping,
// repeated cancels, heartbeats and nodes gone, restarts in place, run at
// every Tick for each open experiment. The attempt decides each in one
// step (LiveAttempt's timers' decisions); these do what is the part's own:
// events, the experiment's reason and suspects, the reaping, Slurm's calls.
#include <algorithm>
#include <optional>
#include <string>

#include "service/core/slurm_watch.h"

namespace tfslurm {

void SlurmWatch::CheckInPlace(OpenExperiment& a, int64_t now, Changes& c, Actions& actions) {
  const InPlaceCheck check = in_place_.Decide(a, now, c);
  if (check.kind == InPlaceCheck::kReady) FinishAttempt(a, check.reason, check.why, c);
  // The attempt current now (the next one, if it began in place here)
  // says what Slurm is to do, as it does after a standby that began one.
  a.attempt.AfterInPlaceCheck(check.kind == InPlaceCheck::kGiveUp, actions.cancel_jobs,
                              actions.shrink_jobs);
}

void SlurmWatch::OnStandby(const std::string& id) {
  Actions actions;
  bool queued = false;
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
    // The next attempt's every task row: written once core's lock is
    // released, so that its agents' registrations, which the NextAttempts
    // just sent bring, need not wait for them.
    queued = core_.CommitAfterUnlock(c);
  }
  if (queued) core_.WriteQueued();
  RunActions(actions);
}

void SlurmWatch::CheckTimers(OpenExperiment& a, Changes& c, Actions& actions) {
  const int64_t now = core_.ports().clock.NowMs();
  CheckBarrier(a, now, c, actions);
  CheckStall(a, now, c);
  CheckReaping(a, now, c, actions);
  RepeatCancel(a, now, actions);
  CheckAgents(a, now, c);
  CheckInPlace(a, now, c, actions);
  if (a.record.state == ExperimentState::kRestarting && now >= a.record.next_attempt_at)
    if (std::optional<int> next = a.attempt.Successor())
      actions.restarts.emplace_back(a.record.id, *next);
}

void SlurmWatch::CheckBarrier(OpenExperiment& a, int64_t now, Changes& c, Actions& actions) {
  // The barrier: every task must register within the timeout of the job's start.
  const std::optional<LiveAttempt::BarrierMiss> miss =
      a.attempt.MissedBarrier(now, core_.config().barrier_timeout_ms);
  if (!miss) return;
  // A task that never started because its container did not: the
  // runtime's words, and a failure that repeats at every start.
  const std::optional<std::string> container =
      miss->first ? ContainerStartFailure(a, a.ProcOfTask(*miss->first)) : std::nullopt;
  const std::string why = a.attempt.FailAtBarrier(*miss, container, actions.cancel_jobs);
  agents_.ReapRemaining(a, c, why);
  a.record.reason = why + "; cancelling the job";
  c.experiment = a.record;
}

void SlurmWatch::CheckStall(OpenExperiment& a, int64_t now, Changes& c) {
  // A hang: training runs (its agents may well heartbeat) but makes no new
  // step. The attempt ends like a failure, as its own restart class.
  const std::optional<LiveAttempt::Stall> stall = a.attempt.FailStalled(
      now, int64_t{a.spec.stall_timeout_s} * 1000,
      2 * int64_t{core_.config().heartbeat_interval_ms}, a.record.checkpoint_step);
  if (!stall) return;
  if (stall->suspect_node) {
    a.suspects.nodes = {*stall->suspect_node};
    a.suspects.only_if_down = false;
    a.suspects.why = stall->suspect_why;
  }
  core_.Event(c, a, EventCode::kStalled, stall->why);
  agents_.ReapRemaining(a, c, stall->why);
  a.record.reason = stall->why + "; ending the attempt";
  c.experiment = a.record;
}

void SlurmWatch::CheckReaping(OpenExperiment& a, int64_t now, Changes& c, Actions& actions) {
  // Reaping: tasks that did not confirm within the grace are ended by Slurm.
  const LiveAttempt::StepEnd end = a.attempt.EndOverdueStep(now, a.spec.restart.in_allocation,
                                                            a.user_cancelled, actions.cancel_jobs);
  if (end.event.empty()) return;
  core_.Event(c, a, EventCode::kReaping, end.event);
  actions.kill_steps.insert(actions.kill_steps.end(), end.kill_steps.begin(), end.kill_steps.end());
}

void SlurmWatch::RepeatCancel(OpenExperiment& a, int64_t now, Actions& actions) {
  // A cancel Slurm did not act on (slurmctld down, a lost RPC) is repeated
  // while the job is still there.
  if (a.user_cancelled)
    a.attempt.RepeatCancel(now, 10 * int64_t{core_.config().poll_interval_ms}, actions.cancel_jobs);
}

void SlurmWatch::CheckAgents(OpenExperiment& a, int64_t now, Changes& c) {
  // Heartbeats: a task silent for several intervals is lost (it may come
  // back), unless every agent is silent: then the service is the one cut
  // off. Silent past the reconnect window, its node is gone, with or
  // without spare nodes (docs/restarts.md, "Network faults"), as it is
  // when Slurm takes the node out of a --no-kill job.
  const int64_t lost_after = core_.LostAfterMs();
  const LiveAttempt::Heard heard = a.attempt.HeardAt(
      now, core_.CutOff(now), lost_after,
      std::max(lost_after, int64_t{core_.config().reconnect_window_ms}), core_.GoneAfterMs(), c);
  for (const std::string& lost : heard.lost) core_.Event(c, a, EventCode::kLost, lost);
  for (const LiveAttempt::GoneTask& gone : heard.gone) {
    const LiveAttempt::LostTask lost = a.attempt.EndGoneTask(gone, core_.ports().clock.NowMs(), c);
    core_.Event(c, a, EventCode::kLost, lost.event);
    if (lost.failed.empty()) continue;
    agents_.ReapRemaining(a, c, "attempt failed: " + lost.event);
    a.record.reason = lost.failed + "; stopping its tasks";
    a.record.updated_at = core_.ports().clock.NowMs();
    c.experiment = a.record;
  }
}

}  // namespace tfslurm
