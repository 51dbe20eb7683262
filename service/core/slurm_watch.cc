#include "service/core/slurm_watch.h"

#include <spdlog/spdlog.h>
#include <algorithm>

#include <chrono>
#include <csignal>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "schema/agent_exit.h"
#include "service/core/container_launch.h"
#include "service/core/restart_policy.h"
#include "service/core/wording.h"

namespace tfslurm {

void SlurmWatch::OnJobUpdate(OpenExperiment& a, const std::vector<JobInfo>& jobs,
                             const std::unordered_map<int64_t, const JobInfo*>& by_id,
                             int64_t poll_ms, int64_t poll_seq, Changes& c, Actions& actions) {
  const LiveAttempt::JobNews news =
      a.attempt.Polled(by_id, poll_seq, poll_ms, core_.ports().clock.NowMs(), c);
  switch (news.kind) {
    case LiveAttempt::JobNews::kNothing:
      return;
    case LiveAttempt::JobNews::kReconcile:
      return ReconcileSubmission(a, jobs, c, actions);
    case LiveAttempt::JobNews::kGone:
      core_.Event(c, a, EventCode::kJob, news.gone.event);
      return FinishAttempt(a, news.gone.reason, news.gone.why, c);
    case LiveAttempt::JobNews::kThere:
      return JobSeen(a, *news.job, news.started, c);
    case LiveAttempt::JobNews::kEnded:
      JobSeen(a, *news.job, news.started, c);
      return OnJobEnded(a, *news.job, news, c);
  }
}

void SlurmWatch::JobSeen(OpenExperiment& a, const JobInfo& job, bool started, Changes& c) {
  if (started) {
    core_.Event(c, a, EventCode::kJob,
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
      a.record.updated_at = core_.ports().clock.NowMs();
      c.experiment = a.record;
    }
  }
}

void SlurmWatch::OnJobEnded(OpenExperiment& a, const JobInfo& job, const LiveAttempt::JobNews& news,
                            Changes& c) {
  const std::string state = JobStateName(job.state);
  core_.Event(c, a, EventCode::kJob,
              "Slurm job " + std::to_string(job.job_id) + " ended " + state +
                  (job.reason.empty() || job.reason == "None" ? "" : " (" + job.reason + ")"));
  if (a.user_cancelled) return;  // the experiment is cancelled already
  // The tasks' word, the service's decision, or Slurm's final state.
  if (news.end) {
    const LiveAttempt::JobEnd& end = *news.end;
    if (!end.suspects_why.empty()) {
      a.suspects.nodes = job.node_names;
      a.suspects.only_if_down = true;
      a.suspects.why = end.suspects_why;
    }
    return FinishAttempt(a, end.reason, end.why, c);
  }
  std::string why = "Slurm job " + std::to_string(job.job_id) + " " + state;
  switch (job.state) {
    case JobState::kCancelled: {
      a.user_cancelled = true;
      const std::string outside = why + " outside tfslurm (scancel or an admin)";
      core_.EndAttempt(a, EndReason::kCancelled, outside, c);
      core_.SetState(c, a, ExperimentState::kCancelled, outside);
      return;
    }
    case JobState::kOutOfMemory:
      // Slurm's own word when no task's agent reported the kill (its agent
      // went with the step): the memory it had, and the field that sets it.
      return FinishAttempt(a, EndReason::kPermanentExit,
                           why + ": out of memory (" + std::to_string(a.record.mem_per_task_mb) +
                               " MB per task); raise resources.mem_per_task_mb",
                           c);
    default: {
      if (job.exit_code == kAgentExitUnverifiedService && !job.exit_signal && a.NoAgentRegistered())
        return FinishAttempt(a, EndReason::kStartupError, UnverifiedServiceReason(a, job), c);
      if (std::optional<std::string> cause =
              a.NoAgentRegistered() ? ContainerStartFailure(a, a.ProcOfTask(TaskIndex(0)))
                                    : std::nullopt)
        return FinishAttempt(a, EndReason::kStartupError,
                             why + " before any task's agent started, in the container: " + *cause,
                             c);
      if (std::optional<std::string> own = AgentStartFailure(a, job))
        return FinishAttempt(a, EndReason::kStartupError, *own, c);
      std::optional<int> code = job.exit_code, sig;
      if (job.exit_signal) sig = job.exit_signal;
      return FinishAttempt(
          a, IsRetryableExit(code, sig) ? EndReason::kRetryableExit : EndReason::kPermanentExit,
          why + " with exit code " + std::to_string(news.exit_code), c);
    }
  }
}

std::optional<std::string> SlurmWatch::ContainerStartFailure(const OpenExperiment& a, ProcId proc) {
  if (!a.spec.container.enabled()) return std::nullopt;
  auto account = core_.ports().accounts.ForOwner(a.record.owner);
  if (!account.ok()) return std::nullopt;
  const std::string dir =
      AttemptLogDir(core_.config().output_root, a.record.id, a.record.current_attempt);
  Files& files = core_.ports().files;
  // pyxis's words are in the output of the task that imported for its node,
  // the others say only that it failed: `proc` first, then the next ones (a
  // node's tasks all fail with its import, so the importer is not before
  // `proc`, the first that never started). A file that is not there is
  // passed over.
  for (int p = proc.value(); p < proc.value() + 16; ++p) {
    const std::string path = dir + "/task-" + std::to_string(p) + ".out";
    if (auto words = RuntimeStartError(files.ReadFileTail(path, 16384, *account).value_or(""), ""))
      return words;
  }
  return RuntimeStartError("",
                           files.ReadFileTail(dir + "/batch.out", 16384, *account).value_or(""));
}

namespace {

// text's lines, without their '\n'.
std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    lines.push_back(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  }
  return lines;
}

}  // namespace

std::optional<std::string> SlurmWatch::AgentStartFailure(const OpenExperiment& a,
                                                         const JobInfo& job) {
  if (!a.spec.container.enabled() || job.exit_signal || !a.NoAgentRegistered() ||
      (job.exit_code != kAgentExitUsage && job.exit_code != kAgentExitRefused))
    return std::nullopt;
  std::string why = "Slurm job " + std::to_string(job.job_id) +
                    ": no task's agent registered from the container (tfslurm-agent exit " +
                    std::to_string(job.exit_code) + ")";
  auto account = core_.ports().accounts.ForOwner(a.record.owner);
  std::optional<std::string> tail;
  if (account.ok())
    tail = core_.ports().files.ReadFileTail(
        AttemptLogDir(core_.config().output_root, a.record.id, a.record.current_attempt) +
            "/task-0.out",
        16 * 1024, *account);
  // The agent's lines: "[tfslurm-agent exp=E attempt=N proc=P] TIME LEVEL: text";
  // the last error is why it ended.
  static constexpr std::string_view kError = " error: ";
  std::vector<std::string_view> lines;
  if (tail) lines = SplitLines(*tail);
  for (auto line = lines.rbegin(); line != lines.rend(); ++line) {
    const size_t at = line->find(kError);
    if (line->rfind("[tfslurm-agent ", 0) == 0 && at != std::string_view::npos)
      return why + ": " + ExitDetail(std::string(line->substr(at + kError.size())));
  }
  return why + "; the tasks' logs say why";
}

std::string SlurmWatch::UnverifiedServiceReason(const OpenExperiment& a, const JobInfo& job) {
  std::string why = "Slurm job " + std::to_string(job.job_id) +
                    ": no agent registered, they could not verify tfslurmd's TLS certificate "
                    "with the job's TFSLURM_CA (tfslurm-agent exit " +
                    std::to_string(kAgentExitUnverifiedService) + ")";
  // Every agent fails alike; task 0's log has its line saying why.
  const std::string log =
      AttemptLogDir(core_.config().output_root, a.record.id, a.record.current_attempt) +
      "/task-0.out";
  auto account = core_.ports().accounts.ForOwner(a.record.owner);
  std::optional<std::string> tail;
  if (account.ok()) tail = core_.ports().files.ReadFileTail(log, 16 * 1024, *account);
  const size_t at = tail ? tail->rfind(kUnverifiedServiceLine) : std::string::npos;
  if (at == std::string::npos) return why + "; the tasks' logs say why";
  const size_t end = tail->find('\n', at);
  return why + ": " + ExitDetail(tail->substr(at, end == std::string::npos ? end : end - at));
}

void SlurmWatch::FinishAttempt(OpenExperiment& a, EndReason reason, const std::string& why,
                               Changes& c) {
  // Decided already (success by the agents, or a cancel): the job's end
  // only confirms it.
  if (a.attempt.EndRecorded()) return;
  core_.EndAttempt(a, reason, why, c);
  if (a.user_cancelled) return;  // already cancelled
  const int number = a.attempt.number();
  // Lost tasks (their heartbeats stopped) all on one node point at it.
  std::optional<std::string> lost_node = a.attempt.LoneLostNode();
  if (a.suspects.nodes.empty() && reason != EndReason::kSucceeded && lost_node) {
    a.suspects.nodes = {*lost_node};
    a.suspects.only_if_down = false;
    a.suspects.why =
        "every task lost in attempt " + std::to_string(number) + " (no heartbeat) ran on it";
  }
  AfterAttempt next = DecideAfterAttempt(a.spec.restart, reason, why, number, a.record.restarts);
  const int64_t now = core_.ports().clock.NowMs();
  std::optional<std::string> obstacle;
  if (next.action == AfterAttempt::kRestart && a.spec.restart.in_allocation) {
    obstacle = in_place_.Obstacle(a, now);
    if (!obstacle) {
      // No backoff: the allocation is ours, and nothing goes to slurmctld.
      core_.metrics().Restarted(reason, RestartKind::kInPlace);
      a.record.restarts++;
      return in_place_.Begin(a, c, next.why_in_place);
    }
  }
  ReleaseWaitingAgents(a.attempt, next.why);
  switch (next.action) {
    case AfterAttempt::kSucceed:
      return core_.SetState(c, a, ExperimentState::kSucceeded, next.why);
    case AfterAttempt::kFail:
      return core_.SetState(c, a, ExperimentState::kFailed, next.why);
    case AfterAttempt::kRestart:
      core_.metrics().Restarted(reason, RestartKind::kNewJob);
      a.record.restarts++;
      a.record.next_attempt_at = now + next.delay_ms;
      if (obstacle)
        core_.Event(c, a, EventCode::kRestart, "in a new Slurm job, not in place: " + *obstacle);
      return core_.SetState(c, a, ExperimentState::kRestarting, next.why);
  }
}

void SlurmWatch::Tick() {
  int64_t now = core_.ports().clock.NowMs();
  std::optional<std::unordered_map<int64_t, const JobInfo*>> by_id;
  StatusOr<std::vector<JobInfo>> jobs = std::vector<JobInfo>{};
  bool polled = false;
  int64_t last_poll = last_poll_ms_.load();
  // Of concurrent Ticks, only the one that moves last_poll_ms_ polls.
  bool poll = now - last_poll >= core_.config().poll_interval_ms &&
              last_poll_ms_.compare_exchange_strong(last_poll, now);
  const int64_t poll_seq = core_.LastJobSeq();
  if (poll) {
    bool any_open = false;
    {
      MutexLock lock(core_.mu());
      any_open = core_.AnyOpen();
    }
    if (any_open) {
      const auto started = std::chrono::steady_clock::now();
      jobs = core_.ports().slurm.LoadJobs();
      polled = true;
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
  bool queued = false;
  {
    MutexLock lock(core_.mu());
    if (polled) core_.PolledSlurm(jobs.ok(), now);
    // Every experiment's changes in one transaction: a poll that finds a
    // hundred jobs ended (a user cancelling a sweep) makes one commit, not a
    // hundred. It is written once core's lock is released: the heartbeats
    // and registrations a Tick writes are thousands of rows at 16,384
    // tasks, and the agents' messages need not wait for them.
    for (OpenExperiment* open : core_.All()) {
      OpenExperiment& a = *open;
      Changes c;
      if (by_id) OnJobUpdate(a, *jobs, *by_id, now, poll_seq, c, actions);
      CheckTimers(a, c, actions);
      queued = core_.CommitAfterUnlock(c) || queued;
    }
    // Done with those final whose last job has left Slurm.
    core_.CloseEnded();
  }
  // In the store before Slurm is told anything of it.
  if (queued) core_.WriteQueued();
  RunActions(actions);
}

void SlurmWatch::RunActions(Actions& actions) {
  // A cancel that fails is repeated while the job runs (CheckTimers); a step
  // that stays is ended with its job when the attempt's end cancels it.
  for (int64_t job : actions.kill_steps)
    if (Status s = core_.ports().slurm.SignalStep(job, 0, SIGKILL); !s.ok())
      spdlog::warn("ending step {}.0: {}", job, s.message());
  // A shrink that fails leaves the node's old programs to be refused when
  // their agents reconnect (docs/restarts.md, "Network faults").
  for (const auto& [job, keep] : actions.shrink_jobs)
    if (Status s = core_.ports().slurm.ShrinkJob(job, keep); !s.ok())
      spdlog::warn("taking nodes out of Slurm job {}: {}", job, s.message());
  for (int64_t job : actions.cancel_jobs)
    if (Status s = core_.ports().slurm.CancelJob(job, SIGKILL); !s.ok())
      spdlog::warn("cancelling Slurm job {}: {}", job, s.message());
  for (const auto& [id, number] : actions.restarts) {
    MutexLock lock(core_.mu());
    OpenExperiment* open = core_.Find(id);
    // Still restarting: its attempt is still the one that named `number`.
    if (!open || open->record.state != ExperimentState::kRestarting) continue;
    submission_.SubmitAutomatically(*open, number,
                                    "attempt " + std::to_string(number) + " submitted");
  }
  for (const std::string& id : actions.resubmits) {
    MutexLock lock(core_.mu());
    OpenExperiment* open = core_.Find(id);
    if (!open || open->attempt.state() != AttemptState::kSubmitting || open->user_cancelled)
      continue;
    submission_.SubmitAutomatically(*open, open->attempt.number());
  }
}

// Slurm may or may not have the job of an attempt still `submitting`: the
// newest job with its name is adopted; without one, the attempt is submitted
// (again). The job name is unique per experiment and attempt.
void SlurmWatch::ReconcileSubmission(OpenExperiment& a, const std::vector<JobInfo>& jobs,
                                     Changes& c, Actions& actions) {
  const LiveAttempt::Reconciled found = a.attempt.Reconcile(
      jobs, a.user_cancelled, [this] { return core_.NextJobSeq(); }, core_.ports().clock.NowMs(), c,
      actions.cancel_jobs);
  if (found.kind == LiveAttempt::Reconciled::kAdopted) a.submit_failures = 0;
  core_.Event(c, a, EventCode::kRecovered, found.event);
  if (found.kind == LiveAttempt::Reconciled::kSubmit) actions.resubmits.push_back(a.record.id);
}

StatusOr<std::vector<JobInfo>> SlurmWatch::RecentJobs() {
  MutexLock lock(jobs_mu_);
  const int64_t now = core_.ports().clock.NowMs();
  if (!jobs_read_ || now - jobs_read_ms_ >= core_.config().poll_interval_ms) {
    auto jobs = core_.ports().slurm.LoadJobs();
    if (!jobs.ok()) return jobs.status();
    jobs_ = GroupHetJobs(std::move(jobs).value());
    jobs_read_ = true;
    jobs_read_ms_ = now;
  }
  return jobs_;
}

StatusOr<bool> SlurmWatch::IsOver(const std::string& id) {
  auto e = core_.ports().store.GetExperiment(id);
  if (!e.ok()) return e.status();
  if (!IsTerminal(e->state)) return false;
  auto attempts = core_.ports().store.ListAttempts(id);
  if (!attempts.ok()) return attempts.status();
  if (attempts->empty() || attempts->back().state == AttemptState::kEnded) return true;
  {
    MutexLock lock(core_.mu());
    if (core_.Find(id)) return false;  // the watch ends it
  }
  // Read again: the watch may have ended it (and stopped watching) since,
  // and its record of the end is the one to keep.
  attempts = core_.ports().store.ListAttempts(id);
  if (!attempts.ok()) return attempts.status();
  if (attempts->empty() || attempts->back().state == AttemptState::kEnded) return true;
  AttemptRecord last = attempts->back();
  if (last.slurm_job_id > 0) {
    auto jobs = RecentJobs();
    if (!jobs.ok()) return jobs.status();
    for (const JobInfo& j : *jobs)
      if (j.job_id == last.slurm_job_id && j.name == last.job_name &&
          (!IsFinished(j.state) || j.completing))
        return false;
  }
  // Ended while tfslurmd was down, or after it stopped watching: the job
  // has gone, and its attempt's end is recorded now.
  last.state = AttemptState::kEnded;
  last.ended_at = core_.ports().clock.NowMs();
  Changes c;
  c.attempts.push_back(last);
  if (Status s = core_.Apply({&c, 1}); !s.ok()) return s;
  return true;
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
      const LiveAttempt::Recovery found = loaded.attempt.Recovered();
      if (found.submitting) submitting.push_back(&loaded);
      if (!IsTerminal(loaded.record.state) && loaded.record.state != ExperimentState::kRestarting &&
          !found.unfollowed.empty()) {
        // An open experiment whose last attempt has ended, with no newer
        // one: tfslurmd before this version recorded `queued` for a restart
        // or a resume ahead of the next attempt's intent, and stopped or
        // failed in between. Nothing else moves it: restart it now.
        Changes c;
        loaded.record.next_attempt_at = core_.ports().clock.NowMs();
        core_.SetState(c, loaded, ExperimentState::kRestarting,
                       found.unfollowed + "; submitting it now");
        core_.Commit(c);
      }
      // Decided before the restart (the exits replayed by Load): the tasks
      // still running are told to stop when their agents come back.
      if (!found.reap.empty()) {
        Changes c;
        agents_.ReapRemaining(loaded, c, found.reap);
        core_.Commit(c);
      }
      core_.Add(std::move(a).value());
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
