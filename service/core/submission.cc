#include "service/core/submission.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "base/sha256.h"
#include "service/core/components.h"
#include "service/core/in_place_restart.h"
#include "service/core/model_dir.h"
#include "service/core/sbatch_script.h"
#include "service/core/spec_changes.h"
#include "service/core/wording.h"

namespace tfslurm {
namespace {

// Adds `more`'s writes to `c`'s: its rows after c's, and its experiment,
// sweep and deletion where it has them.
void Append(Changes& c, const Changes& more) {
  if (more.experiment) c.experiment = more.experiment;
  c.create_experiment = c.create_experiment || more.create_experiment;
  c.attempts.insert(c.attempts.end(), more.attempts.begin(), more.attempts.end());
  c.tasks.insert(c.tasks.end(), more.tasks.begin(), more.tasks.end());
  c.events.insert(c.events.end(), more.events.begin(), more.events.end());
  c.spec_revisions.insert(c.spec_revisions.end(), more.spec_revisions.begin(),
                          more.spec_revisions.end());
  if (more.delete_experiment) c.delete_experiment = more.delete_experiment;
  if (more.sweep) c.sweep = more.sweep;
  c.create_sweep = c.create_sweep || more.create_sweep;
  c.sweep_trials.insert(c.sweep_trials.end(), more.sweep_trials.begin(), more.sweep_trials.end());
}

}  // namespace

struct Submission::PreparedAttempt {
  int number = 0;
  SubmitRequest request;
  AttemptRecord record;  // the attempt's row, as its intent records it
  MemoryPlan memory;
  // A resume that changed the spec: its new revision, stored with the intent.
  std::optional<SpecRevisionRecord> revision;
  // The caller's rows, written with a first attempt's intent, and what it
  // writes instead when Slurm refuses it (SubmitOptions).
  Changes with_intent;
  std::function<void(const Status&, Changes&)> if_refused;
};

StatusOr<JobPlan> Submission::PlanFor(const ExperimentSpec& spec, RunAs account) {
  const AgentLaunch& launch = core_.config().launch;
  if (Status s =
          CheckContainerForSite(spec, launch.container_runtime, launch.oci_unable_slurm_release);
      !s.ok())
    return s;
  std::vector<StatusOr<PartitionShape>> partitions;
  for (const JobComponent& c : JobComponents(spec)) {
    partitions.push_back(Partition(c.resources.partition));
    // Slurm down is worth a retry; a partition it does not have is the
    // spec's fault, named with the rest by PlanJob.
    if (!partitions.back().ok() &&
        partitions.back().status().code() != StatusCode::kInvalidArgument)
      return partitions.back().status();
  }
  return PlanJob(spec, partitions, std::move(account));
}

StatusOr<JobPlan> Submission::PlanAttempt(const OpenExperiment& a) {
  // The job runs as this account, and everything made for it is made as it
  // (or, for the experiment's directory in the output root, given to it).
  auto account = core_.ports().accounts.ForOwner(a.record.owner);
  if (!account.ok()) return account.status();
  return PlanFor(a.spec, std::move(account).value());
}

StatusOr<PartitionShape> Submission::Partition(const std::string& name) {
  int64_t now = core_.ports().clock.NowMs();
  {
    MutexLock lock(partition_mu_);
    auto it = partition_cache_.find(name);
    if (it != partition_cache_.end() && now - it->second.first < core_.config().partition_cache_ms)
      return it->second.second;
  }
  auto shape = core_.ports().slurm.GetPartition(name);
  if (!shape.ok()) return shape.status();
  MutexLock lock(partition_mu_);
  partition_cache_[name] = {now, *shape};
  return shape;
}

Status Submission::CheckWorkdir(const std::string& workdir, const RunAs& account) {
  if (workdir.empty()) return Status::Ok();
  Status usable = core_.ports().files.CheckWorkdir(workdir, account);
  if (usable.ok() || usable.code() == StatusCode::kUnavailable) return usable;
  return InvalidArgument(
      "the workdir " + workdir + " cannot be used by " + account.user + ": " + usable.message(),
      {{"workdir", "must be a directory " + account.user + " may enter, got '" + workdir +
                       "': " + usable.message()}});
}

Status Submission::CheckNewExperiment(const ExperimentSpec& spec, const std::string& owner,
                                      const RunAs& account) {
  if (auto existing = core_.ports().store.GetExperiment(spec.id); existing.ok()) {
    // Someone else's: that the id is taken, and nothing about it (its state,
    // its owner), as its routes answer 404 (api/auth.cc, CheckAccess).
    if (existing->owner != owner)
      return Status(StatusCode::kAlreadyExists,
                    "experiment id '" + spec.id + "' is taken; choose another id",
                    {{"id", "'" + spec.id + "' is taken"}});
    return Status(StatusCode::kAlreadyExists,
                  "experiment '" + spec.id + "' exists (state " +
                      ExperimentStateName(existing->state) +
                      "); to run it again from its checkpoints: POST /experiments/" + spec.id +
                      "/resume (tfctl resume " + spec.id + "), or choose another id",
                  {{"id", "'" + spec.id + "' is taken"}});
  }
  // Before anything is made: a model_dir in someone else's experiment would
  // show their checkpoint and let this job overwrite it.
  auto owner_of = [this](const std::string& id) -> std::optional<std::string> {
    auto other = core_.ports().store.GetExperiment(id);
    if (!other.ok()) return std::nullopt;
    return other->owner;
  };
  if (Status s = CheckModelDir(
          {spec.model_dir, spec.id, owner, core_.config().output_root, account.uid == 0}, owner_of);
      !s.ok())
    return s;
  // Before anything is made, in the dry run too: a model_dir outside the
  // experiment's own directory must be one the account can make or write
  // into (its own directory is made by tfslurmd and given to it).
  const std::string own_dir = core_.config().output_root + "/" + spec.id;
  if (spec.model_dir.empty() || spec.model_dir == own_dir ||
      spec.model_dir.starts_with(own_dir + "/"))
    return Status::Ok();
  Status usable = core_.ports().files.CheckCanCreateDirectories(spec.model_dir, account);
  if (usable.ok() || usable.code() == StatusCode::kUnavailable) return usable;
  return InvalidArgument(
      "the model_dir " + spec.model_dir + " cannot be made by " + account.user + ": " +
          usable.message(),
      {{"model_dir", "must be a directory " + account.user + " may create or write into, got '" +
                         spec.model_dir + "': " + usable.message()}});
}

std::unique_ptr<OpenExperiment> Submission::NewExperiment(const ExperimentSpec& spec,
                                                          const std::string& owner,
                                                          const MemoryPlan& memory) {
  int64_t now = core_.ports().clock.NowMs();
  auto a = std::make_unique<OpenExperiment>();
  a->spec = spec;
  ExperimentRecord& e = a->record;
  e.id = spec.id;
  e.owner = owner;
  e.spec_json = spec.ToJson().dump();
  e.state = ExperimentState::kQueued;
  e.current_attempt = 1;
  e.model_dir =
      spec.model_dir.empty() ? core_.config().output_root + "/" + spec.id : spec.model_dir;
  e.mem_per_task_mb = memory.mem_per_task_mb;
  e.mem_explanation = memory.explanation;
  e.created_at = e.updated_at = now;
  return a;
}

StatusOr<SubmitResult> Submission::Submit(const nlohmann::json& input, const std::string& owner,
                                          const SubmitOptions& options) {
  auto parsed = ParseSpec(input, core_.config().limits);
  if (!parsed.ok()) return parsed.status();
  ExperimentSpec spec = std::move(parsed).value();
  // Before anything is stored: an owner whose job could not run (site mode,
  // no Unix account or root) is refused here, not at the first attempt.
  auto account = core_.ports().accounts.ForOwner(owner);
  if (!account.ok()) return account.status();
  if (Status s = CheckWorkdir(spec.workdir, *account); !s.ok()) return s;
  if (spec.id.empty()) spec.id = core_.ports().random.NewExperimentId();
  // An id a client of core keeps for an experiment it starts itself (a
  // sweep's trial) is taken to anyone else.
  if (core_.config().kept_ids && !options.keeper)
    if (Status s = core_.config().kept_ids(spec.id, owner); !s.ok()) return s;
  if (Status s = CheckNewExperiment(spec, owner, *account); !s.ok()) return s;

  auto partition = Partition(spec.resources.partition);
  if (!partition.ok()) return partition.status();
  // The default, made explicit, for the roles that inherit it too.
  for (auto& [role, r] : spec.roles)
    if (r.partition.empty()) r.partition = partition->name;
  spec.resources.partition = partition->name;
  auto plan = PlanFor(spec, std::move(account).value());
  if (!plan.ok()) return plan.status();
  const MemoryPlan memory = plan->Summary();
  std::unique_ptr<OpenExperiment> a = NewExperiment(spec, owner, memory);

  if (options.dry_run) {
    AttemptRecord attempt;
    attempt.experiment_id = spec.id;
    attempt.number = 1;
    attempt.job_name = JobName(spec.id, 1);
    AttemptJob job{
        1,
        {LogDir(spec.id, 1), core_.config().output_root + "/" + spec.id, a->record.model_dir},
        "",
        {}};
    attempt.sbatch_script =
        BuildSubmitRequest(spec, *plan, job, core_.config().launch, core_.config().job_environment)
            .script;
    return SubmitResult{a->record, attempt, memory};
  }

  auto prepared = PrepareAttempt(*a, 1, *plan);
  if (!prepared.ok()) return prepared.status();
  prepared->with_intent = options.with_intent;
  prepared->if_refused = options.if_refused;
  auto submitted = SubmitAttempt(*a, std::move(prepared).value(), /*create=*/true);
  if (!submitted.ok()) return submitted.status();
  SubmitResult result{a->record, a->attempt.record, memory};
  MutexLock lock(core_.mu());
  core_.Add(std::move(a));
  return result;
}

std::string Submission::LogDir(const std::string& id, int number) const {
  return AttemptLogDir(core_.config().output_root, id, number);
}

StatusOr<Submission::PreparedAttempt> Submission::PrepareAttempt(const OpenExperiment& a,
                                                                 int number, const JobPlan& plan) {
  const std::string& id = a.record.id;
  const RunAs& as = plan.account;
  const std::string log_dir = LogDir(id, number);
  if (Status s =
          core_.ports().files.CreateExperimentDirectory(core_.config().output_root + "/" + id, as);
      !s.ok())
    return s;
  if (Status s = core_.ports().files.CreateDirectories(log_dir, as); !s.ok()) return s;
  if (Status s = core_.ports().files.CreateDirectories(a.record.model_dir, as); !s.ok()) return s;

  PreparedAttempt p;
  p.number = number;
  p.memory = plan.Summary();
  std::string secret = core_.ports().random.NewSecret();
  const std::string secret_file = log_dir + "/" + kSecretFileName;
  if (Status s = core_.ports().files.WriteSecretFile(secret_file, secret, as); !s.ok()) return s;
  const AttemptPaths paths{log_dir, core_.config().output_root + "/" + id, a.record.model_dir};
  p.request =
      BuildSubmitRequest(a.spec, plan, {number, paths, secret_file, a.record.excluded_nodes},
                         core_.config().launch, core_.config().job_environment);
  AttemptRecord& attempt = p.record;
  attempt.experiment_id = id;
  attempt.number = number;
  attempt.secret_sha256 = Sha256Hex(secret);
  attempt.job_name = p.request.job_name;
  attempt.state = AttemptState::kSubmitting;
  attempt.sbatch_script = p.request.script;
  attempt.node_slots = NodeSlots::ForNewJob(a.spec.resources.nodes, a.spec.resources.spare_nodes,
                                            a.spec.resources.tasks_per_node);
  attempt.spec_revision = a.record.spec_revision;
  if (auto cp = core_.ports().files.ReadCheckpointState(a.record.model_dir, a.spec.framework, as))
    attempt.start_step = cp->step;
  return p;
}

Changes Submission::IntentOf(const OpenExperiment& a, const PreparedAttempt& p,
                             const LiveAttempt& next, ExperimentRecord& record, bool create,
                             const std::string& queued_why) {
  const std::string& id = a.record.id;
  const int number = p.number;
  const int64_t now = p.record.submitted_at;
  record.current_attempt = number;
  record.updated_at = now;
  Changes intent;
  if (number == 1) record.state = ExperimentState::kQueued;
  if (!queued_why.empty() &&
      (record.state != ExperimentState::kQueued || record.reason != queued_why)) {
    intent.events.push_back({0, id, number, now, EventCode::kState,
                             std::string(ExperimentStateName(record.state)) + " -> " +
                                 ExperimentStateName(ExperimentState::kQueued) + ": " +
                                 queued_why});
    record.state = ExperimentState::kQueued;
    record.reason = queued_why;
  }
  intent.experiment = record;
  intent.create_experiment = create;
  if (create) intent.spec_revisions.push_back({id, 1, record.spec_json, now, ""});
  if (p.revision) intent.spec_revisions.push_back(*p.revision);
  Append(intent, p.with_intent);
  intent.attempts.push_back(p.record);
  intent.tasks = next.tasks;
  intent.events.push_back(
      {0, id, number, now, EventCode::kSubmitting,
       "attempt " + std::to_string(number) + " as Slurm job " + p.request.job_name +
           "; memory per task " + std::to_string(p.memory.mem_per_task_mb) + " MB (" +
           p.memory.explanation + ")" +
           (p.record.start_step
                ? "; resumes from checkpoint step " + std::to_string(*p.record.start_step)
                : "")});
  return intent;
}

// Slurm did not take a recorded attempt: a first attempt leaves nothing;
// a later one waits to be looked for and submitted again when the cause is
// transient, else fails the experiment with Slurm's reason.
Status Submission::OnNotSubmitted(OpenExperiment& a, const PreparedAttempt& p, bool create,
                                  const Status& refusal) {
  const std::string& id = a.record.id;
  Changes after;
  if (create) {
    // Nothing half-way: the experiment disappears with the refusal.
    Changes undo;
    undo.delete_experiment = id;
    if (p.if_refused) p.if_refused(refusal, undo);
    if (Status s = core_.Apply({&undo, 1}); !s.ok())
      spdlog::error("experiment {} stays stored after Slurm refused it: {}", id, s.message());
    return refusal;
  }
  if (refusal.retryable()) {
    // Slurm may have the job all the same (an RPC that timed out): the
    // attempt stays `submitting`, and a later poll adopts the job by its
    // name or submits it again.
    int64_t delay = NextSubmitRetryMs(a);
    a.attempt.ReconcileAt(core_.ports().clock.NowMs() + delay);
    core_.Event(after, a, EventCode::kRetry,
                "Slurm did not take " + p.request.job_name + ": " + refusal.message() +
                    "; looking for it by name and submitting it again in " + Seconds(delay));
    core_.Commit(after);
    return Status::Ok();
  }
  core_.EndAttempt(a, EndReason::kStartFailed, refusal.message(), after,
                   core_.ports().clock.NowMs());
  core_.SetState(
      after, a, ExperimentState::kFailed,
      "submission of attempt " + std::to_string(p.number) + " failed: " + refusal.message());
  core_.Commit(after);
  return refusal;
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
  p.record.submitted_at = core_.ports().clock.NowMs();
  LiveAttempt next(a.spec, p.record);
  ExperimentRecord record = a.record;
  Changes intent = IntentOf(a, p, next, record, create, queued_why);
  if (Status s = core_.Apply({&intent, 1}); !s.ok()) {
    if (s.code() == StatusCode::kAlreadyExists)
      return Status(
          StatusCode::kAlreadyExists,
          "experiment '" + id + "' exists; to run it again: POST /experiments/" + id + "/resume",
          {{"id", "'" + id + "' is taken"}});
    return s;
  }

  // Recorded: from here on `a` is the new attempt.
  a.record = record;
  a.attempt = std::move(next);

  if (auto job = core_.ports().slurm.Submit(p.request); job.ok()) {
    Changes after;
    a.submit_failures = 0;
    a.attempt.AdoptJob(*job, core_.NextJobSeq(), after);
    core_.Event(after, a, EventCode::kSubmitted,
                "Slurm job " + std::to_string(*job) + " (" + p.request.job_name + ")");
    core_.Commit(after);
  } else if (Status s = OnNotSubmitted(a, p, create, job.status()); !s.ok()) {
    return s;
  }
  return a.attempt.record;
}

int64_t Submission::NextSubmitRetryMs(OpenExperiment& a) {
  int64_t delay = core_.config().submit_retry_ms << std::min(a.submit_failures, 10);
  a.submit_failures++;
  return std::min(delay, core_.config().submit_retry_max_ms);
}

void Submission::OnSubmissionNotPrepared(OpenExperiment& a, int number, const Status& why,
                                         Changes& c) {
  std::string attempt_n = "attempt " + std::to_string(number);
  // Either the intent of `number` is recorded and waits (`submitting`), or
  // the experiment waits to restart.
  const bool recorded = a.attempt.AwaitsSubmission(number);
  if (why.retryable()) {
    int64_t delay = NextSubmitRetryMs(a);
    if (recorded) {
      a.attempt.ReconcileAt(core_.ports().clock.NowMs() + delay);
    } else {
      a.record.next_attempt_at = core_.ports().clock.NowMs() + delay;
      a.record.updated_at = core_.ports().clock.NowMs();
      c.experiment = a.record;
    }
    core_.Event(
        c, a, EventCode::kRetry,
        attempt_n + " not submitted: " + why.message() + "; trying again in " + Seconds(delay));
    return;
  }
  if (recorded) {
    core_.EndAttempt(a, EndReason::kStartFailed, why.message(), c, core_.ports().clock.NowMs());
  }
  core_.SetState(c, a, ExperimentState::kFailed,
                 attempt_n + " cannot be submitted: " + why.message());
}

Status Submission::CheckChangedWorkdir(const OpenExperiment& a, const ExperimentSpec& changed) {
  if (changed.workdir.empty() || changed.workdir == a.spec.workdir) return Status::Ok();
  auto account = core_.ports().accounts.ForOwner(a.record.owner);
  if (!account.ok()) return account.status();
  return CheckWorkdir(changed.workdir, *account);
}

StatusOr<AttemptRecord> Submission::Resume(const std::string& id, const nlohmann::json& changes) {
  MutexLock lock(core_.mu());
  if (const OpenExperiment* open = core_.Find(id)) {
    const OpenExperiment& a = *open;
    if (!IsTerminal(a.record.state))
      return FailedPrecondition("experiment '" + id + "' is " +
                                ExperimentStateName(a.record.state) +
                                "; cancel it first (tfctl cancel " + id +
                                ", or DELETE /experiments/" + id + ") or wait for it to end");
    return a.JobStillFinishing();
  }
  auto record = core_.ports().store.GetExperiment(id);
  if (!record.ok()) return record.status();
  auto loaded = core_.Load(*record);
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
  // Nothing is stored before the intent: a spec change that is refused, or a
  // failure to prepare the attempt, answers the error and leaves the
  // experiment as it was.
  std::optional<SpecRevisionRecord> revision;
  if (!changes.is_null()) {
    auto changed = ApplySpecChanges(a->spec, changes, core_.config().limits);
    if (!changed.ok()) return changed.status();
    if (!changed->summary.empty()) {
      if (Status s = CheckChangedWorkdir(*a, changed->spec); !s.ok()) return s;
      a->spec = std::move(changed->spec);
      a->record.spec_json = a->spec.ToJson().dump();
      a->record.spec_revision++;
      revision = SpecRevisionRecord{id, a->record.spec_revision, a->record.spec_json,
                                    core_.ports().clock.NowMs(), changed->summary};
    }
  }
  auto plan = PlanAttempt(*a);
  if (!plan.ok()) return plan.status();
  a->record.mem_per_task_mb = plan->Summary().mem_per_task_mb;
  a->record.mem_explanation = plan->Summary().explanation;
  auto prepared = PrepareAttempt(*a, a->attempt.record.number + 1, *plan);
  if (!prepared.ok()) return prepared.status();
  prepared->revision = revision;
  // The step the attempt starts from, as PrepareAttempt read it.
  const std::optional<int64_t> start_step = prepared->record.start_step;
  auto attempt = SubmitAttempt(
      *a, std::move(prepared).value(), /*create=*/false,
      "resumed by the user" +
          (start_step ? " from checkpoint step " + std::to_string(*start_step)
                      : std::string(" (no checkpoint in ") + a->record.model_dir + ")") +
          (cleared.empty() ? "" : "; excluded nodes cleared (" + cleared + ")") +
          (revision
               ? "; spec revision " + std::to_string(revision->revision) + ": " + revision->changes
               : ""));
  if (!attempt.ok()) return attempt.status();
  core_.Add(std::move(a));
  return attempt;
}

void Submission::ExcludeSuspects(OpenExperiment& a) {
  if (a.suspects.nodes.empty()) return;
  std::vector<std::string> suspects = std::move(a.suspects.nodes);
  a.suspects.nodes.clear();
  Changes c;
  // Fresh from Slurm, not the partition cache: the node failed just now.
  // A heterogeneous job has a partition per component (core/components.h).
  const std::vector<JobComponent>& components = a.attempt.run->components();
  std::vector<PartitionShape> partitions;
  for (const JobComponent& comp : components) {
    auto partition = core_.ports().slurm.GetPartition(comp.resources.partition);
    if (!partition.ok()) {
      core_.Event(c, a, EventCode::kExclude,
                  "cannot check the nodes " + a.suspects.why +
                      " on: " + partition.status().message() + "; excluding none");
      return core_.Commit(c);
    }
    partitions.push_back(*partition);
  }
  std::set<std::string> down,
      excluded(a.record.excluded_nodes.begin(), a.record.excluded_nodes.end());
  for (const PartitionShape& partition : partitions)
    for (const NodeShape& n : partition.nodes)
      if (n.unavailable) down.insert(n.name);
  std::vector<std::string> add;
  for (const std::string& node : suspects) {
    // A name an agent reported goes into the job's --exclude: a node name
    // only (RegisterInfoProblem), whatever an older row holds.
    RegisterInfo named;
    named.node_name = node;
    if (node.empty() || !RegisterInfoProblem(named).empty()) continue;
    if ((!a.suspects.only_if_down || down.contains(node)) && !excluded.contains(node))
      add.push_back(node);
  }
  std::string names;
  for (const std::string& node : add) names += (names.empty() ? "" : ", ") + node;
  if (add.empty()) {
    if (a.suspects.only_if_down)
      core_.Event(c, a, EventCode::kExclude,
                  "none of the nodes " + a.suspects.why + " on is down now; excluding none");
    return core_.Commit(c);
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
    // The first component's job holds the spare nodes too (sbatch_script.cc).
    const int needed = components[k].resources.nodes + (k == 0 ? a.spec.resources.spare_nodes : 0);
    if (total - gone < needed) {
      core_.Event(c, a, EventCode::kExclude,
                  "not excluding " + names + " (" + a.suspects.why + "): partition " +
                      partition.name + " has " + std::to_string(total) + " nodes, " +
                      std::to_string(gone_before) + " excluded already, and the job needs " +
                      std::to_string(needed) + "; the next attempt may run there again");
      return core_.Commit(c);
    }
  }
  a.record.excluded_nodes.insert(a.record.excluded_nodes.end(), add.begin(), add.end());
  c.experiment = a.record;
  core_.Event(c, a, EventCode::kExclude,
              "excluding " + names + " from the next attempts (" + a.suspects.why +
                  "); a resume clears the list");
  core_.Commit(c);
}

void Submission::SubmitAutomatically(OpenExperiment& a, int number, const std::string& queued_why) {
  ExcludeSuspects(a);
  auto plan = PlanAttempt(a);
  auto prepared =
      plan.ok() ? PrepareAttempt(a, number, *plan) : StatusOr<PreparedAttempt>(plan.status());
  if (!prepared.ok()) {
    Changes c;
    OnSubmissionNotPrepared(a, number, prepared.status(), c);
    core_.Commit(c);
    return;
  }
  // Slurm's answer is handled inside, the intent being recorded: a refusal
  // fails the experiment with Slurm's reason, a transient error is retried.
  static_cast<void>(SubmitAttempt(a, std::move(prepared).value(), /*create=*/false, queued_why));
}

}  // namespace tfslurm
