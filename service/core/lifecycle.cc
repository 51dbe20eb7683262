#include "service/core/lifecycle.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace tfslurm {

void Lifecycle::ObserveCommits(std::shared_ptr<store::CommitObserver> observer) {
  observers_.push_back(std::move(observer));
}

Status Lifecycle::Apply(std::span<const store::Changes> batch) {
  // Most calls carry nothing (a registration before the barrier is written
  // by the next Tick): neither the store nor the observers need them.
  if (std::all_of(batch.begin(), batch.end(), [](const store::Changes& c) { return c.empty(); }))
    return Status::Ok();
  Status s = ports.store.ApplyAll(batch);
  // A refusal before the transaction (a taken id) changed nothing; any
  // other failure may have been a COMMIT that did or did not happen.
  if (s.code() != StatusCode::kAlreadyExists)
    for (const auto& o : observers_) o->Committed(batch, s.ok());
  return s;
}

void Lifecycle::CommitAll(std::span<const store::Changes> batch) {
  if (Status s = Apply(batch); !s.ok()) spdlog::error("could not persist changes: {}", s.message());
}

void Lifecycle::Commit(store::Changes& c) {
  CommitAll({&c, 1});
  c = store::Changes{};
}

void Lifecycle::Event(store::Changes& c, const OpenExperiment& a, const std::string& what,
                      const std::string& why) {
  c.events.push_back({0, a.record.id, a.attempt.number, ports.clock.NowMs(), what, why});
}

void Lifecycle::EndAttempt(OpenExperiment& a, EndReason reason) {
  a.attempt.end_reason = EndReasonName(reason);
  metrics->AttemptEnded(a.attempt.end_reason);
}

void Lifecycle::SetState(store::Changes& c, OpenExperiment& a, ExperimentState state,
                         const std::string& why) {
  if (a.record.state == state && a.record.reason == why) return;
  std::string from = ExperimentStateName(a.record.state);
  a.record.state = state;
  a.record.reason = why;
  a.record.updated_at = ports.clock.NowMs();
  c.experiment = a.record;
  Event(c, a, "state",
        from + " -> " + ExperimentStateName(state) + (why.empty() ? "" : ": " + why));
}

StatusOr<std::unique_ptr<OpenExperiment>> Lifecycle::Load(const ExperimentRecord& record) {
  auto spec_json = nlohmann::json::parse(record.spec_json, nullptr, false);
  auto spec = ParseSpec(spec_json, SpecLimits{1 << 20, 1 << 20, 1 << 30, 1 << 20, 1 << 30});
  if (!spec.ok())
    return Internal("stored spec of '" + record.id +
                    "' no longer parses: " + spec.status().message());
  auto a = std::make_unique<OpenExperiment>();
  a->record = record;
  a->spec = std::move(spec).value();
  auto attempts = ports.store.ListAttempts(record.id);
  if (!attempts.ok()) return attempts.status();
  if (attempts->empty()) return Internal("experiment '" + record.id + "' has no attempt");
  a->attempt = attempts->back();
  a->run = std::make_unique<AttemptRun>(a->spec, a->attempt.number);
  auto tasks = ports.store.ListTasks(record.id, a->attempt.number);
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
    slot.local_id = t.local_rank;
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
    t.last_heartbeat = ports.clock.NowMs();
    // Until its agent registers again nothing says it is still there: an
    // agent killed while the service was down is indistinguishable from one
    // not reconnected yet (AttemptRun::OnExit; found by bench/soak.py).
    if (!slot.exited) slot.vanished = true;
  }
  if (assigned) {
    a->run->MarkAssigned();
    // The stall timeout starts over too: what happened while the service
    // was down is unknown, and the agents report the current step again.
    a->last_progress_ms = ports.clock.NowMs();
  }
  if (a->attempt.state == "running") a->job_started_ms = ports.clock.NowMs();
  if (record.state == ExperimentState::kCancelled) a->user_cancelled = true;
  return a;
}

}  // namespace tfslurm
