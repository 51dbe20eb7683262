#include "service/core/core.h"

#include <spdlog/spdlog.h>

#include <csignal>

#include "service/core/agent_protocol.h"
#include "service/core/components.h"
#include "service/core/container_launch.h"
#include "service/core/core_state.h"
#include "service/core/deletion.h"
#include "service/core/slurm_watch.h"
#include "service/core/submission.h"

namespace tfslurm {
namespace {

class ExperimentsImpl final : public Core {
 public:
  ExperimentsImpl(const CorePorts& ports, CoreConfig config, Metrics& metrics,
                  std::vector<std::shared_ptr<CommitObserver>> observers)
      : core_(ports, std::move(config), metrics, std::move(observers)),
        submission_(core_),
        agents_(core_),
        watch_(core_, agents_, submission_) {}

  Status Recover() override { return watch_.Recover(); }
  StatusOr<SubmitResult> Submit(const nlohmann::json& spec, const std::string& owner,
                                const SubmitOptions& options) override {
    return submission_.Submit(spec, owner, options);
  }
  Status Cancel(const std::string& id, const std::string& why, EndReason reason) override {
    return CancelIfOwner(id, why, reason, nullptr);
  }
  Status CancelOwnedBy(const std::string& id, const std::string& owner, const std::string& why,
                       EndReason reason) override {
    return CancelIfOwner(id, why, reason, &owner);
  }
  StatusOr<bool> IsOver(const std::string& id) override { return watch_.IsOver(id); }
  StatusOr<AttemptRecord> Resume(const std::string& id, const nlohmann::json& changes) override {
    return submission_.Resume(id, changes);
  }

  StatusOr<ExperimentView> Get(const std::string& id) override { return GetPage(id, {}); }
  StatusOr<ExperimentView> GetPage(const std::string& id, const TaskQuery& tasks) override;
  StatusOr<ExperimentRecord> GetExperiment(const std::string& id) override {
    return core_.ports().store.GetExperiment(id);
  }
  StatusOr<std::vector<AttemptRecord>> ListAttempts(const std::string& id) override {
    return core_.ports().store.ListAttempts(id);
  }
  StatusOr<std::vector<TaskRecord>> ListTasks(const std::string& id, int attempt) override {
    return core_.ports().store.ListTasks(id, attempt);
  }
  StatusOr<std::vector<ScalarSeries>> ReadScalars(const std::string& id,
                                                  const std::vector<std::string>& tags) override {
    return core_.ports().store.ReadScalars(id, tags);
  }
  StatusOr<Gauges> ReadGauges() override;

  void OnRegister(const TaskRef& ref, const RegisterInfo& info,
                  std::shared_ptr<TaskChannel> channel) override {
    agents_.OnRegister(ref, info, std::move(channel));
    // The restart in place is decided as its last agent comes back to wait,
    // not at the next Tick.
    if (info.standby) watch_.OnStandby(ref.experiment_id);
  }
  Status OnHeartbeat(const TaskRef& ref) override { return agents_.OnHeartbeat(ref); }
  Status OnProgress(const TaskRef& ref, int64_t step, const std::string& path) override {
    return agents_.OnProgress(ref, step, path);
  }
  Status OnScalars(const TaskRef& ref, std::vector<ScalarPoint> points) override {
    return agents_.OnScalars(ref, std::move(points));
  }
  Status OnExited(const TaskRef& ref, const ExitReport& exit, HeldWrites* held) override {
    return agents_.OnExited(ref, exit, held);
  }
  void WriteHeld(HeldWrites& held) override { agents_.WriteHeld(held); }
  void OnDisconnect(const TaskRef& ref, const TaskChannel* channel) override {
    agents_.OnDisconnect(ref, channel);
  }

  StatusOr<DeleteResult> Delete(const std::string& id, bool files) override {
    return deletion_.Delete(id, files);
  }

  void Tick() override {
    watch_.Tick();
    deletion_.SweepIfDue();
  }

 private:
  // Cancel; with `owner`, only an experiment of that owner (NotFound
  // otherwise), checked under the lock so that the check and the cancel see
  // the same experiment.
  Status CancelIfOwner(const std::string& id, const std::string& why, EndReason reason,
                       const std::string* owner);
  // What the current attempt's spare nodes do now, from core's live state.
  std::vector<ExperimentView::Spare> Spares(const std::string& id, const NodeSlots& slots)
      ABSL_LOCKS_EXCLUDED(core_.mu());
  // v.tasks: the current attempt's task rows as GET shows them, each with
  // the SLURM_PROCID running it (from v's last attempt) and its component;
  // and v.containers, the image each role runs in. Both read the spec.
  void FillTasks(std::vector<TaskRecord> tasks, ExperimentView& v) const;

  CoreState core_;
  Submission submission_;
  AgentProtocol agents_;
  SlurmWatch watch_;
  Deletion deletion_{core_};
};

StatusOr<Experiments::Gauges> ExperimentsImpl::ReadGauges() {
  Gauges g;
  for (const auto& [state, name] : kExperimentStateNames) {
    ListQuery q;
    q.states = {state};
    auto n = core_.ports().store.CountExperiments(q);
    if (!n.ok()) return n.status();
    g.experiments_by_state.emplace_back(state, *n);
  }
  auto trials = core_.ports().store.CountTrialsByEndReason();
  if (!trials.ok()) return trials.status();
  g.sweep_trials_by_end_reason = std::move(trials).value();
  MutexLock lock(core_.mu());
  for (const OpenExperiment* a : core_.All()) g.agents_connected += a->attempt.channels.size();
  return g;
}

std::vector<ExperimentView::Spare> ExperimentsImpl::Spares(const std::string& id,
                                                           const NodeSlots& slots) {
  std::vector<ExperimentView::Spare> out;
  // Only experiments with spares come here: the others' GETs never take
  // core's lock.
  MutexLock lock(core_.mu());
  const OpenExperiment* open = core_.Find(id);
  const LiveAttempt* at = open ? &open->attempt : nullptr;
  for (int node : slots.spares()) {
    ExperimentView::Spare spare;
    bool all = at != nullptr && at->record.node_slots == slots;
    for (int p = node * slots.tasks_per_node(); all && p < (node + 1) * slots.tasks_per_node();
         ++p) {
      auto agent = at->spare_agents.find(ProcId(p));
      if (agent == at->spare_agents.end()) {
        all = false;
        break;
      }
      spare.node = agent->second.node;
      all = agent->second.channel != nullptr;
    }
    spare.waiting = all;
    out.push_back(spare);
  }
  return out;
}

void ExperimentsImpl::FillTasks(std::vector<TaskRecord> tasks, ExperimentView& v) const {
  std::vector<TaskView>& views = v.tasks;
  views.clear();
  views.reserve(tasks.size());
  // A spare's agent runs a task under its own SLURM_PROCID, which names its
  // output file. (An experiment has an attempt from its submission on.)
  const NodeSlots no_spares;
  const NodeSlots& slots = v.attempts.empty() ? no_spares : v.attempts.back().node_slots;
  for (TaskRecord& t : tasks) {
    const ProcId proc_id = slots.ProcOfTask(t.task);
    views.push_back(TaskView{std::move(t), proc_id, 0});
  }
  // Each task's component follows from the spec. A plain job has one, and
  // its canonical spec has no "roles" key: only then is the spec parsed, not
  // on every GET of a plain experiment (GET's p99 target is 2 ms).
  // Likewise the container each role runs in: only a spec with one.
  const bool roles = v.experiment.spec_json.find("\"roles\":") != std::string::npos;
  if (roles || v.experiment.spec_json.find("\"container\":") != std::string::npos) {
    auto spec = ParseSpec(nlohmann::json::parse(v.experiment.spec_json, nullptr, false),
                          core_.config().limits);
    if (spec.ok() && !spec->roles.empty()) {
      const std::vector<JobComponent> components = JobComponents(*spec);
      for (TaskView& t : views) t.component = ComponentOfTask(components, t.task);
    }
    if (spec.ok()) v.containers = ContainersOf(*spec, core_.config().launch.container_runtime);
  }
}

StatusOr<ExperimentView> ExperimentsImpl::GetPage(const std::string& id, const TaskQuery& query) {
  auto e = core_.ports().store.GetExperiment(id);
  if (!e.ok()) return e.status();
  ExperimentView v;
  v.experiment = std::move(e).value();
  auto attempts = core_.ports().store.ListAttempts(id);
  if (!attempts.ok()) return attempts.status();
  v.attempts = std::move(attempts).value();
  std::vector<TaskRecord> tasks;
  if (query.All()) {
    auto all = core_.ports().store.ListTasks(id, v.experiment.current_attempt);
    if (!all.ok()) return all.status();
    tasks = std::move(all).value();
  } else {
    // A page: the rest of the 16,384 rows are not read at all.
    auto page = core_.ports().store.ListTaskPage(id, v.experiment.current_attempt, query);
    if (!page.ok()) return page.status();
    tasks = std::move(page->tasks);
    v.tasks_total = page->total;
    v.task_counts = std::move(page->counts);
  }
  FillTasks(std::move(tasks), v);
  // Most experiments never change their spec: the one revision is the
  // experiment's own, with no query (GET's p99 target).
  if (v.experiment.spec_revision > 1) {
    auto revisions = core_.ports().store.ListSpecRevisions(id);
    if (!revisions.ok()) return revisions.status();
    v.spec_revisions = std::move(revisions).value();
    for (SpecRevisionRecord& r : v.spec_revisions) r.spec_json.clear();
  } else {
    v.spec_revisions.push_back({id, 1, "", v.experiment.created_at, ""});
  }
  if (!v.attempts.empty()) {
    const NodeSlots& slots = v.attempts.back().node_slots;
    if (!slots.spares().empty()) v.spares = Spares(id, slots);
  }
  auto events = core_.ports().store.ListEvents(id, 500);
  if (!events.ok()) return events.status();
  v.events = std::move(events).value();
  return v;
}

Status ExperimentsImpl::CancelIfOwner(const std::string& id, const std::string& why,
                                      EndReason reason, const std::string* owner) {
  int64_t job = 0;
  {
    MutexLock lock(core_.mu());
    OpenExperiment* open = core_.Find(id);
    if (open && owner && open->record.owner != *owner)
      return NotFound("no experiment '" + id + "'");
    if (!open || IsTerminal(open->record.state)) {
      auto e = core_.ports().store.GetExperiment(id);
      if (!e.ok()) return e.status();
      if (owner && e->owner != *owner) return NotFound("no experiment '" + id + "'");
      return FailedPrecondition("experiment '" + id + "' has already ended (" +
                                ExperimentStateName(e->state) + "); nothing to cancel");
    }
    OpenExperiment& a = *open;
    a.UserCancels();
    Changes c;
    core_.SetState(c, a, ExperimentState::kCancelled, why);
    if (reason == EndReason::kStoppedEarly) core_.Event(c, a, EventCode::kStoppedEarly, why);
    // Slurm's cancel reaches the programs only after slurmctld has told
    // every node's slurmd, each of which signals its steps; the agents are
    // a message away and stop their programs at once (bench/sweep_stop.sh).
    agents_.ReapRemaining(a, c, why);
    if (!a.attempt.EndRecorded()) core_.EndAttempt(a, reason, why, c);
    core_.Commit(c);
    job = a.attempt.CancelSent(core_.ports().clock.NowMs());
  }
  // If this fails, Tick tries again while the job runs: the experiment is
  // cancelled either way.
  if (job > 0) {
    if (Status s = core_.ports().slurm.CancelJob(job, SIGKILL); !s.ok())
      spdlog::warn("cancelling Slurm job {} of {}: {}; tried again while it runs", job, id,
                   s.message());
  }
  return Status::Ok();
}

}  // namespace

std::unique_ptr<Core> NewCore(const CorePorts& ports, CoreConfig config, Metrics* metrics,
                              std::vector<std::shared_ptr<CommitObserver>> observers) {
  // Counts nothing, for a core made without metrics; never destroyed, as
  // cores may outlive any one owner of it.
  static NoMetrics* const kNoMetrics = new NoMetrics();
  return std::make_unique<ExperimentsImpl>(ports, std::move(config),
                                           metrics ? *metrics : *kNoMetrics, std::move(observers));
}

}  // namespace tfslurm
