#include "service/core/open_experiment.h"

#include <algorithm>
#include <csignal>

#include "schema/tf_config_wire.h"
#include "service/core/tf_config.h"
#include "service/core/wording.h"

namespace tfslurm {

LiveAttempt::LiveAttempt(const ExperimentSpec& spec, AttemptRecord attempt)
    : record(std::move(attempt)), run(std::make_unique<AttemptRun>(spec, record.number)) {
  for (int i = 0; i < run->size(); ++i) {
    TaskRecord t;
    t.experiment_id = record.experiment_id;
    t.attempt = record.number;
    t.proc_id = i;
    t.role = run->task(i).role.role;
    t.index = run->task(i).role.index;
    tasks.push_back(std::move(t));
  }
}

ProcPlace LiveAttempt::Place(int proc) const { return record.node_slots.Place(proc, run->size()); }

StatusOr<ProcPlace> LiveAttempt::PlaceAgent(int proc) const {
  ProcPlace place = Place(proc);
  if (place.kind != ProcPlace::kOut) return place;
  if (proc < 0 || record.node_slots.IsIdentity())
    return InvalidArgument("task " + std::to_string(proc) + " is out of range: the attempt has " +
                           std::to_string(run->size()) + " tasks");
  return FailedPrecondition("task " + std::to_string(proc) + "'s node is out of attempt " +
                            std::to_string(record.number) +
                            ": a spare node took its place, or it was a spare left unused");
}

std::string LiveAttempt::TaskNameOf(int task) const { return TaskName(run->task(task), task); }

std::optional<std::string> LiveAttempt::RegistrationRefused(int task) const {
  if (run->outcome().kind == Outcome::kUndecided || run->task(task).registered) return std::nullopt;
  return "attempt " + std::to_string(record.number) +
         " has already ended: " + run->outcome().reason;
}

bool LiveAttempt::Register(int task, const RegisterInfo& info, std::shared_ptr<TaskChannel> channel,
                           int64_t now, Changes& c) {
  const std::string address = info.address + ":" + std::to_string(info.port);
  const bool barrier_complete =
      run->Register(task, info.node_name, address, info.node_id, info.local_id);
  channels[task] = std::move(channel);
  TaskRecord& t = tasks[task];
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
  return barrier_complete;
}

bool LiveAttempt::ShutdownPending(int task) const {
  return run->task(task).shutdown_sent && !run->task(task).exited;
}

bool LiveAttempt::Heartbeat(int task, int64_t now, Changes& c) {
  TaskRecord& t = tasks[task];
  t.last_heartbeat = now;
  heartbeat_dirty.insert(task);
  if (t.state != TaskState::kLost) return false;
  t.state = run->task(task).state;
  c.tasks.push_back(t);
  return true;
}

void LiveAttempt::Disconnected(int task, const TaskChannel* channel) {
  auto ch = channels.find(task);
  // A newer stream may already have replaced this one.
  if (ch == channels.end() || ch->second.get() != channel) return;
  channels.erase(ch);
  TaskSlot& slot = run->mutable_task(task);
  if (slot.registered && !slot.exited)
    run->SetVanished(task, true);
  else if (slot.standing_by())
    slot.agent = TaskSlot::AgentLink::kNormal;  // until its agent comes back to wait
}

void LiveAttempt::SpareDisconnected(int proc, const TaskChannel* channel) {
  auto spare = spare_agents.find(proc);
  if (spare != spare_agents.end() && spare->second.channel.get() == channel)
    spare->second.channel.reset();  // until it comes back to wait
}

bool LiveAttempt::BeginAssigning() {
  const bool first = !run->assignments_sent();
  run->MarkAssigned();
  return first;
}

std::vector<std::pair<int, std::shared_ptr<TaskChannel>>> LiveAttempt::AssignedChannels(
    int only_task) const {
  std::vector<std::pair<int, std::shared_ptr<TaskChannel>>> out;
  for (const auto& [task, channel] : channels)
    if ((only_task < 0 || task == only_task) && channel) out.emplace_back(task, channel);
  return out;
}

std::shared_ptr<const SharedCluster> LiveAttempt::SharedClusterSpec() const {
  if (HasRanks(run->framework())) return nullptr;
  auto cluster = std::make_shared<SharedCluster>();
  cluster->json = run->ClusterSpec();
  cluster->zlib = wire::CompressCluster(cluster->json);
  return cluster;
}

std::string LiveAttempt::AssignedSummary(const SharedCluster* cluster) const {
  const Framework framework = run->framework();
  return "all " + std::to_string(run->size()) + " tasks registered; " +
         (framework == Framework::kPytorch ? "ranks, MASTER_ADDR and MASTER_PORT sent"
          : framework == Framework::kJax   ? "process ids and JAX_COORDINATOR_ADDRESS sent"
                                           : "roles and TF_CONFIG sent") +
         (cluster ? TfConfigTooLong(cluster->json, run->size()) : "");
}

void LiveAttempt::Assigned(int task, bool first, Changes& c) {
  if (!first && tasks[task].state != TaskState::kRegistered) return;
  tasks[task].state = run->task(task).state;
  c.tasks.push_back(tasks[task]);
}

std::optional<int64_t> LiveAttempt::TrainingStarted(int64_t now) {
  last_progress_ms = now;
  if (job_started_ms <= 0) return std::nullopt;
  return now - job_started_ms;
}

void LiveAttempt::CheckpointWritten(int64_t now) {
  last_progress_ms = now;
  run->MarkStepTrained();
}

bool LiveAttempt::ScalarStepSeen(int64_t step, int64_t now) {
  if (max_scalar_step && step <= *max_scalar_step) return false;
  max_scalar_step = step;
  CheckpointWritten(now);
  return true;
}

bool LiveAttempt::TakeScalarNotice() {
  const bool given = scalar_notice_given;
  scalar_notice_given = true;
  return given;
}

bool LiveAttempt::ExitAlreadyKnown(int task) const {
  return run->task(task).exited || run->task(task).restarting_alone;
}

void LiveAttempt::RecordExit(int task, const ExitReport& exit, bool reaped,
                             const std::string& detail, int64_t now, Changes& c) {
  run->OnExit(task, exit.exit_code, exit.signal, reaped, detail, exit.at_startup);
  const TaskSlot& slot = run->task(task);
  TaskRecord& t = tasks[task];
  t.state = slot.state;
  t.exit_code = exit.exit_code;
  t.signal = exit.signal;
  t.detail = detail;
  t.startup_error = slot.failed_at_startup;
  t.ended_at = now;
  c.tasks.push_back(t);
}

std::string LiveAttempt::ShutdownAll(const std::string& reason, int64_t grace_ms,
                                     int64_t deadline_ms, int64_t now) {
  std::string names;
  for (int task : run->TasksToReap()) {
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

std::optional<int64_t> LiveAttempt::ReapingConfirmed(int64_t now) {
  if (reap_started_ms == 0 || run->AnyUnconfirmedShutdown()) return std::nullopt;
  const int64_t took = now - reap_started_ms;
  reap_started_ms = 0;
  return took;
}

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
  for (int i = 0; i < run->size(); ++i) {
    const TaskRecord& t = tasks[i];
    if (run->task(i).exited) continue;
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
  for (int i = 0; i < run->size(); ++i) {
    const TaskSlot& slot = run->task(i);
    if (!slot.registered || slot.exited || slot.restarting_alone) continue;
    const bool left = NodeLeftJob(*this, slot.node);
    const bool silent = tasks[i].state == TaskState::kLost && !deaf &&
                        now - tasks[i].last_heartbeat > gone_after_ms;
    if (left)
      gone.push_back({i, "its node left " + job_n +
                             ": Slurm took it out of the job (a node failure; the job runs on, "
                             "--no-kill)"});
    else if (silent)
      gone.push_back({i, "its node stopped answering (no heartbeat)"});
  }
  return gone;
}

void LiveAttempt::TaskGone(int task, const std::string& why, int64_t now, Changes& c) {
  run->OnExit(task, std::nullopt, SIGKILL, /*reaped=*/false, why, /*at_startup=*/false);
  TaskRecord& t = tasks[task];
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

std::vector<std::pair<int, int64_t>> LiveAttempt::MarkSilentLost(int64_t now, int64_t lost_after_ms,
                                                                 int64_t vanished_after_ms,
                                                                 Changes& c) {
  std::vector<std::pair<int, int64_t>> lost;
  for (int i = 0; i < run->size(); ++i) {
    TaskRecord& t = tasks[i];
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
  for (int i : heartbeat_dirty) c.tasks.push_back(tasks[i]);
  heartbeat_dirty.clear();
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
  for (int i = 0; i < run->size(); ++i) {
    // Within its component, task j runs on node j / tasks_per_node; the
    // components' nodes follow each other in node_names.
    // With spare nodes, slot s is on the job's node node_slots' s.
    const JobComponent& comp = run->components()[run->task(i).component];
    int node = record.node_slots.JobNodeOfSlot(comp.first_node + (i - comp.first_task) /
                                                                     comp.resources.tasks_per_node);
    if (node < static_cast<int>(job.node_names.size()) && tasks[i].node.empty())
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
  for (int i = 0; i < run->size(); ++i) {
    TaskSlot& slot = run->mutable_task(i);
    if (slot.exited || tasks[i].state == TaskState::kPending) continue;
    // A task the service was reaping ended with the job: reaped, by Slurm
    // if its agent's report never came (the agent was killed with the
    // step, or reconnected too late after a service restart). Any other
    // task's end is unknown.
    const TaskState end = slot.shutdown_sent ? TaskState::kReaped : TaskState::kLost;
    slot.state = end;
    tasks[i].state = end;
    c.tasks.push_back(tasks[i]);
  }
}

void LiveAttempt::Explain(const std::string& why, Changes& c) {
  record.reason = why;
  c.attempts.push_back(record);
}

std::optional<std::string> LiveAttempt::LoneLostNode() const {
  if (lost_nodes.size() != 1) return std::nullopt;
  return *lost_nodes.begin();
}

bool OpenExperiment::MayRestartInPlace() const {
  const LiveAttempt& at = attempt;
  return spec.restart.in_allocation && !user_cancelled && !at.record.end_reason &&
         at.record.state != AttemptState::kEnded && at.run->outcome().kind != Outcome::kSucceeded &&
         !at.job_cancel_sent && !at.step_killed && at.in_place_given_up.empty();
}

AssignmentMsg OpenExperiment::AssignmentFor(int task, std::shared_ptr<const SharedCluster> cluster,
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
