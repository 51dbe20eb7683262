#include "service/core/open_experiment.h"

#include <algorithm>
#include <numeric>

#include "base/sha256.h"
#include "schema/tf_config_wire.h"
#include "service/core/tf_config.h"
#include "service/core/wording.h"

namespace tfslurm {

LiveAttempt::LiveAttempt(const ExperimentSpec& spec, AttemptRecord attempt)
    : record(std::move(attempt)), run(std::make_unique<AttemptRun>(spec, record.number)) {
  for (TaskIndex i : run->indices()) {
    TaskRecord t;
    t.experiment_id = record.experiment_id;
    t.attempt = record.number;
    t.task = i;
    t.role = run->task(i).role.role;
    t.index = run->task(i).role.index;
    tasks.push_back(std::move(t));
  }
}

ProcPlace LiveAttempt::Place(ProcId proc) const {
  return record.node_slots.Place(proc, run->size());
}

StatusOr<ProcPlace> LiveAttempt::PlaceAgent(ProcId proc) const {
  ProcPlace place = Place(proc);
  if (place.kind != ProcPlace::kOut) return place;
  if (proc.value() < 0 || record.node_slots.IsIdentity())
    return InvalidArgument("task " + std::to_string(proc.value()) +
                           " is out of range: the attempt has " + std::to_string(run->size()) +
                           " tasks");
  return FailedPrecondition("task " + std::to_string(proc.value()) + "'s node is out of attempt " +
                            std::to_string(record.number) +
                            ": a spare node took its place, or it was a spare left unused");
}

std::string LiveAttempt::TaskNameOf(TaskIndex task) const {
  return TaskName(run->task(task), task);
}

LiveAttempt::Registration LiveAttempt::Register(TaskIndex task, const RegisterInfo& info,
                                                std::shared_ptr<TaskChannel> channel, int64_t now,
                                                Changes& c) {
  Registration r;
  r.again = run->task(task).registered();
  if (run->outcome().kind != Outcome::kUndecided && !r.again) {
    r.refused =
        "attempt " + std::to_string(record.number) + " has already ended: " + run->outcome().reason;
    return r;
  }
  // Named for the reconnect's event only: a storm of first registrations
  // builds no name.
  if (r.again) r.name = TaskNameOf(task);
  const std::string address = info.address + ":" + std::to_string(info.port);
  const bool assignments_out = run->assignments_sent();
  const bool barrier_complete =
      run->Register(task, info.node_name, address, info.node_id, info.local_id);
  channels[task] = std::move(channel);
  TaskRecord& t = tasks[task.value()];
  t.node = info.node_name;
  t.address = address;
  t.local_rank = info.local_id;
  if (!t.registered_at) t.registered_at = now;
  t.last_heartbeat = now;
  t.state = run->task(task).state;
  if (run->assignments_sent()) {
    c.tasks.push_back(t);
  } else if (!barrier_complete) {
    // Before the barrier, registrations are written in batches by the next
    // Tick (as heartbeats are), or with the assignments, which write every
    // task: a transaction per registration, under core's lock, is what a storm of
    // thousands of agents would queue behind. An agent whose registration
    // is lost in a crash registers again when it reconnects.
    heartbeat_dirty.insert(task);
  }
  // An agent registering proves the job runs, before the next poll says so
  // (a restart in place asks whether it still does).
  if (job_state == JobState::kPending || job_state == JobState::kUnknown)
    job_state = JobState::kRunning;
  if (record.state == AttemptState::kPending) {
    record.state = AttemptState::kRunning;
    record.slurm_state = "RUNNING";
    record.started_at = now;
    job_started_ms = now;
    c.attempts.push_back(record);
  }
  r.barrier_complete = barrier_complete;
  r.assignments_out = !barrier_complete && assignments_out;
  if (r.assignments_out && run->task(task).shutdown_sent())
    r.shutdown_again = run->outcome().reason;
  return r;
}

std::optional<std::string> LiveAttempt::Heartbeat(TaskIndex task, int64_t now, Changes& c) {
  TaskRecord& t = tasks[task.value()];
  t.last_heartbeat = now;
  heartbeat_dirty.insert(task);
  if (t.state != TaskState::kLost) return std::nullopt;
  t.state = run->task(task).state;
  c.tasks.push_back(t);
  return TaskNameOf(task);
}

void LiveAttempt::Disconnected(TaskIndex task, const TaskChannel* channel) {
  auto ch = channels.find(task);
  // A newer stream may already have replaced this one.
  if (ch == channels.end() || ch->second.get() != channel) return;
  channels.erase(ch);
  TaskSlot& slot = run->mutable_task(task);
  if (slot.registered() && !slot.exited())
    run->SetVanished(task, true);
  else if (slot.standing_by())
    slot.agent = TaskSlot::AgentLink::kNormal;  // until its agent comes back to wait
}

void LiveAttempt::SpareDisconnected(ProcId proc, const TaskChannel* channel) {
  auto spare = spare_agents.find(proc);
  if (spare != spare_agents.end() && spare->second.channel.get() == channel)
    spare->second.channel.reset();  // until it comes back to wait
}

LiveAttempt::AssignmentRound LiveAttempt::BeginAssigning(std::optional<TaskIndex> only_task,
                                                         int64_t now, Changes& c) {
  AssignmentRound round;
  round.first = !run->assignments_sent();
  run->MarkAssigned();
  if (!HasRanks(run->framework())) {
    auto cluster = std::make_shared<SharedCluster>();
    cluster->json = run->ClusterSpec();
    cluster->zlib = wire::CompressCluster(cluster->json);
    if (!cluster->zlib.empty()) cluster->digest = Sha256Hex(cluster->zlib).substr(0, 16);
    round.cluster = std::move(cluster);
  }
  for (const auto& [task, channel] : channels) {
    if ((only_task && task != *only_task) || !channel) continue;
    round.channels.emplace_back(task, channel);
    // A later round (an agent that never got its assignment) writes only
    // the tasks it moves on from registered.
    TaskRecord& t = tasks[task.value()];
    if (!round.first && t.state != TaskState::kRegistered) continue;
    t.state = run->task(task).state;
    c.tasks.push_back(t);
  }
  if (!round.first) return round;
  last_progress_ms = now;
  if (job_started_ms > 0) round.rendezvous_ms = now - job_started_ms;
  const Framework framework = run->framework();
  round.summary = "all " + std::to_string(run->size()) + " tasks registered; " +
                  (framework == Framework::kPytorch ? "ranks, MASTER_ADDR and MASTER_PORT sent"
                   : framework == Framework::kJax   ? "process ids and JAX_COORDINATOR_ADDRESS sent"
                                                    : "roles and TF_CONFIG sent") +
                  (round.cluster ? TfConfigTooLong(round.cluster->json, run->size()) : "");
  return round;
}

void LiveAttempt::CheckpointWritten(int64_t now) {
  last_progress_ms = now;
  run->MarkStepTrained();
}

std::optional<std::string> LiveAttempt::ScalarsSeen(TaskIndex task,
                                                    const std::vector<ScalarPoint>& points,
                                                    int64_t now) {
  if (task != run->CheckpointingTask())
    return TaskNameOf(task) + " sent them, and only the reporting task (chief, or worker 0) does";
  for (const ScalarPoint& p : points) {
    if (max_scalar_step && p.step <= *max_scalar_step) continue;
    max_scalar_step = p.step;
    CheckpointWritten(now);
  }
  return std::nullopt;
}

bool LiveAttempt::TakeScalarNotice() {
  const bool given = scalar_notice_given;
  scalar_notice_given = true;
  return given;
}

bool LiveAttempt::ExitAlreadyKnown(TaskIndex task) const {
  return run->task(task).exited() || run->task(task).restarting_alone();
}

LiveAttempt::ExitRecorded LiveAttempt::RecordExit(TaskIndex task, const ExitReport& exit,
                                                  bool reaped, const std::string& detail,
                                                  int64_t now, Changes& c) {
  ExitRecorded r;
  r.name = TaskNameOf(task);
  const bool decided_before = run->outcome().kind != Outcome::kUndecided;
  run->OnExit(task, exit.exit_code, exit.signal, reaped, detail, exit.at_startup);
  const TaskSlot& slot = run->task(task);
  TaskRecord& t = tasks[task.value()];
  t.state = slot.state;
  t.exit_code = exit.exit_code;
  t.signal = exit.signal;
  t.detail = detail;
  t.startup_error = slot.failed_at_startup();
  t.ended_at = now;
  c.tasks.push_back(t);
  r.decided_now = !decided_before && run->outcome().kind != Outcome::kUndecided;
  if (reap_started_ms != 0 && !run->AnyUnconfirmedShutdown()) {
    r.reaping_ms = now - reap_started_ms;
    reap_started_ms = 0;
  }
  return r;
}

std::string LiveAttempt::ShutdownAll(const std::string& reason, int grace_ms, int64_t deadline_ms,
                                     int64_t now) {
  std::string names;
  for (TaskIndex task : run->TasksToReap()) {
    run->MarkShutdownSent(task);
    auto ch = channels.find(task);
    if (ch != channels.end()) ch->second->Send(ShutdownMsg{reason, grace_ms});
    names += (names.empty() ? "" : ", ") + TaskNameOf(task);
  }
  if (names.empty()) return names;
  if (reap_started_ms == 0) reap_started_ms = now;
  reap_deadline_ms = deadline_ms;
  return names;
}

std::vector<int> LiveAttempt::ReadySpares() const {
  const int per_node = record.node_slots.tasks_per_node();
  std::vector<int> ready;
  for (int node : record.node_slots.spares()) {
    bool all = true;
    for (int p = node * per_node; p < (node + 1) * per_node && all; ++p) {
      auto it = spare_agents.find(ProcId(p));
      all = it != spare_agents.end() && it->second.channel;
    }
    if (all) ready.push_back(node);
  }
  return ready;
}

std::optional<int> LiveAttempt::MissedNextAttempt(const TaskRef& ref, int64_t job_id) const {
  const ProcPlace place = Place(ref.proc_id);
  const bool not_back = place.kind == ProcPlace::kSpare
                            ? !spare_agents.contains(ref.proc_id)
                            : place.kind == ProcPlace::kTask && !run->task(place.task).registered();
  if (ref.attempt < record.number && record.in_place && record.slurm_job_id == job_id &&
      Sha256Hex(ref.secret) == record.secret_sha256 && not_back)
    return record.number;
  return std::nullopt;
}

bool LiveAttempt::StandBy(TaskIndex task, const std::shared_ptr<TaskChannel>& channel) {
  if (!run->task(task).exited() || record.state != AttemptState::kRunning) return false;
  run->mutable_task(task).agent = TaskSlot::AgentLink::kStandingBy;
  channels[task] = channel;
  return true;
}

LiveAttempt::SpareAnswer LiveAttempt::SpareRegistered(ProcId proc, const std::string& node,
                                                      bool may_wait, bool standby,
                                                      const std::shared_ptr<TaskChannel>& channel) {
  SpareAgent& spare = spare_agents[proc];
  spare.node = node;
  if (!may_wait) {
    spare.channel.reset();
    return SpareAnswer::kReleased;
  }
  if (!standby) return SpareAnswer::kToldItsPart;
  spare.channel = channel;
  return SpareAnswer::kWaits;
}

LiveAttempt::LoneDeath LiveAttempt::RestartAlone(TaskIndex task, std::optional<int> exit_code,
                                                 std::optional<int> signal,
                                                 const std::string& detail, int cap, Changes& c) {
  LoneDeath death;
  if (!run->RestartsAloneNow(task, exit_code, signal)) return death;
  TaskSlot& slot = run->mutable_task(task);
  death.so_far = std::accumulate(tasks.begin(), tasks.end(), 0,
                                 [](int sum, const TaskRecord& t) { return sum + t.restarts; });
  death.name = TaskName(slot, task);
  death.role = slot.role.role;
  death.address = slot.address;
  if (death.so_far >= cap) {
    death.kind = LoneDeath::kCapped;
    return death;
  }
  // RestartsAloneNow said it runs, which BeginLoneRestart takes from.
  if (!slot.BeginLoneRestart()) return death;
  death.kind = LoneDeath::kRestarts;
  slot.exit_code = exit_code;
  slot.signal = signal;
  slot.detail = detail;
  // Stored with the task, which stays running: a running task with a death
  // on record is one restarting alone, also for a restarted tfslurmd
  // (CoreState::Load).
  TaskRecord& t = tasks[task.value()];
  ++t.restarts;
  t.exit_code = exit_code;
  t.signal = signal;
  t.detail = detail;
  c.tasks.push_back(t);
  return death;
}

LiveAttempt::LoneReturn LiveAttempt::LoneAgentBack(TaskIndex task,
                                                   const std::shared_ptr<TaskChannel>& channel,
                                                   bool user_cancelled, int64_t now, Changes& c) {
  TaskSlot& slot = run->mutable_task(task);
  if (!slot.EndLoneRestart()) return {LoneBack::kNotAlone, ""};
  TaskRecord& t = tasks[task.value()];
  if (run->outcome().kind == Outcome::kUndecided && !slot.shutdown_sent() && !user_cancelled) {
    run->SetVanished(task, false);
    channels[task] = channel;
    t.last_heartbeat = now;
    t.exit_code.reset();
    t.signal.reset();
    t.detail.clear();
    c.tasks.push_back(t);
    return {LoneBack::kRestarts, ""};
  }
  // The attempt ended while the program was down: it is not started again,
  // and its death is its exit.
  const std::optional<int> exit_code = slot.exit_code;
  const std::optional<int> signal = slot.signal;
  const std::string detail = slot.detail;
  run->OnExit(task, exit_code, signal, /*reaped=*/false, detail);
  t.state = run->task(task).state;
  t.exit_code = exit_code;
  t.signal = signal;
  t.detail = detail;
  t.ended_at = now;
  c.tasks.push_back(t);
  return {LoneBack::kEnded, TaskNameOf(task) + " " + HowItEnded(exit_code, signal, detail) +
                                "; not restarted: the attempt ended meanwhile (" +
                                run->outcome().reason + ")"};
}

bool OpenExperiment::MayRestartInPlace() const {
  const LiveAttempt& at = attempt;
  return spec.restart.in_allocation && !user_cancelled && !at.record.end_reason &&
         at.record.state != AttemptState::kEnded && at.run->outcome().kind != Outcome::kSucceeded &&
         !at.job_cancel_sent && !at.step_killed && at.in_place_given_up.empty();
}

AssignmentMsg OpenExperiment::AssignmentFor(TaskIndex task,
                                            std::shared_ptr<const SharedCluster> cluster,
                                            int heartbeat_interval_ms,
                                            int shutdown_grace_ms) const {
  const AttemptRun& run = *attempt.run;
  const TaskSlot& slot = run.task(task);
  AssignmentMsg m;
  m.role = slot.role.role;
  m.index = slot.role.index;
  m.framework = FrameworkName(run.framework());
  m.cluster = std::move(cluster);
  m.command = spec.command;
  m.workdir = spec.workdir.empty() ? record.model_dir : spec.workdir;
  for (auto& [k, v] : run.TaskEnv(task, record.model_dir)) m.env[k] = v;
  m.model_dir = record.model_dir;
  m.heartbeat_interval_ms = heartbeat_interval_ms;
  m.shutdown_grace_ms = shutdown_grace_ms;
  m.report_checkpoints = task == run.CheckpointingTask();
  m.stay_for_next_attempt = spec.restart.in_allocation || run.MayRestartAlone(task);
  return m;
}

void OpenExperiment::UserCancels() {
  user_cancelled = true;
  attempt.run->Decide({Outcome::kFailed, "cancelled"});
}

bool OpenExperiment::CheckpointAt(int64_t step, int64_t now) {
  if (record.checkpoint_step && *record.checkpoint_step == step) return false;
  record.checkpoint_step = step;
  record.updated_at = now;
  attempt.CheckpointWritten(now);
  return true;
}

void OpenExperiment::FailureStopping(int64_t now) {
  const Outcome& o = attempt.outcome();
  const std::string attempt_n = "attempt " + std::to_string(attempt.number());
  // Slurm's end time for a running job is its start plus its time limit;
  // the SIGTERM comes when it passes (give or take a poll of slurmctld's).
  if (o.by_sigterm && attempt.job_end_ms > 0 && now >= attempt.job_end_ms - 5000)
    record.reason = attempt_n + ": " + o.reason +
                    " at its Slurm job's time limit; waiting for Slurm to end the job";
  else if (o.by_sigterm)
    record.reason = attempt_n + ": " + o.reason +
                    ": a SIGTERM, which Slurm sends at a time limit, a preemption or a scancel; "
                    "waiting for Slurm to say how the job ended";
  else
    record.reason =
        attempt_n + " failed: " + o.reason +
        (spec.restart.in_allocation ? "; stopping its tasks" : "; ending its Slurm job");
  record.updated_at = now;
}

Status OpenExperiment::JobStillFinishing() const {
  return Unavailable("experiment '" + record.id + "' has ended but its Slurm job " +
                     std::to_string(attempt.job_id()) +
                     " is still finishing; retry in a few seconds");
}

bool OpenExperiment::Over() const {
  return IsTerminal(record.state) && attempt.record.state == AttemptState::kEnded;
}

bool OpenExperiment::NoAgentRegistered() const {
  return std::all_of(attempt.tasks.begin(), attempt.tasks.end(),
                     [](const TaskRecord& t) { return t.state == TaskState::kPending; });
}

bool NodeLeftJob(const LiveAttempt& attempt, const std::string& node) {
  const std::vector<std::string>& names = attempt.job_node_names;
  return !names.empty() && !node.empty() &&
         std::find(names.begin(), names.end(), node) == names.end();
}

}  // namespace tfslurm
