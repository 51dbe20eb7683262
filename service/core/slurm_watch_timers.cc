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
void TakeShrink(LiveAttempt& at, std::vector<std::pair<int64_t, std::string>>& shrink_jobs) {
  if (at.shrink_to.empty()) return;
  shrink_jobs.emplace_back(at.record.slurm_job_id, std::move(at.shrink_to));
  at.shrink_to.clear();
}

}  // namespace

void SlurmWatch::CheckInPlace(OpenExperiment& a, int64_t now, Changes& c, Actions& actions) {
  const InPlaceCheck check = in_place_.Decide(a, now, c);
  if (check.kind == InPlaceCheck::kReady) return FinishAttempt(a, check.reason, check.why, c);
  if (check.kind == InPlaceCheck::kGiveUp) {
    actions.cancel_jobs.push_back(a.attempt.record.slurm_job_id);
    a.attempt.job_cancel_sent = true;
  }
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
    while (at.standby_scan_from < run.size() && run.task(at.standby_scan_from).standing_by())
      ++at.standby_scan_from;
    if (at.standby_scan_from < run.size()) return;
    Changes c;
    CheckInPlace(a, core_.ports().clock.NowMs(), c, actions);
    TakeShrink(at, actions.shrink_jobs);
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
  TakeShrink(a.attempt, actions.shrink_jobs);  // this Tick's restart in place, or an agent's
  if (a.record.state == ExperimentState::kRestarting &&
      a.attempt.record.state == AttemptState::kEnded && now >= a.record.next_attempt_at)
    actions.restarts.push_back(a.record.id);
}

void SlurmWatch::CheckBarrier(OpenExperiment& a, int64_t now, Changes& c, Actions& actions) {
  AttemptRun& run = *a.attempt.run;
  // The barrier: every task must register within the timeout of the job's start.
  if (a.attempt.job_started_ms && !run.assignments_sent() &&
      run.outcome().kind == Outcome::kUndecided &&
      a.attempt.record.state == AttemptState::kRunning &&
      now - a.attempt.job_started_ms > core_.config().barrier_timeout_ms) {
    std::vector<int> missing = run.MissingRegistrations();
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
        missing.empty() ? std::nullopt : ContainerStartFailure(a, missing.front());
    if (container)
      why += "; the container did not start for " +
             TaskName(run.task(missing.front()), missing.front()) + ": " + *container;
    run.Decide({Outcome::kFailed, why});
    a.attempt.decided_reason = container ? EndReason::kStartupError : EndReason::kStartFailed;
    agents_.ReapRemaining(a, c, why);
    a.record.reason = why + "; cancelling the job";
    c.experiment = a.record;
    if (!a.attempt.job_cancel_sent && a.attempt.record.slurm_job_id) {
      actions.cancel_jobs.push_back(a.attempt.record.slurm_job_id);
      a.attempt.job_cancel_sent = true;
    }
  }
}

void SlurmWatch::CheckStall(OpenExperiment& a, int64_t now, Changes& c) {
  AttemptRun& run = *a.attempt.run;
  // A hang: training runs (its agents may well heartbeat) but makes no new
  // step. The attempt ends like a failure, as its own restart class.
  const int64_t stall_ms = int64_t{a.spec.stall_timeout_s} * 1000;
  if (stall_ms > 0 && run.assignments_sent() && run.outcome().kind == Outcome::kUndecided &&
      a.attempt.last_progress_ms > 0 && now - a.attempt.last_progress_ms > stall_ms) {
    std::string alive;
    int alive_count = 0;
    for (int i = 0; i < run.size(); ++i) {
      const TaskRecord& t = a.attempt.tasks[i];
      if (run.task(i).exited || t.state == TaskState::kLost ||
          now - t.last_heartbeat > 2 * int64_t{core_.config().heartbeat_interval_ms})
        continue;
      if (++alive_count <= 20) alive += (alive.empty() ? "" : ", ") + TaskName(run.task(i), i);
    }
    // Tasks that stopped heartbeating, all on one node, point at it.
    std::set<std::string> silent_nodes;
    for (int i = 0; i < run.size(); ++i) {
      const TaskRecord& t = a.attempt.tasks[i];
      if (!run.task(i).exited && !t.node.empty() &&
          now - t.last_heartbeat > 2 * int64_t{core_.config().heartbeat_interval_ms})
        silent_nodes.insert(t.node);
    }
    if (silent_nodes.size() == 1 && alive_count > 0) {
      a.suspects.nodes = {*silent_nodes.begin()};
      a.suspects.only_if_down = false;
      a.suspects.why = "attempt " + std::to_string(a.attempt.record.number) +
                       " stalled and only its tasks there had stopped heartbeating";
    }
    if (alive_count > 20) alive += ", ...";
    // The latest step seen: a checkpoint's or a training scalar's.
    std::optional<int64_t> last_step = a.record.checkpoint_step;
    if (a.attempt.max_scalar_step && (!last_step || *a.attempt.max_scalar_step > *last_step))
      last_step = a.attempt.max_scalar_step;
    std::string last = last_step ? "the last, step " + std::to_string(*last_step) + ", came " +
                                       Seconds(now - a.attempt.last_progress_ms) + " ago"
                                 : "none since training started " +
                                       Seconds(now - a.attempt.last_progress_ms) + " ago";
    std::string why = "stalled: no new step for " + Seconds(stall_ms) +
                      " (progress.stall_timeout_s); " + last + "; " + std::to_string(alive_count) +
                      " of " + std::to_string(run.size()) + " tasks still heartbeating" +
                      (alive.empty() ? "" : ": " + alive);
    run.Decide({Outcome::kFailed, why});
    a.attempt.decided_reason = EndReason::kStalled;
    core_.Event(c, a, EventCode::kStalled, why);
    agents_.ReapRemaining(a, c, why);
    a.record.reason = why + "; ending the attempt";
    c.experiment = a.record;
  }
}

void SlurmWatch::CheckReaping(OpenExperiment& a, int64_t now, Changes& c, Actions& actions) {
  AttemptRun& run = *a.attempt.run;
  // Reaping: tasks that did not confirm within the grace are ended by Slurm.
  if (a.attempt.reap_deadline_ms && now >= a.attempt.reap_deadline_ms && !a.attempt.step_killed &&
      a.attempt.record.state != AttemptState::kEnded) {
    std::vector<int> unconfirmed = run.UnconfirmedShutdowns();
    // Every task confirmed, and the job may host the next attempt: the
    // restart in place decides (CheckInPlace), not the deadline.
    if (unconfirmed.empty() && a.spec.restart.in_allocation &&
        a.attempt.in_place_given_up.empty() && !a.user_cancelled)
      return;
    if (!unconfirmed.empty()) {
      std::string names;
      for (int proc : unconfirmed)
        names += (names.empty() ? "" : ", ") + TaskName(run.task(proc), proc);
      core_.Event(c, a, EventCode::kReaping,
                  names + " did not confirm the Shutdown; ending step " +
                      std::to_string(a.attempt.record.slurm_job_id) + ".0 through Slurm");
      // A heterogeneous job's step has a part in each component's record.
      if (a.attempt.component_job_ids.empty())
        actions.kill_steps.push_back(a.attempt.record.slurm_job_id);
      else
        actions.kill_steps.insert(actions.kill_steps.end(), a.attempt.component_job_ids.begin(),
                                  a.attempt.component_job_ids.end());
    }
    a.attempt.step_killed = true;
    if (a.spec.restart.in_allocation && a.attempt.in_place_given_up.empty())
      a.attempt.in_place_given_up =
          std::to_string(unconfirmed.size()) + " tasks did not confirm their Shutdown in time";
    // A failed attempt's job has nothing left to do.
    if (run.outcome().kind == Outcome::kFailed && !a.attempt.job_cancel_sent) {
      actions.cancel_jobs.push_back(a.attempt.record.slurm_job_id);
      a.attempt.job_cancel_sent = true;
    }
  }
}

void SlurmWatch::RepeatCancel(OpenExperiment& a, int64_t now, Actions& actions) {
  // A cancel Slurm did not act on (slurmctld down, a lost RPC) is repeated
  // while the job is still there.
  if (a.user_cancelled && a.attempt.record.slurm_job_id &&
      a.attempt.record.state != AttemptState::kEnded &&
      now - a.attempt.cancel_sent_at_ms > 10 * core_.config().poll_interval_ms) {
    actions.cancel_jobs.push_back(a.attempt.record.slurm_job_id);
    a.attempt.cancel_sent_at_ms = now;
  }
}

void SlurmWatch::CheckNodesLeft(OpenExperiment& a, int64_t now, Changes& c) {
  LiveAttempt& at = a.attempt;
  AttemptRun& run = *at.run;
  if (at.record.state != AttemptState::kRunning || !run.assignments_sent()) return;
  // Silent past the reconnect window: gone, with or without spare nodes
  // (docs/restarts.md, "Network faults"); never while the service hears
  // no agent at all (the silence is its own).
  const bool deaf = core_.CutOff(now);
  const std::string job_n = "Slurm job " + std::to_string(at.record.slurm_job_id);
  for (int i = 0; i < run.size(); ++i) {
    const TaskSlot& slot = run.task(i);
    if (!slot.registered || slot.exited || slot.restarting_alone) continue;
    const bool left = NodeLeftJob(at, slot.node);
    const bool silent = at.tasks[i].state == TaskState::kLost && !deaf &&
                        now - at.tasks[i].last_heartbeat > core_.GoneAfterMs();
    if (!left && !silent) continue;
    const std::string why =
        left ? "its node left " + job_n +
                   ": Slurm took it out of the job (a node failure; the job runs on, --no-kill)"
             : "its node stopped answering (no heartbeat)";
    const bool undecided = run.outcome().kind == Outcome::kUndecided;
    run.OnExit(i, std::nullopt, SIGKILL, /*reaped=*/false, why, /*at_startup=*/false);
    TaskRecord& t = at.tasks[i];
    t.state = TaskState::kLost;
    t.signal = SIGKILL;
    t.detail = why;
    t.ended_at = core_.ports().clock.NowMs();
    if (!slot.node.empty()) at.lost_nodes.insert(slot.node);
    c.tasks.push_back(t);
    core_.Event(c, a, EventCode::kLost, TaskName(slot, i) + " is gone: " + why);
    if (!undecided) {
      // The peers it left often fail first (a collective's broken
      // connection, counted retryable after its agent vanished): the node
      // is the cause, and its class is the attempt's.
      if (!at.decided_reason && run.outcome().kind == Outcome::kFailed &&
          run.outcome().failure == EndReason::kRetryableExit)
        at.decided_reason = EndReason::kNodeFail;
      continue;
    }
    const std::string reason = TaskName(slot, i) + " is gone: " + why;
    run.Decide({Outcome::kFailed, reason, EndReason::kNodeFail});
    at.decided_reason = EndReason::kNodeFail;
    agents_.ReapRemaining(a, c, "attempt failed: " + reason);
    a.record.reason = "attempt " + std::to_string(at.record.number) + " failed: " + reason +
                      "; stopping its tasks";
    a.record.updated_at = core_.ports().clock.NowMs();
    c.experiment = a.record;
  }
}

void SlurmWatch::CheckHeartbeats(OpenExperiment& a, int64_t now, Changes& c) {
  AttemptRun& run = *a.attempt.run;
  // Heartbeats: a task silent for several intervals is lost (it may come
  // back), unless every agent is silent: then the service is the one cut off.
  const int64_t lost_after = core_.LostAfterMs();
  const bool deaf = core_.CutOff(now);
  for (int i = 0; i < run.size(); ++i) {
    TaskRecord& t = a.attempt.tasks[i];
    // Agents heartbeat once they run their program; at the barrier the
    // barrier timeout watches them instead.
    if (t.state != TaskState::kRunning || deaf) continue;
    const int64_t limit = run.task(i).vanished()
                              ? std::max(lost_after, core_.config().reconnect_window_ms)
                              : lost_after;
    if (now - t.last_heartbeat > limit) {
      t.state = TaskState::kLost;
      if (!t.node.empty()) a.attempt.lost_nodes.insert(t.node);
      a.attempt.heartbeat_dirty.erase(i);
      c.tasks.push_back(t);
      core_.Event(
          c, a, EventCode::kLost,
          TaskName(run.task(i), i) + " sent no heartbeat for " + Seconds(now - t.last_heartbeat));
    }
  }
  for (int i : a.attempt.heartbeat_dirty) c.tasks.push_back(a.attempt.tasks[i]);
  a.attempt.heartbeat_dirty.clear();
}

}  // namespace tfslurm
