#include "service/core/core_state.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "service/core/wording.h"

namespace tfslurm {
namespace {

bool Nothing(std::span<const Changes> batch) {
  return std::all_of(batch.begin(), batch.end(), [](const Changes& c) { return c.empty(); });
}

}  // namespace

Status CoreState::Write(std::span<const Changes> batch) {
  // Most calls carry nothing (a registration before the barrier is written
  // by the next Tick): neither the store nor the observers need them.
  if (Nothing(batch)) return Status::Ok();
  Status s = ports_.store.ApplyAll(batch);
  // A refusal before the transaction (a taken id) changed nothing; any
  // other failure may have been a COMMIT that did or did not happen.
  if (s.code() != StatusCode::kAlreadyExists)
    for (const auto& o : observers_) o->Committed(batch, s.ok());
  return s;
}

void CoreState::WriteQueuedLocked() {
  std::vector<Changes> queued;
  {
    MutexLock lock(queue_mu_);
    queued.swap(queued_);
  }
  // What several callers queued goes in one transaction, as a Tick's batch
  // does; a failure is logged, as Commit's are.
  if (Status s = Write(queued); !s.ok())
    spdlog::error("could not persist changes: {}", s.message());
}

Status CoreState::Apply(std::span<const Changes> batch) {
  // Nothing to write, nothing to order: a caller under core's lock (an
  // agent back in standby, a Tick that changed nothing) does not wait for
  // a transaction in progress.
  if (Nothing(batch)) return Status::Ok();
  MutexLock lock(write_mu_);
  WriteQueuedLocked();
  return Write(batch);
}

void CoreState::Commit(Changes& c) {
  if (Status s = Apply({&c, 1}); !s.ok())
    spdlog::error("could not persist changes: {}", s.message());
  c = Changes{};
}

bool CoreState::CommitAfterUnlock(Changes& c) {
  if (c.empty()) return false;
  MutexLock lock(queue_mu_);
  queued_.push_back(std::move(c));
  c = Changes{};
  return true;
}

void CoreState::WriteQueued() {
  MutexLock lock(write_mu_);
  WriteQueuedLocked();
}

void CoreState::Event(Changes& c, const OpenExperiment& a, EventCode what, const std::string& why) {
  c.events.push_back({0, a.record.id, a.attempt.number(), ports_.clock.NowMs(), what, why});
}

void CoreState::EndAttempt(OpenExperiment& a, EndReason reason, const std::string& why, Changes& c,
                           std::optional<int64_t> ended_at) {
  a.attempt.End(reason, why, ended_at, c);
  metrics_.AttemptEnded(reason);
}

void CoreState::SetState(Changes& c, OpenExperiment& a, ExperimentState state,
                         const std::string& why) {
  if (a.record.state == state && a.record.reason == why) return;
  std::string from = ExperimentStateName(a.record.state);
  a.record.state = state;
  a.record.reason = why;
  a.record.updated_at = ports_.clock.NowMs();
  c.experiment = a.record;
  Event(c, a, EventCode::kState,
        from + " -> " + ExperimentStateName(state) + (why.empty() ? "" : ": " + why));
}

void CoreState::FreshWindow(int64_t now) {
  // The silence was the service's: the agents, whose streams come back one
  // by one, get a window to be heard (kQuietAfterCutOffMs says how long).
  const int64_t window = std::max(kQuietAfterCutOffMs, GoneAfterMs());
  spdlog::info("the service hears from the cluster again: every running task has {} to be heard",
               Seconds(window));
  quiet_until_ms_ = now + window;
  for (auto& [id, e] : open_)
    for (TaskRecord& t : e->attempt.tasks)
      if (t.state == TaskState::kRunning || t.state == TaskState::kLost) t.last_heartbeat = now;
}

OpenExperiment* CoreState::Find(const std::string& id) {
  auto it = open_.find(id);
  return it == open_.end() ? nullptr : it->second.get();
}

void CoreState::Add(std::unique_ptr<OpenExperiment> e) {
  const std::string id = e->record.id;
  open_[id] = std::move(e);
}

std::vector<OpenExperiment*> CoreState::All() {
  std::vector<OpenExperiment*> all;
  all.reserve(open_.size());
  for (auto& [id, e] : open_) all.push_back(e.get());
  return all;
}

void CoreState::CloseEnded() {
  std::erase_if(open_, [](const auto& entry) { return entry.second->Over(); });
}

void CoreState::HeardFromAgent(int64_t now) {
  if (now >= quiet_until_ms_ && CutOff(now)) FreshWindow(now);
  last_heard_ms_ = now;
}

void CoreState::PolledSlurm(bool answered, int64_t now) {
  if (answered && now >= quiet_until_ms_ && CutOff(now)) FreshWindow(now);
  if (!answered && slurm_answered_ && now - last_heard_ms_ > LostAfterMs())
    spdlog::warn(
        "no agent heard for {} and Slurm does not answer: taken for this host being cut off; "
        "no task counts as lost until the service hears from the cluster again",
        Seconds(now - last_heard_ms_));
  slurm_answered_ = answered;
}

StatusOr<std::unique_ptr<OpenExperiment>> CoreState::Load(const ExperimentRecord& record) {
  auto spec_json = nlohmann::json::parse(record.spec_json, nullptr, false);
  auto spec = ParseSpec(spec_json, SpecLimits{1 << 20, 1 << 20, 1 << 30, 1 << 20, 1 << 30});
  if (!spec.ok())
    return Internal("stored spec of '" + record.id +
                    "' no longer parses: " + spec.status().message());
  auto a = std::make_unique<OpenExperiment>();
  a->record = record;
  a->spec = std::move(spec).value();
  auto attempts = ports_.store.ListAttempts(record.id);
  if (!attempts.ok()) return attempts.status();
  if (attempts->empty()) return Internal("experiment '" + record.id + "' has no attempt");
  a->attempt = LiveAttempt(a->spec, attempts->back());
  LiveAttempt& live = a->attempt;
  auto stored = ports_.store.ListTasks(record.id, live.record.number);
  if (!stored.ok()) return stored.status();
  bool assigned = false;
  for (TaskRecord& t : *stored) {
    if (t.task.value() < 0 || t.task.value() >= live.run->size() || t.state == TaskState::kPending)
      continue;
    TaskSlot& slot = live.run->mutable_task(t.task);
    // A running task with a death on record: its program is restarting
    // alone (core/lone_restart.h), its agent to come back in standby.
    const bool alone = t.state == TaskState::kRunning && (t.exit_code || t.signal);
    slot.Restore(alone ? TaskPhase::kRestartingAlone : TaskPhase::kRegistered);
    slot.node = t.node;
    slot.address = t.address;
    slot.local_id = t.local_rank;
    slot.state = t.state;
    if (alone) {
      slot.exit_code = t.exit_code;
      slot.signal = t.signal;
      slot.detail = t.detail;
    }
    if (t.state == TaskState::kRunning || HasExited(t.state)) assigned = true;
    // Agents get a fresh window to reconnect after a service restart.
    t.last_heartbeat = ports_.clock.NowMs();
    // The record as stored, with the identity the run gives it.
    t.role = slot.role.role;
    t.index = slot.role.index;
    live.tasks[t.task.value()] = std::move(t);
  }
  // The exits again, in the order they came, so that the attempt's outcome
  // is what it was (a restart in place waits on it), judged as then: before
  // the tasks still running are marked vanished below.
  std::vector<const TaskRecord*> exits;
  for (const TaskRecord& t : live.tasks)
    if (HasExited(t.state)) exits.push_back(&t);
  std::stable_sort(exits.begin(), exits.end(), [](const TaskRecord* x, const TaskRecord* y) {
    return x->ended_at < y->ended_at;
  });
  for (const TaskRecord* t : exits)
    live.run->OnExit(t->task, t->exit_code, t->signal, t->state == TaskState::kReaped, t->detail,
                     t->startup_error);
  // Until its agent registers again nothing says it is still there: an
  // agent killed while the service was down is indistinguishable from one
  // not reconnected yet (AttemptRun::OnExit; found by bench/soak.py).
  for (TaskIndex i : live.run->indices())
    if (live.run->task(i).registered() && !live.run->task(i).exited())
      live.run->SetVanished(i, true);
  if (assigned) {
    live.run->MarkAssigned();
    // The stall timeout starts over too: what happened while the service
    // was down is unknown, and the agents report the current step again.
    live.last_progress_ms = ports_.clock.NowMs();
  }
  if (live.record.state == AttemptState::kRunning) live.job_started_ms = ports_.clock.NowMs();
  if (record.state == ExperimentState::kCancelled) a->user_cancelled = true;
  return a;
}

}  // namespace tfslurm
