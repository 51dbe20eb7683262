#include "service/core/submission.h"

#include <algorithm>
#include <set>

#include "service/core/components.h"
#include "service/core/sbatch_script.h"
#include "service/core/sha256.h"
#include "service/core/wording.h"

namespace tfslurm {

struct Submission::PreparedAttempt {
  int number = 0;
  slurm::SubmitRequest request;
  AttemptRecord attempt;
  MemoryPlan memory;
};

StatusOr<std::vector<MemoryPlan>> Submission::PlanComponents(const ExperimentSpec& spec) {
  const std::vector<JobComponent> components = JobComponents(spec);
  std::vector<MemoryPlan> plans;
  std::vector<FieldError> fields;
  std::string message;
  for (size_t k = 0; k < components.size(); ++k) {
    const JobComponent& c = components[k];
    auto partition = Partition(c.resources.partition);
    StatusOr<MemoryPlan> plan = partition.ok() ? ComputeMemPerTask(*partition, c.resources, c.field)
                                               : StatusOr<MemoryPlan>(partition.status());
    if (plan.ok()) {
      plans.push_back(*plan);
      continue;
    }
    if (plan.status().code() != StatusCode::kInvalidArgument) return plan.status();
    // One message for every component that does not fit, each field named
    // by the component's own block (a role's partition is roles.<role>'s).
    const std::string what =
        components.size() > 1 ? "component " + std::to_string(k) + " (" + ComponentRoles(c) + "): "
                              : "";
    message += (message.empty() ? "" : "; ") + what + plan.status().message();
    for (FieldError f : plan.status().fields()) {
      if (c.field != "resources" && f.field.rfind("resources.partition", 0) == 0)
        f.field = c.field + ".partition";
      f.reason = what + f.reason;
      fields.push_back(std::move(f));
    }
  }
  if (!message.empty()) return InvalidArgument(message, std::move(fields));
  return plans;
}

namespace {

// The experiment's one memory line (mem_per_task_mb, mem_explanation, the
// submitting event): the first component's numbers, and with several
// components an explanation naming each.
MemoryPlan Summary(const ExperimentSpec& spec, const std::vector<MemoryPlan>& plans) {
  MemoryPlan summary = plans.front();
  if (plans.size() == 1) return summary;
  const std::vector<JobComponent> components = JobComponents(spec);
  summary.explanation.clear();
  for (size_t k = 0; k < plans.size() && k < components.size(); ++k)
    summary.explanation += (k ? "; " : "") + std::string("component ") + std::to_string(k) + " (" +
                           ComponentRoles(components[k]) + "): " + plans[k].explanation;
  return summary;
}

}  // namespace

StatusOr<PartitionShape> Submission::Partition(const std::string& name) {
  int64_t now = lc_.ports.clock.NowMs();
  {
    MutexLock lock(partition_mu_);
    auto it = partition_cache_.find(name);
    if (it != partition_cache_.end() && now - it->second.first < lc_.config.partition_cache_ms)
      return it->second.second;
  }
  auto shape = lc_.ports.slurm.GetPartition(name);
  if (!shape.ok()) return shape.status();
  MutexLock lock(partition_mu_);
  partition_cache_[name] = {now, *shape};
  return shape;
}

StatusOr<SubmitResult> Submission::Submit(const nlohmann::json& input, const std::string& owner,
                                          bool dry_run) {
  auto parsed = ParseSpec(input, lc_.config.limits);
  if (!parsed.ok()) return parsed.status();
  ExperimentSpec spec = std::move(parsed).value();
  // Before anything is stored: an owner whose job could not run (site mode,
  // no Unix account or root) is refused here, not at the first attempt.
  if (auto account = lc_.ports.accounts.ForOwner(owner); !account.ok()) return account.status();
  if (spec.id.empty()) spec.id = lc_.ports.random.NewExperimentId();

  if (auto existing = lc_.ports.store.GetExperiment(spec.id); existing.ok()) {
    return Status(StatusCode::kAlreadyExists,
                  "experiment '" + spec.id + "' exists (state " +
                      ExperimentStateName(existing->state) +
                      "); to run it again from its checkpoints: POST /experiments/" + spec.id +
                      "/resume (tfctl resume " + spec.id + "), or choose another id",
                  {{"id", "'" + spec.id + "' is taken"}});
  }

  auto partition = Partition(spec.resources.partition);
  if (!partition.ok()) return partition.status();
  // The default, made explicit, for the roles that inherit it too.
  for (auto& [role, r] : spec.roles)
    if (r.partition.empty()) r.partition = partition->name;
  spec.resources.partition = partition->name;
  auto plans = PlanComponents(spec);
  if (!plans.ok()) return plans.status();
  std::optional<MemoryPlan> memory = Summary(spec, *plans);
  const std::vector<MemoryPlan> more_memory(plans->begin() + 1, plans->end());

  int64_t now = lc_.ports.clock.NowMs();
  auto a = std::make_unique<OpenExperiment>();
  a->spec = spec;
  ExperimentRecord& e = a->record;
  e.id = spec.id;
  e.owner = owner;
  e.spec_json = spec.ToJson().dump();
  e.state = ExperimentState::kQueued;
  e.current_attempt = 1;
  e.model_dir = spec.model_dir.empty() ? lc_.config.output_root + "/" + spec.id : spec.model_dir;
  e.mem_per_task_mb = memory->mem_per_task_mb;
  e.mem_explanation = memory->explanation;
  e.created_at = e.updated_at = now;

  if (dry_run) {
    AttemptRecord attempt;
    attempt.experiment_id = spec.id;
    attempt.number = 1;
    attempt.job_name = slurm::JobName(spec.id, 1);
    slurm::AttemptPaths paths{lc_.config.output_root + "/" + spec.id + "/logs/attempt-1"};
    attempt.sbatch_script =
        slurm::BuildSubmitRequest(spec, plans->front(), 1, paths, lc_.config.launch, "",
                                  lc_.config.job_environment, {}, more_memory)
            .script;
    return SubmitResult{e, attempt, *memory};
  }

  auto prepared = PrepareAttempt(*a, 1);
  if (!prepared.ok()) return prepared.status();
  auto submitted = SubmitAttempt(*a, std::move(prepared).value(), /*create=*/true);
  if (!submitted.ok()) return submitted.status();
  SubmitResult result{a->record, a->attempt, *memory};
  MutexLock lock(lc_.mu);
  lc_.open[spec.id] = std::move(a);
  return result;
}

StatusOr<Submission::PreparedAttempt> Submission::PrepareAttempt(const OpenExperiment& a,
                                                                 int number) {
  const std::string& id = a.record.id;
  std::string log_dir =
      lc_.config.output_root + "/" + id + "/logs/attempt-" + std::to_string(number);
  // The job runs as this account, and everything made for it is made as it
  // (or, for the experiment's directory in the output root, given to it).
  auto as = lc_.ports.accounts.ForOwner(a.record.owner);
  if (!as.ok()) return as.status();
  if (Status s = lc_.ports.files.CreateExperimentDirectory(lc_.config.output_root + "/" + id, *as);
      !s.ok())
    return s;
  if (Status s = lc_.ports.files.CreateDirectories(log_dir, *as); !s.ok()) return s;
  if (Status s = lc_.ports.files.CreateDirectories(a.record.model_dir, *as); !s.ok()) return s;

  auto plans = PlanComponents(a.spec);
  if (!plans.ok()) return plans.status();
  const MemoryPlan& memory = plans->front();

  PreparedAttempt p;
  p.number = number;
  p.memory = Summary(a.spec, *plans);
  std::string secret = lc_.ports.random.NewSecret();
  p.request = slurm::BuildSubmitRequest(a.spec, memory, number, {log_dir}, lc_.config.launch,
                                        secret, lc_.config.job_environment, a.record.excluded_nodes,
                                        std::vector<MemoryPlan>(plans->begin() + 1, plans->end()));
  AttemptRecord& attempt = p.attempt;
  attempt.experiment_id = id;
  attempt.number = number;
  attempt.secret_sha256 = Sha256Hex(secret);
  attempt.job_name = p.request.job_name;
  attempt.state = "submitting";
  attempt.sbatch_script = p.request.script;
  p.request.user_id = as->uid;
  p.request.group_id = as->gid;
  if (auto cp = lc_.ports.files.ReadCheckpointState(a.record.model_dir, a.spec.framework, *as))
    attempt.start_step = cp->step;
  return p;
}

// The intent is one transaction: the attempt row `submitting` with its tasks
// and, for a restart or a resume, the experiment's move to queued. Before it,
// nothing has changed; after it, a crash leaves an attempt that Recover
// reconciles. For attempt 1 the experiment row is created in the same
// transaction; if Slurm refuses, the rows are removed again so a refused
// submission leaves nothing behind. For later attempts a refusal ends the
// experiment with Slurm's reason.
StatusOr<AttemptRecord> Submission::SubmitAttempt(OpenExperiment& a, PreparedAttempt p, bool create,
                                                  const std::string& queued_why) {
  const std::string& id = a.record.id;
  const int number = p.number;
  int64_t now = lc_.ports.clock.NowMs();
  p.attempt.submitted_at = now;

  auto run = std::make_unique<AttemptRun>(a.spec, number);
  std::vector<TaskRecord> tasks;
  for (int i = 0; i < run->size(); ++i) {
    TaskRecord t;
    t.experiment_id = id;
    t.attempt = number;
    t.proc_id = i;
    t.role = run->task(i).role.role;
    t.index = run->task(i).role.index;
    tasks.push_back(t);
  }

  ExperimentRecord record = a.record;
  record.current_attempt = number;
  record.updated_at = now;
  store::Changes intent;
  if (number == 1) record.state = ExperimentState::kQueued;
  if (!queued_why.empty() &&
      (record.state != ExperimentState::kQueued || record.reason != queued_why)) {
    intent.events.push_back({0, id, number, now, "state",
                             std::string(ExperimentStateName(record.state)) + " -> " +
                                 ExperimentStateName(ExperimentState::kQueued) + ": " +
                                 queued_why});
    record.state = ExperimentState::kQueued;
    record.reason = queued_why;
  }
  intent.experiment = record;
  intent.create_experiment = create;
  intent.attempts.push_back(p.attempt);
  intent.tasks = tasks;
  intent.events.push_back(
      {0, id, number, now, "submitting",
       "attempt " + std::to_string(number) + " as Slurm job " + p.request.job_name +
           "; memory per task " + std::to_string(p.memory.mem_per_task_mb) + " MB (" +
           p.memory.explanation + ")" +
           (p.attempt.start_step
                ? "; resumes from checkpoint step " + std::to_string(*p.attempt.start_step)
                : "")});
  if (Status s = lc_.Apply({&intent, 1}); !s.ok()) {
    if (s.code() == StatusCode::kAlreadyExists)
      return Status(
          StatusCode::kAlreadyExists,
          "experiment '" + id + "' exists; to run it again: POST /experiments/" + id + "/resume",
          {{"id", "'" + id + "' is taken"}});
    return s;
  }

  // Recorded: from here on `a` is the new attempt.
  a.record = record;
  a.attempt = p.attempt;
  a.run = std::move(run);
  a.tasks = std::move(tasks);
  a.channels.clear();
  a.heartbeat_dirty.clear();
  a.job_started_ms = a.reap_deadline_ms = a.reap_started_ms = a.last_progress_ms = 0;
  a.max_scalar_step.reset();
  a.scalar_notice_given = false;
  a.lost_nodes.clear();
  a.component_job_ids.clear();
  a.step_killed = a.job_cancel_sent = false;
  a.decided_reason.reset();
  a.start_seen_in_slurm = false;

  auto job = lc_.ports.slurm.Submit(p.request);
  store::Changes after;
  if (!job.ok()) {
    if (create) {
      // Nothing half-way: the experiment disappears with the refusal.
      store::Changes undo;
      undo.delete_experiment = id;
      lc_.Apply({&undo, 1});
      return job.status();
    }
    if (job.status().retryable()) {
      // Slurm may have the job all the same (an RPC that timed out): the
      // attempt stays `submitting`, and a later poll adopts the job by its
      // name or submits it again.
      int64_t delay = NextSubmitRetryMs(a);
      a.reconcile_at_ms = lc_.ports.clock.NowMs() + delay;
      lc_.Event(after, a, "retry",
                "Slurm did not take " + p.request.job_name + ": " + job.status().message() +
                    "; looking for it by name and submitting it again in " + Seconds(delay));
      lc_.Commit(after);
      return a.attempt;
    }
    a.attempt.state = "ended";
    lc_.EndAttempt(a, EndReason::kStartFailed);
    a.attempt.reason = job.status().message();
    a.attempt.ended_at = lc_.ports.clock.NowMs();
    after.attempts.push_back(a.attempt);
    lc_.SetState(
        after, a, ExperimentState::kFailed,
        "submission of attempt " + std::to_string(number) + " failed: " + job.status().message());
    lc_.Commit(after);
    return job.status();
  }
  a.submit_failures = 0;
  a.job_seen = true;
  a.attempt.slurm_job_id = *job;
  a.attempt.state = "pending";
  a.job_known_seq = ++lc_.job_seq;
  after.attempts.push_back(a.attempt);
  lc_.Event(after, a, "submitted",
            "Slurm job " + std::to_string(*job) + " (" + p.request.job_name + ")");
  lc_.Commit(after);
  return a.attempt;
}

int64_t Submission::NextSubmitRetryMs(OpenExperiment& a) {
  int64_t delay = lc_.config.submit_retry_ms << std::min(a.submit_failures, 10);
  a.submit_failures++;
  return std::min(delay, lc_.config.submit_retry_max_ms);
}

void Submission::OnSubmissionNotPrepared(OpenExperiment& a, int number, const Status& why,
                                         store::Changes& c) {
  std::string attempt_n = "attempt " + std::to_string(number);
  // Either the intent of `number` is recorded and waits (`submitting`), or
  // the experiment waits to restart.
  const bool recorded = a.attempt.number == number && a.attempt.state == "submitting";
  if (why.retryable()) {
    int64_t delay = NextSubmitRetryMs(a);
    if (recorded) {
      a.reconcile_at_ms = lc_.ports.clock.NowMs() + delay;
    } else {
      a.record.next_attempt_at = lc_.ports.clock.NowMs() + delay;
      a.record.updated_at = lc_.ports.clock.NowMs();
      c.experiment = a.record;
    }
    lc_.Event(
        c, a, "retry",
        attempt_n + " not submitted: " + why.message() + "; trying again in " + Seconds(delay));
    return;
  }
  if (recorded) {
    a.attempt.state = "ended";
    lc_.EndAttempt(a, EndReason::kStartFailed);
    a.attempt.reason = why.message();
    a.attempt.ended_at = lc_.ports.clock.NowMs();
    c.attempts.push_back(a.attempt);
  }
  lc_.SetState(c, a, ExperimentState::kFailed,
               attempt_n + " cannot be submitted: " + why.message());
}

StatusOr<AttemptRecord> Submission::Resume(const std::string& id) {
  MutexLock lock(lc_.mu);
  auto it = lc_.open.find(id);
  if (it != lc_.open.end()) {
    const OpenExperiment& a = *it->second;
    if (!IsTerminal(a.record.state))
      return FailedPrecondition(
          "experiment '" + id + "' is " + ExperimentStateName(a.record.state) +
          "; cancel it first (DELETE /experiments/" + id + ") or wait for it to end");
    return Status(StatusCode::kUnavailable, "experiment '" + id + "' has ended but its Slurm job " +
                                                std::to_string(a.attempt.slurm_job_id) +
                                                " is still finishing; retry in a few seconds");
  }
  auto record = lc_.ports.store.GetExperiment(id);
  if (!record.ok()) return record.status();
  auto loaded = lc_.Load(*record);
  if (!loaded.ok()) return loaded.status();
  std::unique_ptr<OpenExperiment> a = std::move(loaded).value();
  a->record.restarts = 0;
  a->record.next_attempt_at = 0;
  a->user_cancelled = false;
  // A user's resume starts over: nodes excluded after failures may be fixed.
  std::string cleared;
  for (const std::string& node : a->record.excluded_nodes)
    cleared += (cleared.empty() ? "" : ", ") + node;
  a->record.excluded_nodes.clear();
  // Nothing is stored before the intent: a failure to prepare the attempt
  // answers the error and leaves the experiment as it was.
  auto prepared = PrepareAttempt(*a, a->attempt.number + 1);
  if (!prepared.ok()) return prepared.status();
  // The step the attempt starts from, as PrepareAttempt read it.
  const std::optional<int64_t> start_step = prepared->attempt.start_step;
  auto attempt = SubmitAttempt(
      *a, std::move(prepared).value(), /*create=*/false,
      "resumed by the user" +
          (start_step ? " from checkpoint step " + std::to_string(*start_step)
                      : std::string(" (no checkpoint in ") + a->record.model_dir + ")") +
          (cleared.empty() ? "" : "; excluded nodes cleared (" + cleared + ")"));
  if (!attempt.ok()) return attempt.status();
  lc_.open[id] = std::move(a);
  return attempt;
}

void Submission::ExcludeSuspects(OpenExperiment& a) {
  if (a.suspect_nodes.empty()) return;
  std::vector<std::string> suspects = std::move(a.suspect_nodes);
  a.suspect_nodes.clear();
  store::Changes c;
  // Fresh from Slurm, not the partition cache: the node failed just now.
  // A heterogeneous job has a partition per component (core/components.h).
  const std::vector<JobComponent> components = JobComponents(a.spec);
  std::vector<PartitionShape> partitions;
  for (const JobComponent& comp : components) {
    auto partition = lc_.ports.slurm.GetPartition(comp.resources.partition);
    if (!partition.ok()) {
      lc_.Event(c, a, "exclude",
                "cannot check the nodes " + a.suspect_why + " on: " + partition.status().message() +
                    "; excluding none");
      return lc_.Commit(c);
    }
    partitions.push_back(*partition);
  }
  std::set<std::string> down,
      excluded(a.record.excluded_nodes.begin(), a.record.excluded_nodes.end());
  for (const PartitionShape& partition : partitions)
    for (const NodeShape& n : partition.nodes)
      if (n.unavailable) down.insert(n.name);
  std::vector<std::string> add;
  for (const std::string& node : suspects)
    if ((!a.suspects_if_down || down.contains(node)) && !excluded.contains(node))
      add.push_back(node);
  std::string names;
  for (const std::string& node : add) names += (names.empty() ? "" : ", ") + node;
  if (add.empty()) {
    if (a.suspects_if_down)
      lc_.Event(c, a, "exclude",
                "none of the nodes " + a.suspect_why + " on is down now; excluding none");
    return lc_.Commit(c);
  }
  // The job must still fit: never exclude any component out of its partition.
  std::set<std::string> after = excluded;
  after.insert(add.begin(), add.end());
  for (size_t k = 0; k < components.size(); ++k) {
    const PartitionShape& partition = partitions[k];
    const int total = static_cast<int>(partition.nodes.size());
    int gone = 0, gone_before = 0;
    for (const NodeShape& n : partition.nodes) {
      gone += after.contains(n.name);
      gone_before += excluded.contains(n.name);
    }
    const int needed = components[k].resources.nodes;
    if (total - gone < needed) {
      lc_.Event(c, a, "exclude",
                "not excluding " + names + " (" + a.suspect_why + "): partition " + partition.name +
                    " has " + std::to_string(total) + " nodes, " + std::to_string(gone_before) +
                    " excluded already, and the job needs " + std::to_string(needed) +
                    "; the next attempt may run there again");
      return lc_.Commit(c);
    }
  }
  a.record.excluded_nodes.insert(a.record.excluded_nodes.end(), add.begin(), add.end());
  c.experiment = a.record;
  lc_.Event(c, a, "exclude",
            "excluding " + names + " from the next attempts (" + a.suspect_why +
                "); a resume clears the list");
  lc_.Commit(c);
}

void Submission::SubmitAutomatically(OpenExperiment& a, int number, const std::string& queued_why) {
  ExcludeSuspects(a);
  auto prepared = PrepareAttempt(a, number);
  if (!prepared.ok()) {
    store::Changes c;
    OnSubmissionNotPrepared(a, number, prepared.status(), c);
    lc_.Commit(c);
    return;
  }
  // Slurm's answer is handled inside, the intent being recorded.
  SubmitAttempt(a, std::move(prepared).value(), /*create=*/false, queued_why);
}

}  // namespace tfslurm
