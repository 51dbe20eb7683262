#include "service/core/experiments.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <unordered_map>

#include "schema/tf_config_wire.h"
#include "service/core/checkpoint_state.h"

namespace tfslurm {

namespace {

class SystemClock final : public Clock {
 public:
  int64_t NowMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

std::string Hex(const unsigned char* data, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 15];
  }
  return out;
}

class SystemRandomness final : public Randomness {
 public:
  std::string NewSecret() override { return RandomHex(32); }
  std::string NewExperimentId() override {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
    return std::string("exp-") + buf + "-" + RandomHex(3);
  }

 private:
  static std::string RandomHex(size_t bytes) {
    std::vector<unsigned char> buf(bytes);
    if (RAND_bytes(buf.data(), static_cast<int>(bytes)) != 1) {
      // Without randomness, secrets would be guessable: stop loudly.
      fprintf(stderr, "tfslurmd: RAND_bytes failed\n");
      abort();
    }
    return Hex(buf.data(), bytes);
  }
};

std::string TaskName(const TaskSlot& t, int proc) {
  return t.role.role + ":" + std::to_string(t.role.index) + " (task " + std::to_string(proc) +
         (t.node.empty() ? "" : " on " + t.node) + ")";
}

std::string Seconds(int64_t ms) { return std::to_string((ms + 500) / 1000) + " s"; }

}  // namespace

std::unique_ptr<Clock> NewSystemClock() { return std::make_unique<SystemClock>(); }
std::unique_ptr<Randomness> NewSystemRandomness() { return std::make_unique<SystemRandomness>(); }

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  return Hex(digest, len);
}

// An open experiment in memory: its records, the current attempt's tasks and
// the channels of the agents connected for them.
struct Experiments::Active {
  ExperimentRecord record;
  ExperimentSpec spec;
  AttemptRecord attempt;
  std::unique_ptr<AttemptRun> run;
  std::vector<TaskRecord> tasks;
  std::map<int, std::shared_ptr<TaskChannel>> channels;
  std::set<int> heartbeat_dirty;  // tasks whose heartbeat is not persisted yet
  bool user_cancelled = false;
  int64_t job_started_ms = 0;
  int64_t reap_deadline_ms = 0;
  bool step_killed = false;
  bool job_cancel_sent = false;
  // Set when the service itself ended the attempt (barrier timeout), so the
  // job's CANCELLED state is not taken for a user's scancel.
  std::optional<EndReason> decided_reason;
  int64_t cancel_sent_at_ms = 0;
  bool start_seen_in_slurm = false;
  // This process has seen the attempt's job in Slurm (or Slurm took it from
  // this process). False after a restart of the service until a poll finds it.
  bool job_seen = false;
  // Automatic submissions that failed in a row, for the retry backoff.
  int submit_failures = 0;
  // An attempt still `submitting` (its submission was interrupted, or Slurm
  // did not answer) is looked up in Slurm by name, then submitted, at the
  // first poll from this time on.
  int64_t reconcile_at_ms = 0;
  // When Slurm's answer named this attempt's job, in submission order: a
  // poll whose snapshot began before it cannot have seen the job.
  int64_t job_known_seq = 0;
};

struct Experiments::Actions {
  std::vector<int64_t> cancel_jobs;
  std::vector<int64_t> kill_steps;
  std::vector<std::string> restarts;
  std::vector<std::string> resubmits;  // attempts `submitting` that Slurm does not have
};

struct Experiments::PreparedAttempt {
  int number = 0;
  slurm::SubmitRequest request;
  AttemptRecord attempt;
  MemoryPlan memory;
};

Experiments::Experiments(store::Store& store, slurm::SlurmClient& slurm, Clock& clock,
                         Randomness& random, LifecycleConfig config)
    : store_(store), slurm_(slurm), clock_(clock), random_(random), config_(std::move(config)) {}

Experiments::~Experiments() = default;

void Experiments::SetLaunch(const slurm::AgentLaunch& launch) {
  std::lock_guard lock(mu_);
  config_.launch = launch;
}

void Experiments::Event(store::Changes& c, const Active& a, const std::string& what,
                        const std::string& why) {
  c.events.push_back({0, a.record.id, a.attempt.number, clock_.NowMs(), what, why});
}

void Experiments::SetState(store::Changes& c, Active& a, ExperimentState state,
                           const std::string& why) {
  if (a.record.state == state && a.record.reason == why) return;
  std::string from = ExperimentStateName(a.record.state);
  a.record.state = state;
  a.record.reason = why;
  a.record.updated_at = clock_.NowMs();
  c.experiment = a.record;
  Event(c, a, "state",
        from + " -> " + ExperimentStateName(state) + (why.empty() ? "" : ": " + why));
}

void Experiments::Commit(store::Changes& c) {
  CommitAll({&c, 1});
  c = store::Changes{};
}

void Experiments::CommitAll(std::span<const store::Changes> batch) {
  if (Status s = store_.ApplyAll(batch); !s.ok())
    fprintf(stderr, "tfslurmd: could not persist changes: %s\n", s.message().c_str());
}

StatusOr<PartitionShape> Experiments::Partition(const std::string& name) {
  int64_t now = clock_.NowMs();
  {
    std::lock_guard lock(partition_mu_);
    auto it = partition_cache_.find(name);
    if (it != partition_cache_.end() && now - it->second.first < config_.partition_cache_ms)
      return it->second.second;
  }
  auto shape = slurm_.GetPartition(name);
  if (!shape.ok()) return shape.status();
  std::lock_guard lock(partition_mu_);
  partition_cache_[name] = {now, *shape};
  return shape;
}

StatusOr<SubmitResult> Experiments::Submit(const nlohmann::json& input, const std::string& owner,
                                           bool dry_run) {
  auto parsed = ParseSpec(input, config_.limits);
  if (!parsed.ok()) return parsed.status();
  ExperimentSpec spec = std::move(parsed).value();
  if (spec.id.empty()) spec.id = random_.NewExperimentId();

  if (auto existing = store_.GetExperiment(spec.id); existing.ok()) {
    return Status(StatusCode::kAlreadyExists,
                  "experiment '" + spec.id + "' exists (state " +
                      ExperimentStateName(existing->state) +
                      "); to run it again from its checkpoints: POST /experiments/" + spec.id +
                      "/resume (tfctl resume " + spec.id + "), or choose another id",
                  {{"id", "'" + spec.id + "' is taken"}});
  }

  auto partition = Partition(spec.resources.partition);
  if (!partition.ok()) return partition.status();
  spec.resources.partition = partition->name;  // the default, made explicit
  auto memory = ComputeMemPerTask(*partition, spec.resources);
  if (!memory.ok()) return memory.status();

  int64_t now = clock_.NowMs();
  auto a = std::make_unique<Active>();
  a->spec = spec;
  ExperimentRecord& e = a->record;
  e.id = spec.id;
  e.owner = owner;
  e.spec_json = spec.ToJson().dump();
  e.state = ExperimentState::kQueued;
  e.current_attempt = 1;
  e.model_dir = spec.model_dir.empty() ? config_.output_root + "/" + spec.id : spec.model_dir;
  e.mem_per_task_mb = memory->mem_per_task_mb;
  e.mem_explanation = memory->explanation;
  e.created_at = e.updated_at = now;

  if (dry_run) {
    AttemptRecord attempt;
    attempt.experiment_id = spec.id;
    attempt.number = 1;
    attempt.job_name = slurm::JobName(spec.id, 1);
    slurm::AttemptPaths paths{config_.output_root + "/" + spec.id + "/logs/attempt-1"};
    attempt.sbatch_script = slurm::BuildSubmitRequest(spec, *memory, 1, paths, config_.launch, "",
                                                      config_.job_environment)
                                .script;
    return SubmitResult{e, attempt, *memory};
  }

  auto prepared = PrepareAttempt(*a, 1);
  if (!prepared.ok()) return prepared.status();
  auto submitted = SubmitAttempt(*a, std::move(prepared).value(), /*create=*/true);
  if (!submitted.ok()) return submitted.status();
  SubmitResult result{a->record, a->attempt, *memory};
  std::lock_guard lock(mu_);
  active_[spec.id] = std::move(a);
  return result;
}

StatusOr<Experiments::PreparedAttempt> Experiments::PrepareAttempt(const Active& a, int number) {
  const std::string& id = a.record.id;
  std::string log_dir = config_.output_root + "/" + id + "/logs/attempt-" + std::to_string(number);
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (!ec) std::filesystem::create_directories(a.record.model_dir, ec);
  if (ec)
    return Unavailable("cannot create " + log_dir + " or " + a.record.model_dir + ": " +
                       ec.message());

  auto partition = Partition(a.spec.resources.partition);
  if (!partition.ok()) return partition.status();
  auto memory = ComputeMemPerTask(*partition, a.spec.resources);
  if (!memory.ok()) return memory.status();

  PreparedAttempt p;
  p.number = number;
  p.memory = *memory;
  std::string secret = random_.NewSecret();
  p.request = slurm::BuildSubmitRequest(a.spec, *memory, number, {log_dir}, config_.launch, secret,
                                        config_.job_environment);
  AttemptRecord& attempt = p.attempt;
  attempt.experiment_id = id;
  attempt.number = number;
  attempt.secret_sha256 = Sha256Hex(secret);
  attempt.job_name = p.request.job_name;
  attempt.state = "submitting";
  attempt.sbatch_script = p.request.script;
  if (auto cp = ReadCheckpointState(a.record.model_dir)) attempt.start_step = cp->step;
  return p;
}

// The intent is one transaction: the attempt row `submitting` with its tasks
// and, for a restart or a resume, the experiment's move to queued. Before it,
// nothing has changed; after it, a crash leaves an attempt that Recover
// reconciles. For attempt 1 the experiment row is created in the same
// transaction; if Slurm refuses, the rows are removed again so a refused
// submission leaves nothing behind. For later attempts a refusal ends the
// experiment with Slurm's reason.
StatusOr<AttemptRecord> Experiments::SubmitAttempt(Active& a, PreparedAttempt p, bool create,
                                                   const std::string& queued_why) {
  const std::string& id = a.record.id;
  const int number = p.number;
  int64_t now = clock_.NowMs();
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
  if (Status s = store_.Apply(intent); !s.ok()) {
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
  a.job_started_ms = a.reap_deadline_ms = 0;
  a.step_killed = a.job_cancel_sent = false;
  a.decided_reason.reset();
  a.start_seen_in_slurm = false;

  auto job = slurm_.Submit(p.request);
  store::Changes after;
  if (!job.ok()) {
    if (create) {
      // Nothing half-way: the experiment disappears with the refusal.
      store::Changes undo;
      undo.delete_experiment = id;
      store_.Apply(undo);
      return job.status();
    }
    if (job.status().retryable()) {
      // Slurm may have the job all the same (an RPC that timed out): the
      // attempt stays `submitting`, and a later poll adopts the job by its
      // name or submits it again.
      int64_t delay = NextSubmitRetryMs(a);
      a.reconcile_at_ms = clock_.NowMs() + delay;
      Event(after, a, "retry",
            "Slurm did not take " + p.request.job_name + ": " + job.status().message() +
                "; looking for it by name and submitting it again in " + Seconds(delay));
      Commit(after);
      return a.attempt;
    }
    a.attempt.state = "ended";
    a.attempt.end_reason = EndReasonName(EndReason::kStartFailed);
    a.attempt.reason = job.status().message();
    a.attempt.ended_at = clock_.NowMs();
    after.attempts.push_back(a.attempt);
    SetState(
        after, a, ExperimentState::kFailed,
        "submission of attempt " + std::to_string(number) + " failed: " + job.status().message());
    Commit(after);
    return job.status();
  }
  a.submit_failures = 0;
  a.job_seen = true;
  a.attempt.slurm_job_id = *job;
  a.attempt.state = "pending";
  a.job_known_seq = ++job_seq_;
  after.attempts.push_back(a.attempt);
  Event(after, a, "submitted",
        "Slurm job " + std::to_string(*job) + " (" + p.request.job_name + ")");
  Commit(after);
  return a.attempt;
}

int64_t Experiments::NextSubmitRetryMs(Active& a) {
  int64_t delay = config_.submit_retry_ms << std::min(a.submit_failures, 10);
  a.submit_failures++;
  return std::min(delay, config_.submit_retry_max_ms);
}

void Experiments::OnSubmissionNotPrepared(Active& a, int number, const Status& why,
                                          store::Changes& c) {
  std::string attempt_n = "attempt " + std::to_string(number);
  // Either the intent of `number` is recorded and waits (`submitting`), or
  // the experiment waits to restart.
  const bool recorded = a.attempt.number == number && a.attempt.state == "submitting";
  if (why.retryable()) {
    int64_t delay = NextSubmitRetryMs(a);
    if (recorded) {
      a.reconcile_at_ms = clock_.NowMs() + delay;
    } else {
      a.record.next_attempt_at = clock_.NowMs() + delay;
      a.record.updated_at = clock_.NowMs();
      c.experiment = a.record;
    }
    Event(c, a, "retry",
          attempt_n + " not submitted: " + why.message() + "; trying again in " + Seconds(delay));
    return;
  }
  if (recorded) {
    a.attempt.state = "ended";
    a.attempt.end_reason = EndReasonName(EndReason::kStartFailed);
    a.attempt.reason = why.message();
    a.attempt.ended_at = clock_.NowMs();
    c.attempts.push_back(a.attempt);
  }
  SetState(c, a, ExperimentState::kFailed, attempt_n + " cannot be submitted: " + why.message());
}

StatusOr<ExperimentView> Experiments::Get(const std::string& id) {
  auto e = store_.GetExperiment(id);
  if (!e.ok()) return e.status();
  ExperimentView v;
  v.experiment = std::move(e).value();
  auto attempts = store_.ListAttempts(id);
  if (!attempts.ok()) return attempts.status();
  v.attempts = std::move(attempts).value();
  auto tasks = store_.ListTasks(id, v.experiment.current_attempt);
  if (!tasks.ok()) return tasks.status();
  v.tasks = std::move(tasks).value();
  auto events = store_.ListEvents(id, 500);
  if (!events.ok()) return events.status();
  v.events = std::move(events).value();
  return v;
}

Status Experiments::Cancel(const std::string& id, const std::string& why) {
  int64_t job = 0;
  {
    std::lock_guard lock(mu_);
    auto it = active_.find(id);
    if (it == active_.end() || IsTerminal(it->second->record.state)) {
      auto e = store_.GetExperiment(id);
      if (!e.ok()) return e.status();
      return FailedPrecondition("experiment '" + id + "' has already ended (" +
                                ExperimentStateName(e->state) + "); nothing to cancel");
    }
    Active& a = *it->second;
    a.user_cancelled = true;
    store::Changes c;
    a.run->Decide({Outcome::kFailed, "cancelled"});
    SetState(c, a, ExperimentState::kCancelled, why);
    if (a.attempt.end_reason.empty()) {
      a.attempt.end_reason = EndReasonName(EndReason::kCancelled);
      a.attempt.reason = why;
      c.attempts.push_back(a.attempt);
    }
    Commit(c);
    job = a.attempt.slurm_job_id;
    a.job_cancel_sent = true;
    a.cancel_sent_at_ms = clock_.NowMs();
  }
  // If this fails, Tick tries again while the job runs: the experiment is
  // cancelled either way.
  if (job > 0) slurm_.CancelJob(job, SIGKILL);
  return Status::Ok();
}

StatusOr<AttemptRecord> Experiments::Resume(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = active_.find(id);
  if (it != active_.end()) {
    const Active& a = *it->second;
    if (!IsTerminal(a.record.state))
      return FailedPrecondition(
          "experiment '" + id + "' is " + ExperimentStateName(a.record.state) +
          "; cancel it first (DELETE /experiments/" + id + ") or wait for it to end");
    return Status(StatusCode::kUnavailable, "experiment '" + id + "' has ended but its Slurm job " +
                                                std::to_string(a.attempt.slurm_job_id) +
                                                " is still finishing; retry in a few seconds");
  }
  auto record = store_.GetExperiment(id);
  if (!record.ok()) return record.status();
  auto loaded = Load(*record);
  if (!loaded.ok()) return loaded.status();
  std::unique_ptr<Active> a = std::move(loaded).value();
  a->record.restarts = 0;
  a->record.next_attempt_at = 0;
  a->user_cancelled = false;
  auto checkpoint = ReadCheckpointState(a->record.model_dir);
  // Nothing is stored before the intent: a failure to prepare the attempt
  // answers the error and leaves the experiment as it was.
  auto prepared = PrepareAttempt(*a, a->attempt.number + 1);
  if (!prepared.ok()) return prepared.status();
  auto attempt = SubmitAttempt(
      *a, std::move(prepared).value(), /*create=*/false,
      "resumed by the user" +
          (checkpoint ? " from checkpoint step " + std::to_string(checkpoint->step)
                      : std::string(" (no checkpoint in ") + a->record.model_dir + ")"));
  if (!attempt.ok()) return attempt.status();
  active_[id] = std::move(a);
  return attempt;
}

StatusOr<Experiments::Active*> Experiments::FindTask(const TaskRef& ref) {
  auto it = active_.find(ref.experiment_id);
  if (it == active_.end()) {
    auto e = store_.GetExperiment(ref.experiment_id);
    if (!e.ok()) return NotFound("no experiment '" + ref.experiment_id + "'");
    // Stored but not yet in memory: its submission is still being recorded.
    if (!IsTerminal(e->state))
      return Unavailable("experiment '" + ref.experiment_id + "' is still being set up; retry");
    return FailedPrecondition("experiment '" + ref.experiment_id + "' has ended (" +
                              ExperimentStateName(e->state) + ")");
  }
  Active& a = *it->second;
  if (ref.attempt != a.attempt.number)
    return FailedPrecondition(
        "attempt " + std::to_string(ref.attempt) + " of '" + ref.experiment_id +
        "' is not current (current: " + std::to_string(a.attempt.number) + ")");
  if (Sha256Hex(ref.secret) != a.attempt.secret_sha256)
    return Status(StatusCode::kUnauthenticated, "wrong attempt secret for '" + ref.experiment_id +
                                                    "' attempt " + std::to_string(ref.attempt));
  if (ref.proc_id < 0 || ref.proc_id >= a.run->size())
    return InvalidArgument("task " + std::to_string(ref.proc_id) +
                           " is out of range: the attempt has " + std::to_string(a.run->size()) +
                           " tasks");
  return &a;
}

void Experiments::OnRegister(const TaskRef& ref, const RegisterInfo& info,
                             std::shared_ptr<TaskChannel> channel) {
  std::lock_guard lock(mu_);
  auto found = FindTask(ref);
  if (!found.ok()) {
    channel->Send(RefusalFor(found.status()));
    return;
  }
  Active& a = **found;
  const int proc = ref.proc_id;
  int64_t now = clock_.NowMs();
  store::Changes c;
  TaskSlot& slot = a.run->mutable_task(proc);
  std::string address = info.address + ":" + std::to_string(info.port);
  if (a.run->outcome().kind != Outcome::kUndecided && !slot.registered) {
    channel->Send(RefusedMsg{"attempt " + std::to_string(a.attempt.number) +
                                 " has already ended: " + a.run->outcome().reason,
                             true});
    return;
  }
  bool was_registered = slot.registered;
  bool barrier_complete = a.run->Register(proc, info.node_name, address, info.local_id);
  a.channels[proc] = channel;
  TaskRecord& t = a.tasks[proc];
  t.node = info.node_name;
  t.address = address;
  if (!t.registered_at) t.registered_at = now;
  t.last_heartbeat = now;
  t.state = slot.state;
  if (a.run->assignments_sent()) {
    c.tasks.push_back(t);
  } else if (!barrier_complete) {
    // Before the barrier, registrations are written in batches by the next
    // Tick (as heartbeats are), or with the assignments, which write every
    // task: a transaction per registration, under mu_, is what a storm of
    // thousands of agents would queue behind. An agent whose registration
    // is lost in a crash registers again when it reconnects.
    a.heartbeat_dirty.insert(proc);
  }
  if (a.attempt.state == "pending") {
    // An agent registering proves the job runs, before the next poll says so.
    a.attempt.state = "running";
    a.attempt.slurm_state = "RUNNING";
    a.attempt.started_at = now;
    a.job_started_ms = now;
    c.attempts.push_back(a.attempt);
  }
  if (a.record.state == ExperimentState::kQueued)
    SetState(c, a, ExperimentState::kStarting, "tasks registering");
  if (was_registered)
    Event(c, a, "reconnected", TaskName(slot, proc) + " reconnected from " + address);

  if (barrier_complete) {
    SendAssignments(a, c);
  } else if (a.run->assignments_sent()) {
    // A reconnecting agent already holds its assignment; one that never got
    // it (its stream broke first, or the service restarted) needs it now.
    if (!info.reconnect) SendAssignments(a, c, proc);
    if (slot.shutdown_sent && !slot.exited)
      channel->Send(ShutdownMsg{a.run->outcome().reason, config_.shutdown_grace_ms});
  }
  Commit(c);
}

void Experiments::SendAssignments(Active& a, store::Changes& c, int only_proc) {
  bool first = !a.run->assignments_sent();
  a.run->MarkAssigned();
  int checkpointing = a.run->CheckpointingTask();
  auto cluster = std::make_shared<SharedCluster>();
  cluster->json = a.run->ClusterSpec();
  cluster->zlib = wire::CompressCluster(cluster->json);
  for (int i = 0; i < a.run->size(); ++i) {
    if (only_proc >= 0 && i != only_proc) continue;
    auto ch = a.channels.find(i);
    if (ch == a.channels.end() || !ch->second) continue;
    const TaskSlot& slot = a.run->task(i);
    AssignmentMsg m;
    m.role = slot.role.role;
    m.index = slot.role.index;
    m.cluster = cluster;
    m.command = a.spec.command;
    m.workdir = a.spec.workdir.empty() ? a.record.model_dir : a.spec.workdir;
    for (auto& [k, v] : a.run->TaskEnv(i, a.record.model_dir)) m.env[k] = v;
    m.model_dir = a.record.model_dir;
    m.heartbeat_interval_ms = config_.heartbeat_interval_ms;
    m.shutdown_grace_ms = config_.shutdown_grace_ms;
    m.report_checkpoints = i == checkpointing;
    if (first || a.tasks[i].state == "registered") {
      a.tasks[i].state = slot.state;
      c.tasks.push_back(a.tasks[i]);
    }
    ch->second->Send(m);
  }
  if (first) {
    Event(c, a, "assigned",
          "all " + std::to_string(a.run->size()) + " tasks registered; roles and TF_CONFIG sent");
    SetState(c, a, ExperimentState::kRunning, "training");
  }
}

Status Experiments::OnHeartbeat(const TaskRef& ref) {
  std::lock_guard lock(mu_);
  auto found = FindTask(ref);
  if (!found.ok()) return found.status();
  Active& a = **found;
  a.tasks[ref.proc_id].last_heartbeat = clock_.NowMs();
  a.heartbeat_dirty.insert(ref.proc_id);
  if (a.tasks[ref.proc_id].state == "lost") {
    const TaskSlot& slot = a.run->task(ref.proc_id);
    store::Changes c;
    a.tasks[ref.proc_id].state = slot.state;
    c.tasks.push_back(a.tasks[ref.proc_id]);
    Event(c, a, "heartbeat", TaskName(slot, ref.proc_id) + " is back");
    Commit(c);
  }
  return Status::Ok();
}

Status Experiments::OnProgress(const TaskRef& ref, int64_t step, const std::string& path) {
  std::lock_guard lock(mu_);
  auto found = FindTask(ref);
  if (!found.ok()) return found.status();
  Active& a = **found;
  if (a.record.checkpoint_step && *a.record.checkpoint_step == step) return Status::Ok();
  store::Changes c;
  a.record.checkpoint_step = step;
  a.record.checkpoint_path = path;
  a.record.updated_at = clock_.NowMs();
  c.experiment = a.record;
  Event(c, a, "checkpoint", "step " + std::to_string(step) + " (" + path + ")");
  Commit(c);
  return Status::Ok();
}

Status Experiments::OnExited(const TaskRef& ref, std::optional<int> exit_code,
                             std::optional<int> signal, bool reaped) {
  std::lock_guard lock(mu_);
  auto found = FindTask(ref);
  if (!found.ok()) return found.status();
  Active& a = **found;
  const int proc = ref.proc_id;
  if (a.run->task(proc).exited) return Status::Ok();  // a re-sent report
  bool decided_before = a.run->outcome().kind != Outcome::kUndecided;
  // A task that ends after the user cancelled, or after it was told to shut
  // down, was ended by us: reaped, not failed, whatever its exit code.
  reaped = reaped || a.user_cancelled || a.run->task(proc).shutdown_sent;
  a.run->OnExit(proc, exit_code, signal, reaped);
  const TaskSlot& slot = a.run->task(proc);
  store::Changes c;
  TaskRecord& t = a.tasks[proc];
  t.state = slot.state;
  t.exit_code = exit_code;
  t.signal = signal;
  t.ended_at = clock_.NowMs();
  c.tasks.push_back(t);
  std::string how = signal.value_or(0)
                        ? "was killed by signal " + std::to_string(*signal)
                        : "exited with code " + std::to_string(exit_code.value_or(-1));
  Event(c, a, reaped ? "reaped" : "exited", TaskName(slot, proc) + " " + how);
  if (!decided_before && a.run->outcome().kind != Outcome::kUndecided) OnOutcome(a, c);
  Commit(c);
  return Status::Ok();
}

void Experiments::OnDisconnect(const TaskRef& ref, const TaskChannel* channel) {
  std::lock_guard lock(mu_);
  auto it = active_.find(ref.experiment_id);
  if (it == active_.end() || it->second->attempt.number != ref.attempt) return;
  Active& a = *it->second;
  auto ch = a.channels.find(ref.proc_id);
  // A newer stream may already have replaced this one.
  if (ch == a.channels.end() || ch->second.get() != channel) return;
  a.channels.erase(ch);
  const TaskSlot& slot = a.run->task(ref.proc_id);
  if (slot.registered && !slot.exited) a.run->SetVanished(ref.proc_id, true);
}

void Experiments::OnOutcome(Active& a, store::Changes& c) {
  const Outcome& o = a.run->outcome();
  if (o.kind == Outcome::kSucceeded) {
    a.attempt.end_reason = EndReasonName(EndReason::kSucceeded);
    a.attempt.reason = o.reason;
    c.attempts.push_back(a.attempt);
    SetState(c, a, ExperimentState::kSucceeded, o.reason);
    ReapRemaining(a, c, "training succeeded: " + o.reason);
  } else if (o.kind == Outcome::kFailed) {
    // What the failure means for a restart is decided when the job has
    // ended: a task killed by SIGTERM may be the symptom of a preemption or
    // the time limit, which Slurm's final state tells apart.
    ReapRemaining(a, c, "attempt failed: " + o.reason);
    a.record.reason = "attempt " + std::to_string(a.attempt.number) + " failed: " + o.reason +
                      "; ending its Slurm job";
    a.record.updated_at = clock_.NowMs();
    c.experiment = a.record;
  }
}

void Experiments::ReapRemaining(Active& a, store::Changes& c, const std::string& reason) {
  std::vector<int> to_reap = a.run->TasksToReap();
  if (to_reap.empty()) return;
  std::string names;
  for (int proc : to_reap) {
    a.run->MarkShutdownSent(proc);
    auto ch = a.channels.find(proc);
    if (ch != a.channels.end()) ch->second->Send(ShutdownMsg{reason, config_.shutdown_grace_ms});
    names += (names.empty() ? "" : ", ") + TaskName(a.run->task(proc), proc);
  }
  a.reap_deadline_ms = clock_.NowMs() + config_.shutdown_grace_ms + config_.reap_timeout_margin_ms;
  Event(c, a, "reaping", "Shutdown sent to " + names);
}

// Ends the current attempt for the restart policy's purposes (the Slurm job
// may still be finishing) and decides what the experiment does next.
void Experiments::FinishAttempt(Active& a, EndReason reason, const std::string& why,
                                store::Changes& c) {
  // Decided already (success by the agents, or a cancel): the job's end
  // only confirms it.
  if (!a.attempt.end_reason.empty()) return;
  a.attempt.end_reason = EndReasonName(reason);
  a.attempt.reason = why;
  c.attempts.push_back(a.attempt);
  if (a.user_cancelled) return;  // already cancelled
  if (reason == EndReason::kSucceeded) {
    SetState(c, a, ExperimentState::kSucceeded, why);
    return;
  }
  const RestartPolicy& p = a.spec.restart;
  std::string attempt_n = "attempt " + std::to_string(a.attempt.number);
  // An unknown end may have been any of them (a success too): restarting
  // costs one attempt, which resumes from the last checkpoint and ends at
  // once if training had finished; not restarting may drop a training that
  // was preempted or hit its time limit. So it is restarted whenever the
  // policy restarts anything.
  const bool unknown = reason == EndReason::kUnknown;
  if (unknown ? p.on.empty() : !p.on.count(reason)) {
    SetState(c, a, ExperimentState::kFailed,
             attempt_n + " " + EndReasonName(reason) + ": " + why + " (not restarted: " +
                 (unknown ? std::string("restart.on is empty")
                          : std::string(EndReasonName(reason)) + " is not in restart.on") +
                 ")");
    return;
  }
  if (a.record.restarts >= p.max_restarts) {
    SetState(c, a, ExperimentState::kFailed,
             attempt_n + " " + EndReasonName(reason) + ": " + why + " (max_restarts " +
                 std::to_string(p.max_restarts) + " reached)");
    return;
  }
  // Backoff doubles per restart: a crash loop must not hammer the cluster.
  int64_t delay_ms = int64_t{p.backoff_s} * 1000 << std::min(a.record.restarts, 6);
  delay_ms = std::min<int64_t>(delay_ms, 10 * 60 * 1000);
  a.record.restarts++;
  a.record.next_attempt_at = clock_.NowMs() + delay_ms;
  SetState(c, a, ExperimentState::kRestarting,
           attempt_n + " " + EndReasonName(reason) + ": " + why + "; restart " +
               std::to_string(a.record.restarts) + " of " + std::to_string(p.max_restarts) +
               " in " + Seconds(delay_ms) +
               (unknown ? " (an unknown end is restarted when restart.on allows any restart: the "
                          "next attempt resumes from the last checkpoint)"
                        : ""));
}

void Experiments::OnJobUpdate(Active& a, const slurm::JobInfo* job, int64_t poll_seq,
                              store::Changes& c) {
  if (a.attempt.state == "ended" || a.attempt.state == "submitting") return;
  int64_t now = clock_.NowMs();
  // Submitted while this poll's snapshot was being taken: absent from it,
  // not gone.
  if (!job && a.job_known_seq > poll_seq) return;
  if (!job) {
    a.attempt.state = "ended";
    a.attempt.ended_at = now;
    a.attempt.slurm_state = "UNKNOWN";
    c.attempts.push_back(a.attempt);
    const std::string job_n = "job " + std::to_string(a.attempt.slurm_job_id);
    const Outcome& o = a.run->outcome();
    std::string event = "Slurm no longer knows " + job_n;
    EndReason reason;
    std::string why = o.reason;
    // What the tasks reported before the job left decides, as it would have
    // with the job's final state.
    if (o.kind == Outcome::kSucceeded) {
      reason = EndReason::kSucceeded;
    } else if (a.decided_reason) {
      reason = *a.decided_reason;
    } else if (o.kind == Outcome::kFailed) {
      reason = o.retryable ? EndReason::kRetryableExit : EndReason::kPermanentExit;
    } else if (!a.job_seen) {
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
    Event(c, a, "job", event);
    return FinishAttempt(a, reason, why, c);
  }
  a.job_seen = true;
  std::string state = slurm::JobStateName(job->state);
  bool changed = state != a.attempt.slurm_state || job->nodes != a.attempt.nodes;
  a.attempt.slurm_state = state;
  a.attempt.nodes = job->nodes;
  if (job->state == slurm::JobState::kRunning && !a.start_seen_in_slurm) {
    a.start_seen_in_slurm = true;
    if (!a.job_started_ms) a.job_started_ms = now;
    a.attempt.state = "running";
    if (!a.attempt.started_at) a.attempt.started_at = now;
    changed = true;
    for (int i = 0; i < a.run->size(); ++i) {
      int node = i / a.spec.resources.tasks_per_node;
      if (node < static_cast<int>(job->node_names.size()) && a.tasks[i].node.empty())
        a.run->mutable_task(i).node = job->node_names[node];
    }
    Event(c, a, "job", "Slurm job " + std::to_string(job->job_id) + " started on " + job->nodes);
    if (a.record.state == ExperimentState::kQueued)
      SetState(c, a, ExperimentState::kStarting,
               "job running on " + job->nodes + "; tasks registering");
  }
  if (!slurm::IsFinished(job->state) || job->completing) {
    if (changed) c.attempts.push_back(a.attempt);
    return;
  }

  a.attempt.state = "ended";
  a.attempt.ended_at = now;
  a.attempt.exit_code = job->exit_signal ? 128 + job->exit_signal : job->exit_code;
  c.attempts.push_back(a.attempt);
  Event(c, a, "job",
        "Slurm job " + std::to_string(job->job_id) + " ended " + state +
            (job->reason.empty() || job->reason == "None" ? "" : " (" + job->reason + ")"));
  for (int i = 0; i < a.run->size(); ++i) {
    TaskSlot& slot = a.run->mutable_task(i);
    if (!slot.exited && a.tasks[i].state != "pending") {
      // A task the service was reaping ended with the job: reaped, by Slurm
      // if its agent's report never came (the agent was killed with the
      // step, or reconnected too late after a service restart). Any other
      // task's end is unknown.
      const char* end = slot.shutdown_sent ? "reaped" : "lost";
      slot.state = end;
      a.tasks[i].state = end;
      c.tasks.push_back(a.tasks[i]);
    }
  }
  if (a.user_cancelled) return;  // the experiment is cancelled already
  const Outcome& o = a.run->outcome();
  std::string why = "Slurm job " + std::to_string(job->job_id) + " " + state;
  // Success decided by the tasks stands, whatever the reaping did to the job.
  if (o.kind == Outcome::kSucceeded) return FinishAttempt(a, EndReason::kSucceeded, o.reason, c);
  switch (job->state) {
    case slurm::JobState::kTimeout:
    case slurm::JobState::kDeadline:
      return FinishAttempt(a, EndReason::kTimeout, why + " at its time limit", c);
    case slurm::JobState::kNodeFail:
    case slurm::JobState::kBootFail:
      return FinishAttempt(a, EndReason::kNodeFail, why + " (" + job->reason + ")", c);
    case slurm::JobState::kPreempted:
      return FinishAttempt(a, EndReason::kPreempted, why + ": preempted by a higher-priority job",
                           c);
    default:
      break;
  }
  if (a.decided_reason) return FinishAttempt(a, *a.decided_reason, o.reason, c);
  if (o.kind == Outcome::kFailed)
    return FinishAttempt(a, o.retryable ? EndReason::kRetryableExit : EndReason::kPermanentExit,
                         o.reason, c);
  switch (job->state) {
    case slurm::JobState::kCompleted:
      return FinishAttempt(a, EndReason::kSucceeded, why, c);
    case slurm::JobState::kCancelled:
      a.user_cancelled = true;
      a.attempt.end_reason = EndReasonName(EndReason::kCancelled);
      a.attempt.reason = why + " outside tfslurm (scancel or an admin)";
      c.attempts.push_back(a.attempt);
      SetState(c, a, ExperimentState::kCancelled, a.attempt.reason);
      return;
    case slurm::JobState::kOutOfMemory:
      return FinishAttempt(a, EndReason::kPermanentExit, why + ": out of memory", c);
    default: {
      std::optional<int> code = job->exit_code, sig;
      if (job->exit_signal) sig = job->exit_signal;
      return FinishAttempt(
          a, IsRetryableExit(code, sig) ? EndReason::kRetryableExit : EndReason::kPermanentExit,
          why + " with exit code " + std::to_string(a.attempt.exit_code), c);
    }
  }
}

void Experiments::CheckTimers(Active& a, store::Changes& c, Actions& actions) {
  int64_t now = clock_.NowMs();
  AttemptRun& run = *a.run;

  // The barrier: every task must register within the timeout of the job's start.
  if (a.job_started_ms && !run.assignments_sent() && run.outcome().kind == Outcome::kUndecided &&
      a.attempt.state == "running" && now - a.job_started_ms > config_.barrier_timeout_ms) {
    std::vector<int> missing = run.MissingRegistrations();
    std::string names;
    for (size_t i = 0; i < missing.size() && i < 20; ++i)
      names += (i ? ", " : "") + TaskName(run.task(missing[i]), missing[i]);
    if (missing.size() > 20) names += ", ...";
    std::string why = "barrier timeout after " + Seconds(config_.barrier_timeout_ms) + ": " +
                      std::to_string(missing.size()) + " of " + std::to_string(run.size()) +
                      " tasks never registered: " + names;
    run.Decide({Outcome::kFailed, why});
    a.decided_reason = EndReason::kStartFailed;
    ReapRemaining(a, c, why);
    a.record.reason = why + "; cancelling the job";
    c.experiment = a.record;
    if (!a.job_cancel_sent && a.attempt.slurm_job_id) {
      actions.cancel_jobs.push_back(a.attempt.slurm_job_id);
      a.job_cancel_sent = true;
    }
  }

  // Reaping: tasks that did not confirm within the grace are ended by Slurm.
  if (a.reap_deadline_ms && now >= a.reap_deadline_ms && !a.step_killed &&
      a.attempt.state != "ended") {
    std::vector<int> unconfirmed = run.UnconfirmedShutdowns();
    if (!unconfirmed.empty()) {
      std::string names;
      for (int proc : unconfirmed)
        names += (names.empty() ? "" : ", ") + TaskName(run.task(proc), proc);
      Event(c, a, "reaping",
            names + " did not confirm the Shutdown; ending step " +
                std::to_string(a.attempt.slurm_job_id) + ".0 through Slurm");
      actions.kill_steps.push_back(a.attempt.slurm_job_id);
    }
    a.step_killed = true;
    // A failed attempt's job has nothing left to do.
    if (run.outcome().kind == Outcome::kFailed && !a.job_cancel_sent) {
      actions.cancel_jobs.push_back(a.attempt.slurm_job_id);
      a.job_cancel_sent = true;
    }
  }

  // A cancel Slurm did not act on (slurmctld down, a lost RPC) is repeated
  // while the job is still there.
  if (a.user_cancelled && a.attempt.slurm_job_id && a.attempt.state != "ended" &&
      now - a.cancel_sent_at_ms > 10 * config_.poll_interval_ms) {
    actions.cancel_jobs.push_back(a.attempt.slurm_job_id);
    a.cancel_sent_at_ms = now;
  }

  // Heartbeats: a task silent for several intervals is lost (it may come back).
  int64_t lost_after =
      int64_t{config_.heartbeat_interval_ms} * config_.lost_after_missed_heartbeats;
  for (int i = 0; i < run.size(); ++i) {
    TaskRecord& t = a.tasks[i];
    // Agents heartbeat once they run their program; at the barrier the
    // barrier timeout watches them instead.
    if (t.state != "running") continue;
    if (now - t.last_heartbeat > lost_after) {
      t.state = "lost";
      a.heartbeat_dirty.erase(i);
      c.tasks.push_back(t);
      Event(c, a, "lost",
            TaskName(run.task(i), i) + " sent no heartbeat for " + Seconds(now - t.last_heartbeat));
    }
  }
  for (int i : a.heartbeat_dirty) c.tasks.push_back(a.tasks[i]);
  a.heartbeat_dirty.clear();

  if (a.record.state == ExperimentState::kRestarting && a.attempt.state == "ended" &&
      now >= a.record.next_attempt_at)
    actions.restarts.push_back(a.record.id);
}

void Experiments::Tick() {
  int64_t now = clock_.NowMs();
  std::optional<std::unordered_map<int64_t, const slurm::JobInfo*>> by_id;
  StatusOr<std::vector<slurm::JobInfo>> jobs = std::vector<slurm::JobInfo>{};
  int64_t last_poll = last_poll_ms_.load();
  // Of concurrent Ticks, only the one that moves last_poll_ms_ polls.
  bool poll = now - last_poll >= config_.poll_interval_ms &&
              last_poll_ms_.compare_exchange_strong(last_poll, now);
  const int64_t poll_seq = job_seq_.load();
  if (poll) {
    bool any_open = false;
    {
      std::lock_guard lock(mu_);
      any_open = !active_.empty();
    }
    if (any_open) {
      jobs = slurm_.LoadJobs();
      if (jobs.ok()) {
        by_id.emplace();
        for (const auto& j : *jobs) (*by_id)[j.job_id] = &j;
      } else {
        fprintf(stderr, "tfslurmd: poll failed: %s\n", jobs.status().message().c_str());
      }
    }
  }

  Actions actions;
  {
    std::lock_guard lock(mu_);
    // Every experiment's changes in one transaction: a poll that finds a
    // hundred jobs ended (a user cancelling a sweep) holds mu_ and the
    // store for one commit, not a hundred.
    std::vector<store::Changes> batch;
    for (auto it = active_.begin(); it != active_.end();) {
      Active& a = *it->second;
      store::Changes c;
      if (a.attempt.state == "submitting") {
        // The poll began at `now`, after the failure that set reconcile_at_ms.
        if (by_id && now >= a.reconcile_at_ms) ReconcileSubmission(a, *jobs, c, actions);
      } else if (by_id && a.attempt.slurm_job_id) {
        auto j = by_id->find(a.attempt.slurm_job_id);
        OnJobUpdate(a, j == by_id->end() ? nullptr : j->second, poll_seq, c);
      }
      CheckTimers(a, c, actions);
      if (!c.empty()) batch.push_back(std::move(c));
      // Done when the experiment is final and its last job has left Slurm.
      if (IsTerminal(a.record.state) && a.attempt.state == "ended")
        it = active_.erase(it);
      else
        ++it;
    }
    CommitAll(batch);
  }
  RunActions(actions);
}

void Experiments::RunActions(Actions& actions) {
  for (int64_t job : actions.kill_steps) slurm_.SignalStep(job, 0, SIGKILL);
  for (int64_t job : actions.cancel_jobs) slurm_.CancelJob(job, SIGKILL);
  for (const std::string& id : actions.restarts) {
    std::lock_guard lock(mu_);
    auto it = active_.find(id);
    if (it == active_.end() || it->second->record.state != ExperimentState::kRestarting) continue;
    Active& a = *it->second;
    const int number = a.attempt.number + 1;
    SubmitAutomatically(a, number, "attempt " + std::to_string(number) + " submitted");
  }
  for (const std::string& id : actions.resubmits) {
    std::lock_guard lock(mu_);
    auto it = active_.find(id);
    if (it == active_.end() || it->second->attempt.state != "submitting" ||
        it->second->user_cancelled)
      continue;
    SubmitAutomatically(*it->second, it->second->attempt.number);
  }
}

void Experiments::SubmitAutomatically(Active& a, int number, const std::string& queued_why) {
  auto prepared = PrepareAttempt(a, number);
  if (!prepared.ok()) {
    store::Changes c;
    OnSubmissionNotPrepared(a, number, prepared.status(), c);
    Commit(c);
    return;
  }
  // Slurm's answer is handled inside, the intent being recorded.
  SubmitAttempt(a, std::move(prepared).value(), /*create=*/false, queued_why);
}

// Slurm may or may not have the job of an attempt still `submitting`: the
// newest job with its name is adopted; without one, the attempt is submitted
// (again). The job name is unique per experiment and attempt.
void Experiments::ReconcileSubmission(Active& a, const std::vector<slurm::JobInfo>& jobs,
                                      store::Changes& c, Actions& actions) {
  const slurm::JobInfo* match = nullptr;
  for (const auto& j : jobs)
    if (j.name == a.attempt.job_name && (!match || j.job_id > match->job_id)) match = &j;
  if (match) {
    a.attempt.slurm_job_id = match->job_id;
    a.attempt.state = "pending";
    a.job_known_seq = ++job_seq_;
    a.submit_failures = 0;
    a.job_seen = true;
    c.attempts.push_back(a.attempt);
    Event(c, a, "recovered",
          "found Slurm job " + std::to_string(match->job_id) + " (" + a.attempt.job_name +
              "), whose submission was not confirmed; adopting it");
    if (a.user_cancelled) {
      // Cancelled while its submission was in doubt.
      actions.cancel_jobs.push_back(match->job_id);
      a.job_cancel_sent = true;
      a.cancel_sent_at_ms = clock_.NowMs();
    }
    return;
  }
  if (a.user_cancelled) {
    a.attempt.state = "ended";
    a.attempt.ended_at = clock_.NowMs();
    c.attempts.push_back(a.attempt);
    Event(
        c, a, "recovered",
        "Slurm has no job " + a.attempt.job_name + "; the experiment is cancelled: not submitted");
    return;
  }
  Event(c, a, "recovered",
        "Slurm has no job " + a.attempt.job_name +
            " (its submission was interrupted or refused); submitting it now");
  actions.resubmits.push_back(a.record.id);
}

StatusOr<std::unique_ptr<Experiments::Active>> Experiments::Load(const ExperimentRecord& record) {
  auto spec_json = nlohmann::json::parse(record.spec_json, nullptr, false);
  auto spec = ParseSpec(spec_json, SpecLimits{1 << 20, 1 << 20, 1 << 30, 1 << 20, 1 << 30});
  if (!spec.ok())
    return Internal("stored spec of '" + record.id +
                    "' no longer parses: " + spec.status().message());
  auto a = std::make_unique<Active>();
  a->record = record;
  a->spec = std::move(spec).value();
  auto attempts = store_.ListAttempts(record.id);
  if (!attempts.ok()) return attempts.status();
  if (attempts->empty()) return Internal("experiment '" + record.id + "' has no attempt");
  a->attempt = attempts->back();
  a->run = std::make_unique<AttemptRun>(a->spec, a->attempt.number);
  auto tasks = store_.ListTasks(record.id, a->attempt.number);
  if (!tasks.ok()) return tasks.status();
  a->tasks = std::move(tasks).value();
  a->tasks.resize(a->run->size());
  bool assigned = false;
  for (int i = 0; i < a->run->size(); ++i) {
    TaskRecord& t = a->tasks[i];
    TaskSlot& slot = a->run->mutable_task(i);
    t.experiment_id = record.id;
    t.attempt = a->attempt.number;
    t.proc_id = i;
    t.role = slot.role.role;
    t.index = slot.role.index;
    if (t.state == "pending") continue;
    slot.registered = true;
    slot.node = t.node;
    slot.address = t.address;
    slot.state = t.state;
    if (t.state == "running" || t.state == "succeeded" || t.state == "failed" ||
        t.state == "reaped")
      assigned = true;
    if (t.state == "succeeded" || t.state == "failed" || t.state == "reaped") {
      slot.exited = true;
      slot.exit_code = t.exit_code;
      slot.signal = t.signal;
      slot.reaped = t.state == "reaped";
    }
    // Agents get a fresh window to reconnect after a service restart.
    t.last_heartbeat = clock_.NowMs();
    // Until its agent registers again nothing says it is still there: an
    // agent killed while the service was down is indistinguishable from one
    // not reconnected yet (AttemptRun::OnExit; found by bench/soak.py).
    if (!slot.exited) slot.vanished = true;
  }
  if (assigned) a->run->MarkAssigned();
  if (a->attempt.state == "running") a->job_started_ms = clock_.NowMs();
  if (record.state == ExperimentState::kCancelled) a->user_cancelled = true;
  return a;
}

Status Experiments::Recover() {
  auto open = store_.ListOpenExperiments();
  if (!open.ok()) return open.status();
  std::vector<Active*> submitting;
  {
    std::lock_guard lock(mu_);
    for (const ExperimentRecord& r : *open) {
      auto a = Load(r);
      if (!a.ok()) {
        fprintf(stderr, "tfslurmd: %s\n", a.status().message().c_str());
        continue;
      }
      Active& loaded = **a;
      if (loaded.attempt.state == "submitting") submitting.push_back(&loaded);
      if (!IsTerminal(loaded.record.state) && loaded.record.state != ExperimentState::kRestarting &&
          loaded.attempt.state == "ended") {
        // An open experiment whose last attempt has ended, with no newer
        // one: tfslurmd before this version recorded `queued` for a restart
        // or a resume ahead of the next attempt's intent, and stopped or
        // failed in between. Nothing else moves it: restart it now.
        store::Changes c;
        loaded.record.next_attempt_at = clock_.NowMs();
        SetState(c, loaded, ExperimentState::kRestarting,
                 "attempt " + std::to_string(loaded.attempt.number) + " has ended and attempt " +
                     std::to_string(loaded.attempt.number + 1) +
                     " was never recorded (tfslurmd stopped or failed in between); submitting "
                     "it now");
        Commit(c);
      }
      active_[r.id] = std::move(a).value();
    }
  }
  if (submitting.empty()) return Status::Ok();
  // Submissions interrupted by a crash: Slurm may or may not have the job.
  // One query finds them by name, so none is submitted twice. If slurmctld
  // does not answer now, Tick tries again at every poll.
  auto jobs = slurm_.LoadJobs();
  if (!jobs.ok()) return jobs.status();
  Actions actions;
  {
    std::lock_guard lock(mu_);
    for (Active* a : submitting) {
      store::Changes c;
      ReconcileSubmission(*a, *jobs, c, actions);
      Commit(c);
    }
  }
  RunActions(actions);
  return Status::Ok();
}

}  // namespace tfslurm
