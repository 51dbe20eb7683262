#include "service/core/experiments.h"

#include <csignal>

#include "service/core/components.h"

namespace tfslurm {

Experiments::Experiments(store::Store& store, slurm::SlurmClient& slurm, Clock& clock,
                         Randomness& random, Files& files, Accounts& accounts,
                         LifecycleConfig config)
    : lifecycle_({store, slurm, clock, random, files, accounts}, std::move(config)),
      submission_(lifecycle_),
      agents_(lifecycle_),
      watch_(lifecycle_, agents_, submission_) {}

void Experiments::SetLaunch(const slurm::AgentLaunch& launch) { lifecycle_.config.launch = launch; }

StatusOr<Experiments::Gauges> Experiments::ReadGauges() {
  Gauges g;
  for (ExperimentState state : kAllExperimentStates) {
    store::ListQuery q;
    q.states = {state};
    auto n = lifecycle_.ports.store.CountExperiments(q);
    if (!n.ok()) return n.status();
    g.experiments_by_state.emplace_back(state, *n);
  }
  MutexLock lock(lifecycle_.mu);
  for (const auto& [id, a] : lifecycle_.open) g.agents_connected += a->channels.size();
  return g;
}

void Experiments::ObserveCommits(std::shared_ptr<store::CommitObserver> observer) {
  lifecycle_.ObserveCommits(std::move(observer));
}

StatusOr<ExperimentRecord> Experiments::GetExperiment(const std::string& id) {
  return lifecycle_.ports.store.GetExperiment(id);
}

StatusOr<std::vector<AttemptRecord>> Experiments::ListAttempts(const std::string& id) {
  return lifecycle_.ports.store.ListAttempts(id);
}

StatusOr<std::vector<TaskRecord>> Experiments::ListTasks(const std::string& id, int attempt) {
  return lifecycle_.ports.store.ListTasks(id, attempt);
}

StatusOr<std::vector<store::ListedExperiment>> Experiments::ListPage(
    const store::ListQuery& query, const store::NeedSummary& need) {
  return lifecycle_.ports.store.ListPage(query, need);
}

StatusOr<int64_t> Experiments::CountExperiments(const store::ListQuery& query) {
  return lifecycle_.ports.store.CountExperiments(query);
}

StatusOr<ExperimentView> Experiments::Get(const std::string& id) {
  auto e = lifecycle_.ports.store.GetExperiment(id);
  if (!e.ok()) return e.status();
  ExperimentView v;
  v.experiment = std::move(e).value();
  auto attempts = lifecycle_.ports.store.ListAttempts(id);
  if (!attempts.ok()) return attempts.status();
  v.attempts = std::move(attempts).value();
  auto tasks = lifecycle_.ports.store.ListTasks(id, v.experiment.current_attempt);
  if (!tasks.ok()) return tasks.status();
  v.tasks = std::move(tasks).value();
  // Each task's component follows from the spec. A plain job has one, and
  // its canonical spec has no "roles" key: only then is the spec parsed, not
  // on every GET of a plain experiment (GET's p99 target is 2 ms).
  if (v.experiment.spec_json.find("\"roles\":") != std::string::npos) {
    auto spec = ParseSpec(nlohmann::json::parse(v.experiment.spec_json, nullptr, false),
                          lifecycle_.config.limits);
    if (spec.ok() && !spec->roles.empty()) {
      const std::vector<JobComponent> components = JobComponents(*spec);
      for (TaskRecord& t : v.tasks) t.component = ComponentOfTask(components, t.proc_id);
    }
  }
  auto events = lifecycle_.ports.store.ListEvents(id, 500);
  if (!events.ok()) return events.status();
  v.events = std::move(events).value();
  return v;
}

Status Experiments::Cancel(const std::string& id, const std::string& why) {
  int64_t job = 0;
  {
    MutexLock lock(lifecycle_.mu);
    auto it = lifecycle_.open.find(id);
    if (it == lifecycle_.open.end() || IsTerminal(it->second->record.state)) {
      auto e = lifecycle_.ports.store.GetExperiment(id);
      if (!e.ok()) return e.status();
      return FailedPrecondition("experiment '" + id + "' has already ended (" +
                                ExperimentStateName(e->state) + "); nothing to cancel");
    }
    OpenExperiment& a = *it->second;
    a.user_cancelled = true;
    store::Changes c;
    a.run->Decide({Outcome::kFailed, "cancelled"});
    lifecycle_.SetState(c, a, ExperimentState::kCancelled, why);
    if (a.attempt.end_reason.empty()) {
      lifecycle_.EndAttempt(a, EndReason::kCancelled);
      a.attempt.reason = why;
      c.attempts.push_back(a.attempt);
    }
    lifecycle_.Commit(c);
    job = a.attempt.slurm_job_id;
    a.job_cancel_sent = true;
    a.cancel_sent_at_ms = lifecycle_.ports.clock.NowMs();
  }
  // If this fails, Tick tries again while the job runs: the experiment is
  // cancelled either way.
  if (job > 0) lifecycle_.ports.slurm.CancelJob(job, SIGKILL);
  return Status::Ok();
}

}  // namespace tfslurm
