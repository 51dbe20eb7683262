#include "service/core/agent_protocol.h"

#include <spdlog/spdlog.h>

#include <cmath>

#include "base/sha256.h"
#include "base/unsafe_text.h"
#include "schema/tf_config_wire.h"
#include "service/core/container_launch.h"
#include "service/core/in_place_restart.h"
#include "service/core/scalars.h"
#include "service/core/wording.h"

namespace tfslurm {

StatusOr<OpenExperiment*> AgentProtocol::FindAgent(const TaskRef& ref, ProcPlace* place) {
  auto it = core_.open().find(ref.experiment_id);
  if (it == core_.open().end()) {
    auto e = core_.ports().store.GetExperiment(ref.experiment_id);
    if (!e.ok()) return NotFound("no experiment '" + ref.experiment_id + "'");
    // Stored but not yet in memory: its submission is still being recorded.
    if (!IsTerminal(e->state))
      return Unavailable("experiment '" + ref.experiment_id + "' is still being set up; retry");
    return FailedPrecondition("experiment '" + ref.experiment_id + "' has ended (" +
                              ExperimentStateName(e->state) + ")");
  }
  OpenExperiment& a = *it->second;
  if (ref.attempt != a.attempt.record.number)
    return FailedPrecondition(
        "attempt " + std::to_string(ref.attempt) + " of '" + ref.experiment_id +
        "' is not current (current: " + std::to_string(a.attempt.record.number) + ")");
  if (Sha256Hex(ref.secret) != a.attempt.record.secret_sha256)
    return Status(StatusCode::kUnauthenticated, "wrong attempt secret for '" + ref.experiment_id +
                                                    "' attempt " + std::to_string(ref.attempt));
  *place = a.attempt.record.node_slots.Place(ref.proc_id, a.attempt.run->size());
  if (place->kind == ProcPlace::kOut) {
    if (ref.proc_id < 0 || a.attempt.record.node_slots.IsIdentity())
      return InvalidArgument("task " + std::to_string(ref.proc_id) +
                             " is out of range: the attempt has " +
                             std::to_string(a.attempt.run->size()) + " tasks");
    return FailedPrecondition("task " + std::to_string(ref.proc_id) + "'s node is out of attempt " +
                              std::to_string(ref.attempt) +
                              ": a spare node took its place, or it was a spare left unused");
  }
  return &a;
}

StatusOr<OpenExperiment*> AgentProtocol::FindTask(const TaskRef& ref, int* task) {
  ProcPlace place;
  auto found = FindAgent(ref, &place);
  if (!found.ok()) return found;
  if (place.kind != ProcPlace::kTask)
    return FailedPrecondition("task " + std::to_string(ref.proc_id) +
                              " runs on a spare node: it has no program to report on");
  *task = place.task;
  return found;
}

void AgentProtocol::OnSpare(OpenExperiment& a, const TaskRef& ref, const RegisterInfo& info,
                            std::shared_ptr<TaskChannel> channel) {
  LiveAttempt::SpareAgent& spare = a.attempt.spare_agents[ref.proc_id];
  spare.node = info.node_name;
  // A spare may register before any task proves the job runs (the attempt
  // is still pending then): only an ended attempt has no use for it.
  const bool over = a.user_cancelled || a.attempt.record.end_reason ||
                    a.attempt.record.state == AttemptState::kEnded ||
                    a.attempt.run->outcome().kind == Outcome::kSucceeded ||
                    !a.attempt.in_place_given_up.empty();
  if (over) {
    spare.channel.reset();
    channel->Send(ReleaseMsg{IsTerminal(a.record.state) ? a.record.reason
                                                        : "no further attempt runs in this job"});
    return;
  }
  if (!info.standby) {
    channel->Send(SpareMsg{"node " + info.node_name + " is a spare of Slurm job " +
                           std::to_string(a.attempt.record.slurm_job_id) +
                           " (resources.spare_nodes): it takes a failed node's place in a restart "
                           "in place"});
    return;
  }
  spare.channel = std::move(channel);
}

void AgentProtocol::OnStandby(const TaskRef& ref, const RegisterInfo& info,
                              std::shared_ptr<TaskChannel> channel) {
  auto it = core_.open().find(ref.experiment_id);
  if (it != core_.open().end()) {
    OpenExperiment& a = *it->second;
    const AttemptRecord& current = a.attempt.record;
    // The next attempt started in this job while this agent was away (its
    // stream broke, or tfslurmd restarted, between the attempt's record and
    // the agent's NextAttempt): it is told again. The secret is the job's.
    const ProcPlace place = current.node_slots.Place(ref.proc_id, a.attempt.run->size());
    const bool not_back =
        place.kind == ProcPlace::kSpare
            ? !a.attempt.spare_agents.contains(ref.proc_id)
            : place.kind == ProcPlace::kTask && !a.attempt.run->task(place.task).registered;
    if (ref.attempt < current.number && current.in_place &&
        current.slurm_job_id == info.slurm_job_id &&
        Sha256Hex(ref.secret) == current.secret_sha256 && not_back) {
      channel->Send(NextAttemptMsg{
          current.number, "attempt " + std::to_string(current.number) + " runs in this job",
          AttemptLogDir(core_.config().output_root, a.record.id, current.number)});
      return;
    }
  }
  ProcPlace place;
  auto found = FindAgent(ref, &place);
  if (!found.ok()) {
    channel->Send(RefusalFor(found.status()));
    return;
  }
  OpenExperiment& a = **found;
  if (place.kind == ProcPlace::kSpare) return OnSpare(a, ref, info, std::move(channel));
  const int task = place.task;
  Changes c;
  if (lone_.OnStandby(a, task, channel, c)) {
    SendAssignments(a, c, task);
    core_.Commit(c);
    return;
  }
  core_.Commit(c);
  TaskSlot& slot = a.attempt.run->mutable_task(task);
  const Outcome& outcome = a.attempt.run->outcome();
  // Only a failure can bring a next attempt to this job; until the attempt
  // is decided, a task that ended early (a rank done first) waits too.
  if (!a.spec.restart.in_allocation || !slot.exited || a.user_cancelled ||
      a.attempt.record.end_reason || outcome.kind == Outcome::kSucceeded ||
      a.attempt.record.state != AttemptState::kRunning || !a.attempt.in_place_given_up.empty()) {
    channel->Send(
        ReleaseMsg{IsTerminal(a.record.state) || a.record.state == ExperimentState::kRestarting
                       ? a.record.reason
                       : "no further attempt runs in this job"});
    return;
  }
  slot.standing_by = true;
  a.attempt.channels[task] = std::move(channel);
}

void AgentProtocol::OnRegister(const TaskRef& ref, const RegisterInfo& info,
                               std::shared_ptr<TaskChannel> channel) {
  bool queued;
  {
    MutexLock lock(core_.mu());
    if (info.standby) return OnStandby(ref, info, std::move(channel));
    queued = RegisterTask(ref, info, std::move(channel));
  }
  // The barrier's commit, written while gRPC writes the Assignments and
  // other agents' messages go on; in the store before this returns. A
  // registration that queued nothing (most of them: rows before the
  // barrier are written by the next Tick) does not wait for the store.
  if (queued) core_.WriteQueued();
}

bool AgentProtocol::RegisterTask(const TaskRef& ref, const RegisterInfo& info,
                                 std::shared_ptr<TaskChannel> channel) {
  ProcPlace place;
  auto found = FindAgent(ref, &place);
  if (!found.ok()) {
    channel->Send(RefusalFor(found.status()));
    return false;
  }
  OpenExperiment& a = **found;
  if (place.kind == ProcPlace::kSpare) {
    OnSpare(a, ref, info, std::move(channel));
    return false;
  }
  const int proc = place.task;
  int64_t now = core_.ports().clock.NowMs();
  Changes c;
  TaskSlot& slot = a.attempt.run->mutable_task(proc);
  std::string address = info.address + ":" + std::to_string(info.port);
  if (a.attempt.run->outcome().kind != Outcome::kUndecided && !slot.registered) {
    channel->Send(RefusedMsg{"attempt " + std::to_string(a.attempt.record.number) +
                                 " has already ended: " + a.attempt.run->outcome().reason,
                             true});
    return false;
  }
  bool was_registered = slot.registered;
  if (!was_registered) core_.metrics().Registered();
  bool barrier_complete =
      a.attempt.run->Register(proc, info.node_name, address, info.node_id, info.local_id);
  a.attempt.channels[proc] = channel;
  TaskRecord& t = a.attempt.tasks[proc];
  t.node = info.node_name;
  t.address = address;
  t.local_rank = info.local_id;
  if (!t.registered_at) t.registered_at = now;
  t.last_heartbeat = now;
  t.state = slot.state;
  if (a.attempt.run->assignments_sent()) {
    c.tasks.push_back(t);
  } else if (!barrier_complete) {
    // Before the barrier, registrations are written in batches by the next
    // Tick (as heartbeats are), or with the assignments, which write every
    // task: a transaction per registration, under core's lock, is what a storm of
    // thousands of agents would queue behind. An agent whose registration
    // is lost in a crash registers again when it reconnects.
    a.attempt.heartbeat_dirty.insert(proc);
  }
  if (a.attempt.record.state == AttemptState::kPending) {
    // An agent registering proves the job runs, before the next poll says so.
    a.attempt.record.state = AttemptState::kRunning;
    a.attempt.record.slurm_state = "RUNNING";
    a.attempt.record.started_at = now;
    a.attempt.job_started_ms = now;
    c.attempts.push_back(a.attempt.record);
  }
  if (a.record.state == ExperimentState::kQueued)
    core_.SetState(c, a, ExperimentState::kStarting, "tasks registering");
  if (was_registered)
    core_.Event(c, a, "reconnected", TaskName(slot, proc) + " reconnected from " + address);

  if (barrier_complete) {
    SendAssignments(a, c);
  } else if (a.attempt.run->assignments_sent()) {
    // A reconnecting agent already holds its assignment; one that never got
    // it (its stream broke first, or the service restarted) needs it now.
    if (!info.reconnect) SendAssignments(a, c, proc);
    if (slot.shutdown_sent && !slot.exited)
      channel->Send(ShutdownMsg{a.attempt.run->outcome().reason, core_.config().shutdown_grace_ms});
  }
  // The barrier's holds every task's row; the lock need not wait for them.
  return core_.CommitAfterUnlock(c);
}

void AgentProtocol::SendAssignments(OpenExperiment& a, Changes& c, int only_proc) {
  bool first = !a.attempt.run->assignments_sent();
  a.attempt.run->MarkAssigned();
  int checkpointing = a.attempt.run->CheckpointingTask();
  const Framework framework = a.attempt.run->framework();
  std::shared_ptr<SharedCluster> cluster;  // TF_CONFIG's; PyTorch and JAX have none
  if (!HasRanks(framework)) {
    cluster = std::make_shared<SharedCluster>();
    cluster->json = a.attempt.run->ClusterSpec();
    cluster->zlib = wire::CompressCluster(cluster->json);
  }
  for (int i = 0; i < a.attempt.run->size(); ++i) {
    if (only_proc >= 0 && i != only_proc) continue;
    auto ch = a.attempt.channels.find(i);
    if (ch == a.attempt.channels.end() || !ch->second) continue;
    const TaskSlot& slot = a.attempt.run->task(i);
    AssignmentMsg m;
    m.role = slot.role.role;
    m.index = slot.role.index;
    m.framework = FrameworkName(a.attempt.run->framework());
    m.cluster = cluster;
    m.command = a.spec.command;
    m.workdir = a.spec.workdir.empty() ? a.record.model_dir : a.spec.workdir;
    for (auto& [k, v] : a.attempt.run->TaskEnv(i, a.record.model_dir)) m.env[k] = v;
    m.model_dir = a.record.model_dir;
    m.heartbeat_interval_ms = core_.config().heartbeat_interval_ms;
    m.shutdown_grace_ms = core_.config().shutdown_grace_ms;
    m.report_checkpoints = i == checkpointing;
    m.stay_for_next_attempt = a.spec.restart.in_allocation || a.attempt.run->MayRestartAlone(i);
    m.container = ContainerFor(
        a.spec, ResolveContainerRuntime(a.spec.container, core_.config().launch.container_runtime),
        slot.role.role,
        {core_.config().output_root + "/" + a.record.id, a.record.model_dir, m.workdir,
         core_.config().launch.container_agent_dir},
        TaskHasGpus(a.spec, slot.role.role));
    if (first || a.attempt.tasks[i].state == TaskState::kRegistered) {
      a.attempt.tasks[i].state = slot.state;
      c.tasks.push_back(a.attempt.tasks[i]);
    }
    ch->second->Send(m);
  }
  if (first) {
    a.attempt.last_progress_ms = core_.ports().clock.NowMs();
    if (a.attempt.job_started_ms > 0)
      core_.metrics().RendezvousDone(
          static_cast<double>(core_.ports().clock.NowMs() - a.attempt.job_started_ms) / 1000.0);
    core_.Event(c, a, "assigned",
                "all " + std::to_string(a.attempt.run->size()) + " tasks registered; " +
                    (framework == Framework::kPytorch ? "ranks, MASTER_ADDR and MASTER_PORT sent"
                     : framework == Framework::kJax ? "process ids and JAX_COORDINATOR_ADDRESS sent"
                                                    : "roles and TF_CONFIG sent"));
    core_.SetState(c, a, ExperimentState::kRunning, "training");
  }
}

Status AgentProtocol::OnHeartbeat(const TaskRef& ref) {
  MutexLock lock(core_.mu());
  int task;
  auto found = FindTask(ref, &task);
  if (!found.ok()) return found.status();
  OpenExperiment& a = **found;
  a.attempt.tasks[task].last_heartbeat = core_.ports().clock.NowMs();
  a.attempt.heartbeat_dirty.insert(task);
  if (a.attempt.tasks[task].state == TaskState::kLost) {
    const TaskSlot& slot = a.attempt.run->task(task);
    Changes c;
    a.attempt.tasks[task].state = slot.state;
    c.tasks.push_back(a.attempt.tasks[task]);
    core_.Event(c, a, "heartbeat", TaskName(slot, task) + " is back");
    core_.Commit(c);
  }
  return Status::Ok();
}

Status AgentProtocol::OnProgress(const TaskRef& ref, int64_t step, const std::string& path) {
  MutexLock lock(core_.mu());
  int task;
  auto found = FindTask(ref, &task);
  if (!found.ok()) return found.status();
  OpenExperiment& a = **found;
  if (a.record.checkpoint_step && *a.record.checkpoint_step == step) return Status::Ok();
  Changes c;
  a.record.checkpoint_step = step;
  a.record.updated_at = a.attempt.last_progress_ms = core_.ports().clock.NowMs();
  a.attempt.run->MarkStepTrained();
  // The path is what the program wrote in MODEL_DIR/checkpoint, and others
  // (an admin) read it: one with a control or bidi character is not kept,
  // and the event says why. The step still counts.
  if (std::optional<std::string> unsafe = UnsafeCharacter(path)) {
    a.record.checkpoint_path.clear();
    c.experiment = a.record;
    core_.Event(c, a, "checkpoint",
                "step " + std::to_string(step) + "; its path is ignored: it has " + *unsafe +
                    ", and a checkpoint path must be " + kSafeTextRule);
    core_.Commit(c);
    return Status::Ok();
  }
  a.record.checkpoint_path = path;
  c.experiment = a.record;
  core_.Event(c, a, "checkpoint", "step " + std::to_string(step) + " (" + path + ")");
  core_.Commit(c);
  return Status::Ok();
}

Status AgentProtocol::OnScalars(const TaskRef& ref, std::vector<ScalarPoint> points) {
  // Checked before the lock: the points are the caller's own.
  std::string dropped_why;
  size_t dropped = 0;
  if (points.size() > kMaxScalarsPerReport) {
    dropped = points.size() - kMaxScalarsPerReport;
    dropped_why = "a report had " + std::to_string(points.size()) + " points; at most " +
                  std::to_string(kMaxScalarsPerReport) + " are taken";
    points.resize(kMaxScalarsPerReport);
  }
  const double now_s = static_cast<double>(core_.ports().clock.NowMs()) / 1000.0;
  std::erase_if(points, [&](ScalarPoint& p) {
    if (!std::isfinite(p.wall_time) || p.wall_time <= 0) p.wall_time = now_s;
    std::optional<std::string> problem = ScalarProblem(p);
    if (!problem) return false;
    if (dropped++ == 0) dropped_why = "a point of step " + std::to_string(p.step) + ": " + *problem;
    return true;
  });
  {
    MutexLock lock(core_.mu());
    int task;
    auto found = FindTask(ref, &task);
    if (!found.ok()) return found.status();
    OpenExperiment& a = **found;
    if (task != a.attempt.run->CheckpointingTask()) {
      dropped += points.size();
      dropped_why = TaskName(a.attempt.run->task(task), task) +
                    " sent them, and only the reporting task (chief, or worker 0) does";
      points.clear();
    }
    for (const ScalarPoint& p : points) {
      if (a.attempt.max_scalar_step && p.step <= *a.attempt.max_scalar_step) continue;
      a.attempt.max_scalar_step = p.step;
      a.attempt.last_progress_ms = core_.ports().clock.NowMs();
      a.attempt.run->MarkStepTrained();
    }
  }
  // Written outside the lock: other experiments' agents need not wait for
  // these rows.
  AppendedScalars appended;
  if (!points.empty()) {
    auto written = core_.ports().store.AppendScalars(ref.experiment_id, ref.attempt, points,
                                                     core_.config().scalar_limits);
    if (!written.ok()) {
      spdlog::warn("{}: {} training scalars not kept: {}", ref.experiment_id, points.size(),
                   written.status().message());
      return Status::Ok();
    }
    appended = std::move(written).value();
  }
  if (dropped == 0 && appended.refused_tags.empty()) return Status::Ok();

  MutexLock lock(core_.mu());
  int task;
  auto found = FindTask(ref, &task);
  if (!found.ok() || (*found)->attempt.scalar_notice_given) return Status::Ok();
  OpenExperiment& a = **found;
  a.attempt.scalar_notice_given = true;
  std::string why;
  if (dropped > 0)
    why = std::to_string(dropped) + " training scalar point(s) not kept: " + dropped_why;
  if (!appended.refused_tags.empty()) {
    if (!why.empty()) why += "; ";
    why += "tag '" + appended.refused_tags.front() + "' not kept: the experiment has " +
           std::to_string(core_.config().scalar_limits.tags) +
           " tags already (tfslurmd --scalar-tags)";
  }
  Changes c;
  core_.Event(c, a, "scalars", why + " (said once per attempt)");
  core_.Commit(c);
  return Status::Ok();
}

Status AgentProtocol::OnExited(const TaskRef& ref, const ExitReport& exit) {
  const std::optional<int> exit_code = exit.exit_code;
  const std::optional<int> signal = exit.signal;
  MutexLock lock(core_.mu());
  int proc;
  auto found = FindTask(ref, &proc);
  if (!found.ok()) return found.status();
  OpenExperiment& a = **found;
  // A re-sent report.
  if (a.attempt.run->task(proc).exited || a.attempt.run->task(proc).restarting_alone)
    return Status::Ok();
  bool decided_before = a.attempt.run->outcome().kind != Outcome::kUndecided;
  // A task that ends after the user cancelled was ended by us (scancel's
  // SIGTERM reaches the program through its agent, which then reports its
  // own exit): reaped, not failed, whatever its exit code. A task told to
  // shut down is reaped only if its agent says so: a report with reaped
  // false was sent for a program that had ended on its own before the
  // Shutdown reached it, and its exit is the one to show.
  const bool reaped = exit.reaped || a.user_cancelled;
  const std::string detail = ExitDetail(exit.detail);
  Changes c;
  if (!reaped && lone_.OnExit(a, proc, exit_code, signal, detail, c)) {
    core_.Commit(c);
    return Status::Ok();
  }
  a.attempt.run->OnExit(proc, exit_code, signal, reaped, detail, exit.at_startup);
  const TaskSlot& slot = a.attempt.run->task(proc);
  TaskRecord& t = a.attempt.tasks[proc];
  t.state = slot.state;
  t.exit_code = exit_code;
  t.signal = signal;
  t.detail = detail;
  t.startup_error = slot.failed_at_startup;
  t.ended_at = core_.ports().clock.NowMs();
  c.tasks.push_back(t);
  core_.Event(
      c, a, reaped ? "reaped" : "exited",
      TaskName(slot, proc) + " " + HowItEnded(exit_code, signal, detail, a.spec.signal_grace_s));
  if (a.attempt.reap_started_ms > 0 && a.attempt.run->UnconfirmedShutdowns().empty()) {
    core_.metrics().ReapingDone(static_cast<double>(t.ended_at - a.attempt.reap_started_ms) /
                                1000.0);
    a.attempt.reap_started_ms = 0;
  }
  if (!decided_before && a.attempt.run->outcome().kind != Outcome::kUndecided) OnOutcome(a, c);
  core_.Commit(c);
  return Status::Ok();
}

void AgentProtocol::OnDisconnect(const TaskRef& ref, const TaskChannel* channel) {
  MutexLock lock(core_.mu());
  auto it = core_.open().find(ref.experiment_id);
  if (it == core_.open().end() || it->second->attempt.record.number != ref.attempt) return;
  OpenExperiment& a = *it->second;
  const ProcPlace place = a.attempt.record.node_slots.Place(ref.proc_id, a.attempt.run->size());
  if (place.kind == ProcPlace::kSpare) {
    auto spare = a.attempt.spare_agents.find(ref.proc_id);
    if (spare != a.attempt.spare_agents.end() && spare->second.channel.get() == channel)
      spare->second.channel.reset();  // until it comes back to wait
    return;
  }
  if (place.kind != ProcPlace::kTask) return;
  auto ch = a.attempt.channels.find(place.task);
  // A newer stream may already have replaced this one.
  if (ch == a.attempt.channels.end() || ch->second.get() != channel) return;
  a.attempt.channels.erase(ch);
  TaskSlot& slot = a.attempt.run->mutable_task(place.task);
  if (slot.registered && !slot.exited) a.attempt.run->SetVanished(place.task, true);
  slot.standing_by = false;  // until its agent comes back to wait
}

void AgentProtocol::OnOutcome(OpenExperiment& a, Changes& c) {
  const Outcome& o = a.attempt.run->outcome();
  if (o.kind == Outcome::kSucceeded) {
    core_.EndAttempt(a, EndReason::kSucceeded);
    a.attempt.record.reason = o.reason;
    c.attempts.push_back(a.attempt.record);
    core_.SetState(c, a, ExperimentState::kSucceeded, o.reason);
    ReapRemaining(a, c, "training succeeded: " + o.reason);
    ReleaseWaitingAgents(a.attempt, "training succeeded");
  } else if (o.kind == Outcome::kFailed) {
    // What the failure means for a restart is decided when the job has
    // ended: a task killed by SIGTERM may be the symptom of a preemption or
    // the time limit, which Slurm's final state tells apart.
    ReapRemaining(a, c, "attempt failed: " + o.reason);
    a.record.reason =
        "attempt " + std::to_string(a.attempt.record.number) + " failed: " + o.reason +
        (a.spec.restart.in_allocation ? "; stopping its tasks" : "; ending its Slurm job");
    a.record.updated_at = core_.ports().clock.NowMs();
    c.experiment = a.record;
  }
}

void AgentProtocol::ReapRemaining(OpenExperiment& a, Changes& c, const std::string& reason) {
  std::vector<int> to_reap = a.attempt.run->TasksToReap();
  if (to_reap.empty()) return;
  std::string names;
  for (int proc : to_reap) {
    a.attempt.run->MarkShutdownSent(proc);
    auto ch = a.attempt.channels.find(proc);
    if (ch != a.attempt.channels.end())
      ch->second->Send(ShutdownMsg{reason, core_.config().shutdown_grace_ms});
    names += (names.empty() ? "" : ", ") + TaskName(a.attempt.run->task(proc), proc);
  }
  const int64_t now = core_.ports().clock.NowMs();
  if (a.attempt.reap_started_ms == 0) a.attempt.reap_started_ms = now;
  a.attempt.reap_deadline_ms =
      now + core_.config().shutdown_grace_ms + core_.config().reap_timeout_margin_ms;
  core_.Event(c, a, "reaping", "Shutdown sent to " + names);
}

}  // namespace tfslurm
