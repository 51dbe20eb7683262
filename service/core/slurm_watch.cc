#include "service/core/slurm_watch.h"

#include <spdlog/spdlog.h>
#include <algorithm>

#include <chrono>
#include <csignal>
#include <unordered_map>

#include "service/core/restart_policy.h"
#include "service/core/wording.h"

namespace tfslurm {

struct SlurmWatch::Actions {
  std::vector<int64_t> cancel_jobs;
  std::vector<int64_t> kill_steps;
  std::vector<std::string> restarts;
  std::vector<std::string> resubmits;  // attempts `submitting` that Slurm does not have
};

void SlurmWatch::OnJobUpdate(OpenExperiment& a, const JobInfo* job, int64_t poll_seq, Changes& c) {
  if (a.attempt.record.state == AttemptState::kEnded ||
      a.attempt.record.state == AttemptState::kSubmitting)
    return;
  // Submitted while this poll's snapshot was being taken: absent from it,
  // not gone.
  if (!job && a.attempt.job_known_seq > poll_seq) return;
  if (!job) return OnJobGone(a, c);
  const bool changed = NoteJob(a, *job, c);
  if (!IsFinished(job->state) || job->completing) {
    if (changed) c.attempts.push_back(a.attempt.record);
    return;
  }
  OnJobEnded(a, *job, c);
}

void SlurmWatch::OnJobGone(OpenExperiment& a, Changes& c) {
  int64_t now = core_.ports().clock.NowMs();
  a.attempt.record.state = AttemptState::kEnded;
  a.attempt.record.ended_at = now;
  a.attempt.record.slurm_state = "UNKNOWN";
  c.attempts.push_back(a.attempt.record);
  const std::string job_n = "job " + std::to_string(a.attempt.record.slurm_job_id);
  const Outcome& o = a.attempt.run->outcome();
  std::string event = "Slurm no longer knows " + job_n;
  EndReason reason;
  std::string why = o.reason;
  // What the tasks reported before the job left decides, as it would have
  // with the job's final state.
  if (o.kind == Outcome::kSucceeded) {
    reason = EndReason::kSucceeded;
  } else if (a.attempt.decided_reason) {
    reason = *a.attempt.decided_reason;
  } else if (o.kind == Outcome::kFailed) {
    reason = o.retryable ? EndReason::kRetryableExit : EndReason::kPermanentExit;
  } else if (!a.attempt.job_seen) {
    // Not seen since this service started: the job ended while tfslurmd
    // was down, longer ago than Slurm's MinJobAge. Without accounting
    // (slurmdbd) nothing says how, and the agents' exit reports expired.
    event +=
        ": it ended while tfslurmd was down, and Slurm forgets finished jobs after "
        "MinJobAge; with no task report and no accounting, how it ended is unknown";
    reason = EndReason::kUnknown;
    why = job_n + " ended while tfslurmd was down; how is unknown";
  } else {
    // Seen by this service and gone before any report: Slurm lost it.
    reason = EndReason::kNodeFail;
    why = job_n + " vanished from Slurm";
  }
  core_.Event(c, a, "job", event);
  FinishAttempt(a, reason, why, c);
}

bool SlurmWatch::NoteJob(OpenExperiment& a, const JobInfo& job, Changes& c) {
  int64_t now = core_.ports().clock.NowMs();
  a.attempt.job_seen = true;
  a.attempt.component_job_ids.clear();
  for (const JobComponentInfo& comp : job.components)
    a.attempt.component_job_ids.push_back(comp.job_id);
  std::string state = JobStateName(job.state);
  bool changed = state != a.attempt.record.slurm_state || job.nodes != a.attempt.record.nodes;
  a.attempt.record.slurm_state = state;
  a.attempt.record.nodes = job.nodes;
  if (job.state == JobState::kRunning && !a.attempt.start_seen_in_slurm) {
    a.attempt.start_seen_in_slurm = true;
    if (!a.attempt.job_started_ms) a.attempt.job_started_ms = now;
    a.attempt.record.state = AttemptState::kRunning;
    if (!a.attempt.record.started_at) a.attempt.record.started_at = now;
    changed = true;
    for (int i = 0; i < a.attempt.run->size(); ++i) {
      // Within its component, task j runs on node j / tasks_per_node; the
      // components' nodes follow each other in node_names.
      const JobComponent& comp = a.attempt.run->components()[a.attempt.run->task(i).component];
      int node = comp.first_node + (i - comp.first_task) / comp.resources.tasks_per_node;
      if (node < static_cast<int>(job.node_names.size()) && a.attempt.tasks[i].node.empty())
        a.attempt.run->mutable_task(i).node = job.node_names[node];
    }
    core_.Event(c, a, "job",
                "Slurm job " + std::to_string(job.job_id) + " started on " + job.nodes);
    if (a.record.state == ExperimentState::kQueued)
      core_.SetState(c, a, ExperimentState::kStarting,
                     "job running on " + job.nodes + "; tasks registering");
  }
  if (job.state == JobState::kPending && a.record.state == ExperimentState::kQueued) {
    // Why it waits, in Slurm's words (job_info's state_reason: Resources,
    // Priority, a QOS limit, ReqNodeNotAvail...), as the reason users see.
    std::string why = "pending in Slurm as job " + std::to_string(job.job_id) + ": " +
                      (job.reason.empty() || job.reason == "None" ? std::string("not scheduled yet")
                                                                  : job.reason);
    if (why != a.record.reason) {
      a.record.reason = why;
      a.record.updated_at = now;
      c.experiment = a.record;
    }
  }
  return changed;
}

void SlurmWatch::OnJobEnded(OpenExperiment& a, const JobInfo& job, Changes& c) {
  int64_t now = core_.ports().clock.NowMs();
  const std::string state = JobStateName(job.state);
  a.attempt.record.state = AttemptState::kEnded;
  a.attempt.record.ended_at = now;
  a.attempt.record.exit_code = job.exit_signal ? 128 + job.exit_signal : job.exit_code;
  c.attempts.push_back(a.attempt.record);
  core_.Event(c, a, "job",
              "Slurm job " + std::to_string(job.job_id) + " ended " + state +
                  (job.reason.empty() || job.reason == "None" ? "" : " (" + job.reason + ")"));
  for (int i = 0; i < a.attempt.run->size(); ++i) {
    TaskSlot& slot = a.attempt.run->mutable_task(i);
    if (!slot.exited && a.attempt.tasks[i].state != TaskState::kPending) {
      // A task the service was reaping ended with the job: reaped, by Slurm
      // if its agent's report never came (the agent was killed with the
      // step, or reconnected too late after a service restart). Any other
      // task's end is unknown.
      const TaskState end = slot.shutdown_sent ? TaskState::kReaped : TaskState::kLost;
      slot.state = end;
      a.attempt.tasks[i].state = end;
      c.tasks.push_back(a.attempt.tasks[i]);
    }
  }
  if (a.user_cancelled) return;  // the experiment is cancelled already
  const Outcome& o = a.attempt.run->outcome();
  std::string why = "Slurm job " + std::to_string(job.job_id) + " " + state;
  // Success decided by the tasks stands, whatever the reaping did to the job.
  if (o.kind == Outcome::kSucceeded) return FinishAttempt(a, EndReason::kSucceeded, o.reason, c);
  switch (job.state) {
    case JobState::kTimeout:
    case JobState::kDeadline:
      return FinishAttempt(a, EndReason::kTimeout, why + " at its time limit", c);
    case JobState::kNodeFail:
    case JobState::kBootFail:
      a.suspects.nodes = job.node_names;
      a.suspects.only_if_down = true;
      a.suspects.why = "its attempt " + std::to_string(a.attempt.record.number) + " ended " + state;
      return FinishAttempt(a, EndReason::kNodeFail, why + " (" + job.reason + ")", c);
    case JobState::kPreempted:
      return FinishAttempt(a, EndReason::kPreempted, why + ": preempted by a higher-priority job",
                           c);
    default:
      break;
  }
  if (a.attempt.decided_reason) return FinishAttempt(a, *a.attempt.decided_reason, o.reason, c);
  if (o.kind == Outcome::kFailed)
    return FinishAttempt(a, o.retryable ? EndReason::kRetryableExit : EndReason::kPermanentExit,
                         o.reason, c);
  switch (job.state) {
    case JobState::kCompleted:
      return FinishAttempt(a, EndReason::kSucceeded, why, c);
    case JobState::kCancelled:
      a.user_cancelled = true;
      core_.EndAttempt(a, EndReason::kCancelled);
      a.attempt.record.reason = why + " outside tfslurm (scancel or an admin)";
      c.attempts.push_back(a.attempt.record);
      core_.SetState(c, a, ExperimentState::kCancelled, a.attempt.record.reason);
      return;
    case JobState::kOutOfMemory:
      return FinishAttempt(a, EndReason::kPermanentExit, why + ": out of memory", c);
    default: {
      std::optional<int> code = job.exit_code, sig;
      if (job.exit_signal) sig = job.exit_signal;
      return FinishAttempt(
          a, IsRetryableExit(code, sig) ? EndReason::kRetryableExit : EndReason::kPermanentExit,
          why + " with exit code " + std::to_string(a.attempt.record.exit_code), c);
    }
  }
}

void SlurmWatch::FinishAttempt(OpenExperiment& a, EndReason reason, const std::string& why,
                               Changes& c) {
  // Decided already (success by the agents, or a cancel): the job's end
  // only confirms it.
  if (a.attempt.record.end_reason) return;
  core_.EndAttempt(a, reason);
  a.attempt.record.reason = why;
  c.attempts.push_back(a.attempt.record);
  if (a.user_cancelled) return;  // already cancelled
  // Lost tasks (their heartbeats stopped) all on one node point at it.
  if (a.suspects.nodes.empty() && reason != EndReason::kSucceeded &&
      a.attempt.lost_nodes.size() == 1) {
    a.suspects.nodes = {*a.attempt.lost_nodes.begin()};
    a.suspects.only_if_down = false;
    a.suspects.why = "every task lost in attempt " + std::to_string(a.attempt.record.number) +
                     " (no heartbeat) ran on it";
  }
  AfterAttempt next =
      DecideAfterAttempt(a.spec.restart, reason, why, a.attempt.record.number, a.record.restarts);
  switch (next.action) {
    case AfterAttempt::kSucceed:
      return core_.SetState(c, a, ExperimentState::kSucceeded, next.why);
    case AfterAttempt::kFail:
      return core_.SetState(c, a, ExperimentState::kFailed, next.why);
    case AfterAttempt::kRestart:
      core_.metrics().Restarted(reason);
      a.record.restarts++;
      a.record.next_attempt_at = core_.ports().clock.NowMs() + next.delay_ms;
      return core_.SetState(c, a, ExperimentState::kRestarting, next.why);
  }
}

void SlurmWatch::CheckTimers(OpenExperiment& a, Changes& c, Actions& actions) {
  const int64_t now = core_.ports().clock.NowMs();
  CheckBarrier(a, now, c, actions);
  CheckStall(a, now, c);
  CheckReaping(a, now, c, actions);
  RepeatCancel(a, now, actions);
  CheckHeartbeats(a, now, c);
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
    run.Decide({Outcome::kFailed, why});
    a.attempt.decided_reason = EndReason::kStartFailed;
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
    core_.Event(c, a, "stalled", why);
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
    if (!unconfirmed.empty()) {
      std::string names;
      for (int proc : unconfirmed)
        names += (names.empty() ? "" : ", ") + TaskName(run.task(proc), proc);
      core_.Event(c, a, "reaping",
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

void SlurmWatch::CheckHeartbeats(OpenExperiment& a, int64_t now, Changes& c) {
  AttemptRun& run = *a.attempt.run;
  // Heartbeats: a task silent for several intervals is lost (it may come back).
  int64_t lost_after =
      int64_t{core_.config().heartbeat_interval_ms} * core_.config().lost_after_missed_heartbeats;
  for (int i = 0; i < run.size(); ++i) {
    TaskRecord& t = a.attempt.tasks[i];
    // Agents heartbeat once they run their program; at the barrier the
    // barrier timeout watches them instead.
    if (t.state != TaskState::kRunning) continue;
    const int64_t limit = run.task(i).vanished
                              ? std::max(lost_after, core_.config().reconnect_window_ms)
                              : lost_after;
    if (now - t.last_heartbeat > limit) {
      t.state = TaskState::kLost;
      if (!t.node.empty()) a.attempt.lost_nodes.insert(t.node);
      a.attempt.heartbeat_dirty.erase(i);
      c.tasks.push_back(t);
      core_.Event(
          c, a, "lost",
          TaskName(run.task(i), i) + " sent no heartbeat for " + Seconds(now - t.last_heartbeat));
    }
  }
  for (int i : a.attempt.heartbeat_dirty) c.tasks.push_back(a.attempt.tasks[i]);
  a.attempt.heartbeat_dirty.clear();
}

void SlurmWatch::Tick() {
  int64_t now = core_.ports().clock.NowMs();
  std::optional<std::unordered_map<int64_t, const JobInfo*>> by_id;
  StatusOr<std::vector<JobInfo>> jobs = std::vector<JobInfo>{};
  int64_t last_poll = last_poll_ms_.load();
  // Of concurrent Ticks, only the one that moves last_poll_ms_ polls.
  bool poll = now - last_poll >= core_.config().poll_interval_ms &&
              last_poll_ms_.compare_exchange_strong(last_poll, now);
  const int64_t poll_seq = core_.LastJobSeq();
  if (poll) {
    bool any_open = false;
    {
      MutexLock lock(core_.mu());
      any_open = !core_.open().empty();
    }
    if (any_open) {
      const auto started = std::chrono::steady_clock::now();
      jobs = core_.ports().slurm.LoadJobs();
      if (jobs.ok()) *jobs = GroupHetJobs(std::move(jobs).value());
      core_.metrics().SlurmPolled(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
          jobs.ok());
      if (jobs.ok()) {
        by_id.emplace();
        for (const auto& j : *jobs) (*by_id)[j.job_id] = &j;
      } else {
        spdlog::warn("poll failed: {}", jobs.status().message());
      }
    }
  }

  Actions actions;
  {
    MutexLock lock(core_.mu());
    // Every experiment's changes in one transaction: a poll that finds a
    // hundred jobs ended (a user cancelling a sweep) holds core's lock and the
    // store for one commit, not a hundred.
    std::vector<Changes> batch;
    for (auto it = core_.open().begin(); it != core_.open().end();) {
      OpenExperiment& a = *it->second;
      Changes c;
      if (a.attempt.record.state == AttemptState::kSubmitting) {
        // The poll began at `now`, after the failure that set reconcile_at_ms.
        if (by_id && now >= a.attempt.reconcile_at_ms) ReconcileSubmission(a, *jobs, c, actions);
      } else if (by_id && a.attempt.record.slurm_job_id) {
        // A job with the attempt's id but another name is not the attempt's:
        // job ids start again from FirstJobId when a slurmctld loses its
        // state, or when the database moves to another cluster (a Slurm
        // upgrade that cannot carry the jobs over).
        auto j = by_id->find(a.attempt.record.slurm_job_id);
        const JobInfo* job =
            j != by_id->end() && j->second->name == a.attempt.record.job_name ? j->second : nullptr;
        OnJobUpdate(a, job, poll_seq, c);
      }
      CheckTimers(a, c, actions);
      if (!c.empty()) batch.push_back(std::move(c));
      // Done when the experiment is final and its last job has left Slurm.
      if (IsTerminal(a.record.state) && a.attempt.record.state == AttemptState::kEnded)
        it = core_.open().erase(it);
      else
        ++it;
    }
    core_.CommitAll(batch);
  }
  RunActions(actions);
}

void SlurmWatch::RunActions(Actions& actions) {
  // A cancel that fails is repeated while the job runs (CheckTimers); a step
  // that stays is ended with its job when the attempt's end cancels it.
  for (int64_t job : actions.kill_steps)
    if (Status s = core_.ports().slurm.SignalStep(job, 0, SIGKILL); !s.ok())
      spdlog::warn("ending step {}.0: {}", job, s.message());
  for (int64_t job : actions.cancel_jobs)
    if (Status s = core_.ports().slurm.CancelJob(job, SIGKILL); !s.ok())
      spdlog::warn("cancelling Slurm job {}: {}", job, s.message());
  for (const std::string& id : actions.restarts) {
    MutexLock lock(core_.mu());
    auto it = core_.open().find(id);
    if (it == core_.open().end() || it->second->record.state != ExperimentState::kRestarting)
      continue;
    OpenExperiment& a = *it->second;
    const int number = a.attempt.record.number + 1;
    submission_.SubmitAutomatically(a, number, "attempt " + std::to_string(number) + " submitted");
  }
  for (const std::string& id : actions.resubmits) {
    MutexLock lock(core_.mu());
    auto it = core_.open().find(id);
    if (it == core_.open().end() || it->second->attempt.record.state != AttemptState::kSubmitting ||
        it->second->user_cancelled)
      continue;
    submission_.SubmitAutomatically(*it->second, it->second->attempt.record.number);
  }
}

// Slurm may or may not have the job of an attempt still `submitting`: the
// newest job with its name is adopted; without one, the attempt is submitted
// (again). The job name is unique per experiment and attempt.
void SlurmWatch::ReconcileSubmission(OpenExperiment& a, const std::vector<JobInfo>& jobs,
                                     Changes& c, Actions& actions) {
  const JobInfo* match = nullptr;
  for (const auto& j : jobs)
    if (j.name == a.attempt.record.job_name && (!match || j.job_id > match->job_id)) match = &j;
  if (match) {
    a.attempt.record.slurm_job_id = match->job_id;
    a.attempt.record.state = AttemptState::kPending;
    a.attempt.job_known_seq = core_.NextJobSeq();
    a.submit_failures = 0;
    a.attempt.job_seen = true;
    c.attempts.push_back(a.attempt.record);
    core_.Event(c, a, "recovered",
                "found Slurm job " + std::to_string(match->job_id) + " (" +
                    a.attempt.record.job_name +
                    "), whose submission was not confirmed; adopting it");
    if (a.user_cancelled) {
      // Cancelled while its submission was in doubt.
      actions.cancel_jobs.push_back(match->job_id);
      a.attempt.job_cancel_sent = true;
      a.attempt.cancel_sent_at_ms = core_.ports().clock.NowMs();
    }
    return;
  }
  if (a.user_cancelled) {
    a.attempt.record.state = AttemptState::kEnded;
    a.attempt.record.ended_at = core_.ports().clock.NowMs();
    c.attempts.push_back(a.attempt.record);
    core_.Event(c, a, "recovered",
                "Slurm has no job " + a.attempt.record.job_name +
                    "; the experiment is cancelled: not submitted");
    return;
  }
  core_.Event(c, a, "recovered",
              "Slurm has no job " + a.attempt.record.job_name +
                  " (its submission was interrupted or refused); submitting it now");
  actions.resubmits.push_back(a.record.id);
}

Status SlurmWatch::Recover() {
  auto open = core_.ports().store.ListOpenExperiments();
  if (!open.ok()) return open.status();
  std::vector<OpenExperiment*> submitting;
  {
    MutexLock lock(core_.mu());
    for (const ExperimentRecord& r : *open) {
      auto a = core_.Load(r);
      if (!a.ok()) {
        spdlog::error("{}", a.status().message());
        continue;
      }
      OpenExperiment& loaded = **a;
      if (loaded.attempt.record.state == AttemptState::kSubmitting) submitting.push_back(&loaded);
      if (!IsTerminal(loaded.record.state) && loaded.record.state != ExperimentState::kRestarting &&
          loaded.attempt.record.state == AttemptState::kEnded) {
        // An open experiment whose last attempt has ended, with no newer
        // one: tfslurmd before this version recorded `queued` for a restart
        // or a resume ahead of the next attempt's intent, and stopped or
        // failed in between. Nothing else moves it: restart it now.
        Changes c;
        loaded.record.next_attempt_at = core_.ports().clock.NowMs();
        core_.SetState(
            c, loaded, ExperimentState::kRestarting,
            "attempt " + std::to_string(loaded.attempt.record.number) + " has ended and attempt " +
                std::to_string(loaded.attempt.record.number + 1) +
                " was never recorded (tfslurmd stopped or failed in between); submitting "
                "it now");
        core_.Commit(c);
      }
      core_.open()[r.id] = std::move(a).value();
    }
  }
  if (submitting.empty()) return Status::Ok();
  // Submissions interrupted by a crash: Slurm may or may not have the job.
  // One query finds them by name, so none is submitted twice. If slurmctld
  // does not answer now, Tick tries again at every poll.
  auto jobs = core_.ports().slurm.LoadJobs();
  if (!jobs.ok()) return jobs.status();
  *jobs = GroupHetJobs(std::move(jobs).value());
  Actions actions;
  {
    MutexLock lock(core_.mu());
    for (OpenExperiment* a : submitting) {
      Changes c;
      ReconcileSubmission(*a, *jobs, c, actions);
      core_.Commit(c);
    }
  }
  RunActions(actions);
  return Status::Ok();
}

}  // namespace tfslurm
