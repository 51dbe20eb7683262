// LiveAttempt (open_experiment.h), the part SlurmWatch asks: its job as
// Slurm's polls see it (Polled, EndedAs, Reconcile, Recovered), the timers'
// questions (barrier, stall, reaping, heartbeats, nodes gone) and the
// decisions each makes in one step, and its end. The agents' part is in
// open_experiment.cc.
//
// Thread safety: CoreState's lock guards every LiveAttempt.
#include <csignal>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "service/core/open_experiment.h"
#include "service/core/wording.h"

namespace tfslurm {

bool LiveAttempt::ReapOverdue(int64_t now) const {
  return reap_deadline_ms && now >= reap_deadline_ms && !step_killed &&
         record.state != AttemptState::kEnded;
}

std::vector<int64_t> LiveAttempt::StepJobIds() const {
  if (component_job_ids.empty()) return {record.slurm_job_id};
  return component_job_ids;
}

void LiveAttempt::StepKilled(const std::string& why) {
  step_killed = true;
  if (in_place_given_up.empty()) in_place_given_up = why;
}

void LiveAttempt::Fail(const Outcome& outcome, EndReason reason) {
  run->Decide(outcome);
  decided_reason = reason;
}

void LiveAttempt::CancelJobOnce(std::vector<int64_t>& cancel_jobs) {
  if (job_cancel_sent || !record.slurm_job_id) return;
  cancel_jobs.push_back(record.slurm_job_id);
  job_cancel_sent = true;
}

void LiveAttempt::RepeatCancel(int64_t now, int64_t every_ms, std::vector<int64_t>& cancel_jobs) {
  if (!record.slurm_job_id || record.state == AttemptState::kEnded ||
      now - cancel_sent_at_ms <= every_ms)
    return;
  cancel_jobs.push_back(record.slurm_job_id);
  cancel_sent_at_ms = now;
}

std::optional<std::pair<int64_t, std::string>> LiveAttempt::TakeShrink() {
  if (shrink_to.empty()) return std::nullopt;
  std::pair<int64_t, std::string> shrink{record.slurm_job_id, std::move(shrink_to)};
  shrink_to.clear();
  return shrink;
}

bool LiveAttempt::BarrierTimedOut(int64_t now, int64_t timeout_ms) const {
  return job_started_ms && !run->assignments_sent() && run->outcome().kind == Outcome::kUndecided &&
         record.state == AttemptState::kRunning && now - job_started_ms > timeout_ms;
}

std::optional<int64_t> LiveAttempt::StalledFor(int64_t now, int64_t stall_ms) const {
  if (stall_ms <= 0 || !run->assignments_sent() || run->outcome().kind != Outcome::kUndecided ||
      last_progress_ms <= 0 || now - last_progress_ms <= stall_ms)
    return std::nullopt;
  return now - last_progress_ms;
}

std::optional<int64_t> LiveAttempt::LastStep(std::optional<int64_t> checkpoint_step) const {
  if (max_scalar_step && (!checkpoint_step || *max_scalar_step > *checkpoint_step))
    return max_scalar_step;
  return checkpoint_step;
}

LiveAttempt::Liveness LiveAttempt::LivenessAt(int64_t now, int64_t silent_after_ms) const {
  Liveness l;
  for (TaskIndex i : run->indices()) {
    const TaskRecord& t = tasks[i.value()];
    if (run->task(i).exited()) continue;
    const bool silent = now - t.last_heartbeat > silent_after_ms;
    if (silent && !t.node.empty()) l.silent_nodes.insert(t.node);
    if (silent || t.state == TaskState::kLost) continue;
    if (++l.alive_count <= 20) l.alive += (l.alive.empty() ? "" : ", ") + TaskNameOf(i);
  }
  if (l.alive_count > 20) l.alive += ", ...";
  return l;
}

std::vector<LiveAttempt::GoneTask> LiveAttempt::TasksGone(int64_t now, bool deaf,
                                                          int64_t gone_after_ms) const {
  std::vector<GoneTask> gone;
  if (record.state != AttemptState::kRunning || !run->assignments_sent()) return gone;
  const std::string job_n = "Slurm job " + std::to_string(record.slurm_job_id);
  for (TaskIndex i : run->indices()) {
    const TaskSlot& slot = run->task(i);
    if (!slot.registered() || slot.exited() || slot.restarting_alone()) continue;
    const bool left = NodeLeftJob(*this, slot.node);
    const bool silent = tasks[i.value()].state == TaskState::kLost && !deaf &&
                        now - tasks[i.value()].last_heartbeat > gone_after_ms;
    if (left)
      gone.push_back({i, "its node left " + job_n +
                             ": Slurm took it out of the job (a node failure; the job runs on, "
                             "--no-kill)"});
    else if (silent)
      gone.push_back({i, "its node stopped answering (no heartbeat)"});
  }
  return gone;
}

void LiveAttempt::TaskGone(TaskIndex task, const std::string& why, int64_t now, Changes& c) {
  run->OnExit(task, std::nullopt, SIGKILL, /*reaped=*/false, why, /*at_startup=*/false);
  TaskRecord& t = tasks[task.value()];
  t.state = TaskState::kLost;
  t.signal = SIGKILL;
  t.detail = why;
  t.ended_at = now;
  const std::string& node = run->task(task).node;
  if (!node.empty()) lost_nodes.insert(node);
  c.tasks.push_back(t);
}

void LiveAttempt::BlameNode() {
  if (!decided_reason && run->outcome().kind == Outcome::kFailed &&
      run->outcome().failure == EndReason::kRetryableExit)
    decided_reason = EndReason::kNodeFail;
}

std::vector<std::pair<TaskIndex, int64_t>> LiveAttempt::MarkSilentLost(int64_t now,
                                                                       int64_t lost_after_ms,
                                                                       int64_t vanished_after_ms,
                                                                       Changes& c) {
  std::vector<std::pair<TaskIndex, int64_t>> lost;
  for (TaskIndex i : run->indices()) {
    TaskRecord& t = tasks[i.value()];
    // Agents heartbeat once they run their program; at the barrier the
    // barrier timeout watches them instead.
    if (t.state != TaskState::kRunning) continue;
    const int64_t limit = run->task(i).vanished() ? vanished_after_ms : lost_after_ms;
    if (now - t.last_heartbeat <= limit) continue;
    t.state = TaskState::kLost;
    if (!t.node.empty()) lost_nodes.insert(t.node);
    heartbeat_dirty.erase(i);
    c.tasks.push_back(t);
    lost.emplace_back(i, now - t.last_heartbeat);
  }
  return lost;
}

void LiveAttempt::FlushHeartbeats(Changes& c) {
  for (TaskIndex i : heartbeat_dirty) c.tasks.push_back(tasks[i.value()]);
  heartbeat_dirty.clear();
}

std::optional<LiveAttempt::BarrierMiss> LiveAttempt::MissedBarrier(int64_t now,
                                                                   int64_t timeout_ms) const {
  if (!BarrierTimedOut(now, timeout_ms)) return std::nullopt;
  const std::vector<TaskIndex> missing = run->MissingRegistrations();
  std::string names;
  for (size_t i = 0; i < missing.size() && i < 20; ++i)
    names += (i ? ", " : "") + TaskNameOf(missing[i]);
  if (missing.size() > 20) names += ", ...";
  BarrierMiss miss;
  miss.why = "barrier timeout after " + Seconds(timeout_ms) + ": " +
             std::to_string(missing.size()) + " of " + std::to_string(run->size()) +
             " tasks never registered: " + names;
  if (!missing.empty()) miss.first = missing.front();
  return miss;
}

std::string LiveAttempt::FailAtBarrier(const BarrierMiss& miss,
                                       const std::optional<std::string>& container,
                                       std::vector<int64_t>& cancel_jobs) {
  std::string why = miss.why;
  if (container && miss.first)
    why += "; the container did not start for " + TaskNameOf(*miss.first) + ": " + *container;
  Fail({Outcome::kFailed, why}, container ? EndReason::kStartupError : EndReason::kStartFailed);
  CancelJobOnce(cancel_jobs);
  return why;
}

std::optional<LiveAttempt::Stall> LiveAttempt::FailStalled(int64_t now, int64_t stall_ms,
                                                           int64_t silent_after_ms,
                                                           std::optional<int64_t> checkpoint_step) {
  const std::optional<int64_t> quiet = StalledFor(now, stall_ms);
  if (!quiet) return std::nullopt;
  const Liveness live = LivenessAt(now, silent_after_ms);
  Stall stall;
  // Tasks that stopped heartbeating, all on one node, point at it.
  if (live.silent_nodes.size() == 1 && live.alive_count > 0) {
    stall.suspect_node = *live.silent_nodes.begin();
    stall.suspect_why = "attempt " + std::to_string(record.number) +
                        " stalled and only its tasks there had stopped heartbeating";
  }
  const std::optional<int64_t> last_step = LastStep(checkpoint_step);
  const std::string last = last_step ? "the last, step " + std::to_string(*last_step) + ", came " +
                                           Seconds(*quiet) + " ago"
                                     : "none since training started " + Seconds(*quiet) + " ago";
  stall.why = "stalled: no new step for " + Seconds(stall_ms) + " (progress.stall_timeout_s); " +
              last + "; " + std::to_string(live.alive_count) + " of " +
              std::to_string(run->size()) + " tasks still heartbeating" +
              (live.alive.empty() ? "" : ": " + live.alive);
  Fail({Outcome::kFailed, stall.why}, EndReason::kStalled);
  return stall;
}

LiveAttempt::StepEnd LiveAttempt::EndOverdueStep(int64_t now, bool in_allocation,
                                                 bool user_cancelled,
                                                 std::vector<int64_t>& cancel_jobs) {
  StepEnd end;
  if (!ReapOverdue(now)) return end;
  const std::vector<TaskIndex> unconfirmed = run->UnconfirmedShutdowns();
  if (unconfirmed.empty() && in_allocation && !GaveUpInPlace() && !user_cancelled) return end;
  if (!unconfirmed.empty()) {
    std::string names;
    for (TaskIndex task : unconfirmed) names += (names.empty() ? "" : ", ") + TaskNameOf(task);
    end.event = names + " did not confirm the Shutdown; ending step " +
                std::to_string(record.slurm_job_id) + ".0 through Slurm";
    end.kill_steps = StepJobIds();
  }
  StepKilled(in_allocation ? std::to_string(unconfirmed.size()) +
                                 " tasks did not confirm their Shutdown in time"
                           : "");
  // A failed attempt's job has nothing left to do.
  if (run->outcome().kind == Outcome::kFailed) CancelJobOnce(cancel_jobs);
  return end;
}

void LiveAttempt::AfterInPlaceCheck(bool given_up, std::vector<int64_t>& cancel_jobs,
                                    std::vector<std::pair<int64_t, std::string>>& shrink_jobs) {
  if (given_up) CancelJobOnce(cancel_jobs);
  if (auto shrink = TakeShrink()) shrink_jobs.push_back(std::move(*shrink));
}

LiveAttempt::Heard LiveAttempt::HeardAt(int64_t now, bool deaf, int64_t lost_after_ms,
                                        int64_t vanished_after_ms, int64_t gone_after_ms,
                                        Changes& c) {
  Heard heard;
  if (!deaf)
    for (const auto& [task, silent_ms] : MarkSilentLost(now, lost_after_ms, vanished_after_ms, c))
      heard.lost.push_back(TaskNameOf(task) + " sent no heartbeat for " + Seconds(silent_ms));
  FlushHeartbeats(c);
  heard.gone = TasksGone(now, deaf, gone_after_ms);
  return heard;
}

LiveAttempt::LostTask LiveAttempt::EndGoneTask(const GoneTask& gone, int64_t now, Changes& c) {
  const bool undecided = run->outcome().kind == Outcome::kUndecided;
  TaskGone(gone.task, gone.why, now, c);
  LostTask lost{TaskNameOf(gone.task) + " is gone: " + gone.why, ""};
  if (!undecided) {
    BlameNode();
    return lost;
  }
  Fail({Outcome::kFailed, lost.event, EndReason::kNodeFail}, EndReason::kNodeFail);
  lost.failed = "attempt " + std::to_string(record.number) + " failed: " + lost.event;
  return lost;
}

const JobInfo* LiveAttempt::FindJob(
    const std::unordered_map<int64_t, const JobInfo*>& by_id) const {
  auto j = by_id.find(record.slurm_job_id);
  return j != by_id.end() && j->second->name == record.job_name ? j->second : nullptr;
}

const JobInfo* LiveAttempt::NewestJobNamed(const std::vector<JobInfo>& jobs) const {
  const JobInfo* match = nullptr;
  for (const auto& j : jobs)
    if (j.name == record.job_name && (!match || j.job_id > match->job_id)) match = &j;
  return match;
}

void LiveAttempt::AdoptJob(int64_t job_id, int64_t known_seq, Changes& c) {
  record.slurm_job_id = job_id;
  record.state = AttemptState::kPending;
  job_known_seq = known_seq;
  job_seen = true;
  c.attempts.push_back(record);
}

bool LiveAttempt::NoteJob(const JobInfo& job, int64_t now, bool* started) {
  *started = false;
  job_seen = true;
  component_job_ids.clear();
  for (const JobComponentInfo& comp : job.components) component_job_ids.push_back(comp.job_id);
  std::string state = JobStateName(job.state);
  bool changed = state != record.slurm_state || job.nodes != record.nodes;
  record.slurm_state = state;
  record.nodes = job.nodes;
  if (job.end_time > 0) job_end_ms = job.end_time * 1000;
  job_state = job.state;
  if (job.state == JobState::kRunning && !job.completing) job_node_names = job.node_names;
  if (job.state != JobState::kRunning || start_seen_in_slurm) return changed;
  start_seen_in_slurm = true;
  *started = true;
  if (!job_started_ms) job_started_ms = now;
  record.state = AttemptState::kRunning;
  if (!record.started_at) record.started_at = now;
  for (TaskIndex i : run->indices()) {
    // Within its component, task j runs on node j / tasks_per_node; the
    // components' nodes follow each other in node_names.
    // With spare nodes, slot s is on the job's node node_slots' s.
    const JobComponent& comp = run->components()[run->task(i).component];
    int node = record.node_slots.JobNodeOfSlot(comp.first_node + (i.value() - comp.first_task) /
                                                                     comp.resources.tasks_per_node);
    if (node < static_cast<int>(job.node_names.size()) && tasks[i.value()].node.empty())
      run->mutable_task(i).node = job.node_names[node];
  }
  return true;
}

void LiveAttempt::CancelJob(int64_t now, std::vector<int64_t>& cancel_jobs) {
  cancel_jobs.push_back(CancelSent(now));
}

int64_t LiveAttempt::CancelSent(int64_t now) {
  job_cancel_sent = true;
  cancel_sent_at_ms = now;
  return record.slurm_job_id;
}

void LiveAttempt::End(EndReason reason, const std::string& why, std::optional<int64_t> ended_at,
                      Changes& c) {
  record.end_reason = reason;
  record.reason = why;
  if (ended_at) {
    record.state = AttemptState::kEnded;
    record.ended_at = *ended_at;
  }
  c.attempts.push_back(record);
}

void LiveAttempt::EndNow(int64_t now, Changes& c) {
  record.state = AttemptState::kEnded;
  record.ended_at = now;
  c.attempts.push_back(record);
}

void LiveAttempt::JobVanished(int64_t now, Changes& c) {
  record.slurm_state = "UNKNOWN";
  EndNow(now, c);
}

void LiveAttempt::JobFinished(int64_t now, int exit_code, Changes& c) {
  record.exit_code = exit_code;
  EndNow(now, c);
}

LiveAttempt::GoneEnd LiveAttempt::WhyJobGone() const {
  const std::string job_n = "job " + std::to_string(record.slurm_job_id);
  const Outcome& o = run->outcome();
  GoneEnd end{EndReason::kUnknown, o.reason, "Slurm no longer knows " + job_n};
  // What the tasks reported before the job left decides, as it would have
  // with the job's final state.
  if (o.kind == Outcome::kSucceeded) {
    end.reason = EndReason::kSucceeded;
  } else if (decided_reason) {
    end.reason = *decided_reason;
  } else if (o.kind == Outcome::kFailed) {
    end.reason = o.failure;
  } else if (!job_seen) {
    // Not seen since this service started: the job ended while tfslurmd
    // was down, longer ago than Slurm's MinJobAge. Without accounting
    // (slurmdbd) nothing says how, and the agents' exit reports expired.
    end.event +=
        ": it ended while tfslurmd was down, and Slurm forgets finished jobs after "
        "MinJobAge; with no task report and no accounting, how it ended is unknown";
    end.reason = EndReason::kUnknown;
    end.why = job_n + " ended while tfslurmd was down; how is unknown";
  } else {
    // Seen by this service and gone before any report: Slurm lost it.
    end.reason = EndReason::kNodeFail;
    end.why = job_n + " vanished from Slurm";
  }
  return end;
}

void LiveAttempt::TasksEndWithJob(Changes& c) {
  for (TaskIndex i : run->indices()) {
    TaskSlot& slot = run->mutable_task(i);
    if (slot.exited() || tasks[i.value()].state == TaskState::kPending) continue;
    // A task the service was reaping ended with the job: reaped, by Slurm
    // if its agent's report never came (the agent was killed with the
    // step, or reconnected too late after a service restart). Any other
    // task's end is unknown.
    const TaskState end = slot.shutdown_sent() ? TaskState::kReaped : TaskState::kLost;
    slot.state = end;
    tasks[i.value()].state = end;
    c.tasks.push_back(tasks[i.value()]);
  }
}

std::optional<std::string> LiveAttempt::LoneLostNode() const {
  if (lost_nodes.size() != 1) return std::nullopt;
  return *lost_nodes.begin();
}

std::optional<LiveAttempt::JobEnd> LiveAttempt::EndedAs(const JobInfo& job) const {
  const Outcome& o = run->outcome();
  const std::string state = JobStateName(job.state);
  const std::string why = "Slurm job " + std::to_string(job.job_id) + " " + state;
  if (o.kind == Outcome::kSucceeded) return JobEnd{EndReason::kSucceeded, o.reason, {}};
  switch (job.state) {
    case JobState::kTimeout:
    case JobState::kDeadline:
      return JobEnd{EndReason::kTimeout, why + " at its time limit", {}};
    case JobState::kNodeFail:
    case JobState::kBootFail:
      return JobEnd{EndReason::kNodeFail, why + " (" + job.reason + ")",
                    "its attempt " + std::to_string(record.number) + " ended " + state};
    case JobState::kPreempted:
      return JobEnd{EndReason::kPreempted, why + ": preempted by a higher-priority job", {}};
    default:
      break;
  }
  if (decided_reason) return JobEnd{*decided_reason, o.reason, {}};
  if (o.kind == Outcome::kFailed) return JobEnd{o.failure, o.reason, {}};
  if (job.state == JobState::kCompleted) return JobEnd{EndReason::kSucceeded, why, {}};
  return std::nullopt;
}

LiveAttempt::JobNews LiveAttempt::Polled(const std::unordered_map<int64_t, const JobInfo*>& by_id,
                                         int64_t poll_seq, int64_t poll_ms, int64_t now,
                                         Changes& c) {
  JobNews news;
  if (record.state == AttemptState::kSubmitting) {
    // The poll began at poll_ms, after the failure that set reconcile_at_ms.
    if (ReconcileDue(poll_ms)) news.kind = JobNews::kReconcile;
    return news;
  }
  if (!record.slurm_job_id || record.state == AttemptState::kEnded) return news;
  // A job with the attempt's id but another name is not the attempt's:
  // job ids start again from FirstJobId when a slurmctld loses its state,
  // or when the database moves to another cluster (a Slurm upgrade that
  // cannot carry the jobs over).
  news.job = FindJob(by_id);
  if (!news.job) {
    // Submitted while this poll's snapshot was being taken: absent from
    // it, not gone.
    if (KnownAfter(poll_seq)) return news;
    JobVanished(now, c);
    news.kind = JobNews::kGone;
    news.gone = WhyJobGone();
    return news;
  }
  const JobInfo& job = *news.job;
  const bool changed = NoteJob(job, now, &news.started);
  if (!IsFinished(job.state) || job.completing) {
    if (changed) QueueRecord(c);
    news.kind = JobNews::kThere;
    return news;
  }
  news.kind = JobNews::kEnded;
  news.exit_code = job.exit_signal ? 128 + job.exit_signal : job.exit_code;
  JobFinished(now, news.exit_code, c);
  TasksEndWithJob(c);
  news.end = EndedAs(job);
  return news;
}

LiveAttempt::Reconciled LiveAttempt::Reconcile(const std::vector<JobInfo>& jobs,
                                               bool user_cancelled,
                                               const std::function<int64_t()>& next_seq,
                                               int64_t now, Changes& c,
                                               std::vector<int64_t>& cancel_jobs) {
  if (const JobInfo* match = NewestJobNamed(jobs)) {
    AdoptJob(match->job_id, next_seq(), c);
    // Cancelled while its submission was in doubt.
    if (user_cancelled) CancelJob(now, cancel_jobs);
    return {Reconciled::kAdopted, "found Slurm job " + std::to_string(match->job_id) + " (" +
                                      record.job_name +
                                      "), whose submission was not confirmed; adopting it"};
  }
  const std::string none = "Slurm has no job " + record.job_name;
  if (user_cancelled) {
    EndNow(now, c);
    return {Reconciled::kNotSubmitted, none + "; the experiment is cancelled: not submitted"};
  }
  return {Reconciled::kSubmit,
          none + " (its submission was interrupted or refused); submitting it now"};
}

LiveAttempt::Recovery LiveAttempt::Recovered() const {
  Recovery r;
  r.submitting = record.state == AttemptState::kSubmitting;
  if (record.state == AttemptState::kEnded)
    r.unfollowed = "attempt " + std::to_string(record.number) + " has ended and attempt " +
                   std::to_string(record.number + 1) +
                   " was never recorded (tfslurmd stopped or failed in between)";
  if (run->outcome().kind == Outcome::kFailed && record.state == AttemptState::kRunning)
    r.reap = "attempt failed: " + run->outcome().reason;
  return r;
}

}  // namespace tfslurm
