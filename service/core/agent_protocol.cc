#include "service/core/agent_protocol.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/sha256.h"
#include "base/unsafe_text.h"
#include "service/core/container_launch.h"
#include "service/core/in_place_restart.h"
#include "service/core/proven_uid.h"
#include "service/core/scalars.h"
#include "service/core/wording.h"

namespace tfslurm {

namespace {

// The one answer to a message whose experiment, attempt and secret do not
// belong together: an experiment that does not exist, a wrong secret, an
// attempt that never was. The same bytes whichever it is, so that nothing
// but the holder of an attempt's secret learns whether the experiment
// exists, whether it has ended or which attempt is current. NotFound, so an
// agent that reached a tfslurmd that does not know its experiment keeps
// trying for a while (RefusalFor: unknown_experiment).
Status NoSuchAgent(const TaskRef& ref) {
  return NotFound("no experiment '" + ref.experiment_id + "' with attempt " +
                  std::to_string(ref.attempt) + " and this secret");
}

// The runtime the experiment's tasks use: its spec's, or the site's for
// `auto`.
ContainerRuntime RuntimeOf(const OpenExperiment& a, const CoreConfig& config) {
  return ResolveContainerRuntime(a.spec.container, config.launch.container_runtime);
}

// How a task of role is started: in the container the role's spec names
// (with the site's runtime for `auto`), the experiment's dirs and the
// workdir mounted at the same paths; none when the spec has no container.
ContainerLaunchMsg TaskContainer(const OpenExperiment& a, const std::string& role,
                                 const std::string& workdir, const CoreConfig& config) {
  return ContainerFor(a.spec, RuntimeOf(a, config), role,
                      {config.output_root + "/" + a.record.id, a.record.model_dir, workdir,
                       config.launch.container_agent_dir},
                      TaskHasGpus(a.spec, role));
}

}  // namespace

bool AgentProtocol::HoldsSecretOf(const TaskRef& ref, const OpenExperiment* open) {
  const std::string hash = Sha256Hex(ref.secret);
  if (open && ref.attempt == open->attempt.number()) return open->attempt.SecretIs(hash);
  // Another attempt (an agent of an earlier one, or tfslurmd restarted and
  // the experiment not in memory): its own secret, as stored.
  auto attempts = core_.ports().store.ListAttempts(ref.experiment_id);
  if (!attempts.ok()) return false;
  for (const AttemptRecord& a : *attempts)
    if (a.number == ref.attempt) return !a.secret_sha256.empty() && hash == a.secret_sha256;
  return false;
}

StatusOr<OpenExperiment*> AgentProtocol::FindAgent(const TaskRef& ref, ProcPlace* place) {
  OpenExperiment* open = core_.Find(ref.experiment_id);
  // The secret before anything else is looked at or said.
  if (!HoldsSecretOf(ref, open)) return NoSuchAgent(ref);
  if (!open) {
    auto e = core_.ports().store.GetExperiment(ref.experiment_id);
    if (!e.ok()) return NoSuchAgent(ref);
    // Stored but not yet in memory: its submission is still being recorded.
    if (!IsTerminal(e->state))
      return Unavailable("experiment '" + ref.experiment_id + "' is still being set up; retry");
    return FailedPrecondition("experiment '" + ref.experiment_id + "' has ended (" +
                              ExperimentStateName(e->state) + ")");
  }
  OpenExperiment& a = *open;
  const int current = a.attempt.number();
  if (ref.attempt != current)
    return FailedPrecondition("attempt " + std::to_string(ref.attempt) + " of '" +
                              ref.experiment_id +
                              "' is not current (current: " + std::to_string(current) + ")");
  // Site mode: the secret is right; the sender must also run as the owner.
  if (core_.config().agents_prove_uid) {
    if (Status s = CheckProvenUid(a, ref); !s.ok()) return s;
  }
  StatusOr<ProcPlace> placed = a.attempt.PlaceAgent(ref.proc_id);
  if (!placed.ok()) return placed.status();
  *place = *placed;
  return &a;
}

Status AgentProtocol::CheckProvenUid(OpenExperiment& a, const TaskRef& ref) {
  if (!a.job_uid) {
    auto account = core_.ports().accounts.ForOwner(a.record.owner);
    if (!account.ok()) return account.status();
    a.job_uid = account->uid;
  }
  return tfslurm::CheckProvenUid(ref, *a.job_uid, a.record.owner);
}

StatusOr<OpenExperiment*> AgentProtocol::FindTask(const TaskRef& ref, TaskIndex* task) {
  ProcPlace place;
  auto found = FindAgent(ref, &place);
  if (!found.ok()) return found;
  if (place.kind != ProcPlace::kTask)
    return FailedPrecondition("task " + std::to_string(ref.proc_id.value()) +
                              " runs on a spare node: it has no program to report on");
  *task = place.task;
  return found;
}

void AgentProtocol::OnStandby(const TaskRef& ref, const RegisterInfo& info,
                              std::shared_ptr<TaskChannel> channel) {
  ProcPlace place;
  auto found = FindAgent(ref, &place);
  // A TF worker restarted alone is the lone restart's (same attempt); every
  // other agent back to wait in the job is the restart in place's.
  if (found.ok() && place.kind == ProcPlace::kTask) {
    OpenExperiment& a = **found;
    Changes c;
    const bool alone = lone_.OnStandby(a, place.task, channel, c);
    if (alone) SendAssignments(a, c, place.task);
    core_.Commit(c);
    if (alone) return;
  }
  in_place_.OnStandby(ref, info, std::move(channel), found, place);
}

void AgentProtocol::OnRegister(const TaskRef& ref, const RegisterInfo& info,
                               std::shared_ptr<TaskChannel> channel) {
  // Whoever sends it, and before anything is looked up: the same for every
  // experiment.
  if (std::string problem = RegisterInfoProblem(info); !problem.empty()) {
    channel->Send(RefusedMsg{"the registration is refused: " + problem, true});
    return;
  }
  bool queued;
  {
    MutexLock lock(core_.mu());
    core_.HeardFromAgent(core_.ports().clock.NowMs());
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
    in_place_.OnSpare(a, ref, info, std::move(channel));
    return false;
  }
  const TaskIndex task = place.task;
  Changes c;
  const LiveAttempt::Registration r =
      a.attempt.Register(task, info, channel, core_.ports().clock.NowMs(), c);
  if (r.refused) {
    channel->Send(RefusedMsg{*r.refused, true});
    return false;
  }
  if (!r.again) {
    core_.metrics().Registered();
    if (info.started_after_launch_ms) CountStart(a, *info.started_after_launch_ms);
  }
  if (a.record.state == ExperimentState::kQueued)
    core_.SetState(c, a, ExperimentState::kStarting, "tasks registering");
  if (r.again)
    core_.Event(c, a, EventCode::kReconnected,
                r.name + " reconnected from " + info.address + ":" + std::to_string(info.port));

  if (r.barrier_complete) {
    SendAssignments(a, c);
  } else if (r.assignments_out) {
    // A reconnecting agent already holds its assignment; one that never got
    // it (its stream broke first, or the service restarted) needs it now.
    if (!info.reconnect) SendAssignments(a, c, task);
    if (r.shutdown_again)
      channel->Send(ShutdownMsg{*r.shutdown_again, core_.config().shutdown_grace_ms});
  }
  // The barrier's holds every task's row; the lock need not wait for them.
  return core_.CommitAfterUnlock(c);
}

void AgentProtocol::CountStart(const OpenExperiment& a, int64_t started_after_launch_ms) {
  const bool contained = a.spec.container.enabled();
  const ContainerRuntime runtime = RuntimeOf(a, core_.config());
  const std::string label = contained ? ContainerRuntimeName(runtime) : "none";
  // An agent's figure: one below 0 (a node's clock behind) counts as 0.
  core_.metrics().TaskStarted(
      label, static_cast<double>(std::max<int64_t>(0, started_after_launch_ms)) / 1000.0);
  // The agent is in the task's container: it started with it.
  if (contained && AgentRunsInside(runtime)) core_.metrics().ContainerStarted(label);
}

void AgentProtocol::SendAssignments(OpenExperiment& a, Changes& c,
                                    std::optional<TaskIndex> only_task) {
  const LiveAttempt::AssignmentRound round =
      a.attempt.BeginAssigning(only_task, core_.ports().clock.NowMs(), c);
  // The agent on the host starts each program in a container of its own.
  const ContainerRuntime runtime = RuntimeOf(a, core_.config());
  const bool container_per_program = a.spec.container.enabled() && !AgentRunsInside(runtime);
  for (const auto& [task, channel] : round.channels) {
    AssignmentMsg m = a.AssignmentFor(task, round.cluster, core_.config().heartbeat_interval_ms,
                                      core_.config().shutdown_grace_ms);
    m.container = TaskContainer(a, m.role, m.workdir, core_.config());
    if (container_per_program) core_.metrics().ContainerStarted(ContainerRuntimeName(runtime));
    channel->Send(m);
  }
  if (!round.first) return;
  if (round.rendezvous_ms)
    core_.metrics().RendezvousDone(static_cast<double>(*round.rendezvous_ms) / 1000.0);
  core_.Event(c, a, EventCode::kAssigned, round.summary);
  core_.SetState(c, a, ExperimentState::kRunning, "training");
}

Status AgentProtocol::OnHeartbeat(const TaskRef& ref) {
  MutexLock lock(core_.mu());
  TaskIndex task;
  auto found = FindTask(ref, &task);
  if (!found.ok()) return found.status();
  OpenExperiment& a = **found;
  core_.HeardFromAgent(core_.ports().clock.NowMs());
  Changes c;
  if (std::optional<std::string> back = a.attempt.Heartbeat(task, core_.ports().clock.NowMs(), c)) {
    core_.Event(c, a, EventCode::kHeartbeat, *back + " is back");
    core_.Commit(c);
  }
  return Status::Ok();
}

Status AgentProtocol::OnProgress(const TaskRef& ref, int64_t step, const std::string& path) {
  MutexLock lock(core_.mu());
  TaskIndex task;
  auto found = FindTask(ref, &task);
  if (!found.ok()) return found.status();
  OpenExperiment& a = **found;
  if (!a.CheckpointAt(step, core_.ports().clock.NowMs())) return Status::Ok();
  Changes c;
  // The path is what the program wrote in MODEL_DIR/checkpoint, and others
  // (an admin) read it: one with an unsafe character, or longer than a path
  // can be (PATH_MAX, 4096 bytes: it would be stored with the experiment and
  // in each checkpoint event), is not kept, and the event says why without
  // quoting it. The step still counts.
  std::optional<std::string> unsafe = UnsafeCharacter(path);
  if (unsafe || path.size() > kMaxCheckpointPathBytes) {
    a.record.checkpoint_path.clear();
    c.experiment = a.record;
    core_.Event(
        c, a, EventCode::kCheckpoint,
        "step " + std::to_string(step) + "; its path is ignored: " +
            (unsafe ? "it has " + *unsafe + ", and a checkpoint path must be " + kSafeTextRule
                    : "it is " + std::to_string(path.size()) + " bytes long, at most " +
                          std::to_string(kMaxCheckpointPathBytes) + " are kept"));
    core_.Commit(c);
    return Status::Ok();
  }
  a.record.checkpoint_path = path;
  c.experiment = a.record;
  core_.Event(c, a, EventCode::kCheckpoint, "step " + std::to_string(step) + " (" + path + ")");
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
    TaskIndex task;
    auto found = FindTask(ref, &task);
    if (!found.ok()) return found.status();
    OpenExperiment& a = **found;
    if (std::optional<std::string> refused =
            a.attempt.ScalarsSeen(task, points, core_.ports().clock.NowMs())) {
      dropped += points.size();
      dropped_why = std::move(*refused);
      points.clear();
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
  TaskIndex task;
  auto found = FindTask(ref, &task);
  if (!found.ok() || (*found)->attempt.TakeScalarNotice()) return Status::Ok();
  OpenExperiment& a = **found;
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
  core_.Event(c, a, EventCode::kScalars, why + " (said once per attempt)");
  core_.Commit(c);
  return Status::Ok();
}

Status AgentProtocol::OnExited(const TaskRef& ref, const ExitReport& exit, HeldWrites* held) {
  bool queued = false;
  Status status;
  {
    MutexLock lock(core_.mu());
    status = OnExitedLocked(ref, exit, &queued);
  }
  // In the store before the report is acknowledged, but written after core's
  // lock is released: when a failure's Shutdowns make every rank report at
  // once, the reports queued meanwhile go in one transaction, and the lock
  // is not held across one transaction per rank (at 4,096 ranks, a sixth
  // of the service's CPU in a restart in place). A carrier that holds the
  // write has it written with its other reports' (WriteHeld).
  if (queued && held) held->pending = true;
  if (queued && !held) core_.WriteQueued();
  return status;
}

void AgentProtocol::WriteHeld(HeldWrites& held) {
  if (!std::exchange(held.pending, false)) return;
  core_.WriteQueued();
}

Status AgentProtocol::OnExitedLocked(const TaskRef& ref, const ExitReport& exit, bool* queued) {
  const std::optional<int> exit_code = exit.exit_code;
  const std::optional<int> signal = exit.signal;
  TaskIndex task;
  auto found = FindTask(ref, &task);
  if (!found.ok()) return found.status();
  OpenExperiment& a = **found;
  // A re-sent report.
  if (a.attempt.ExitAlreadyKnown(task)) return Status::Ok();
  // A task that ends after the user cancelled was ended by us (scancel's
  // SIGTERM reaches the program through its agent, which then reports its
  // own exit): reaped, not failed, whatever its exit code. A task told to
  // shut down is reaped only if its agent says so: a report with reaped
  // false was sent for a program that had ended on its own before the
  // Shutdown reached it, and its exit is the one to show.
  const bool reaped = exit.reaped || a.user_cancelled;
  const std::string detail = ExitDetail(exit.detail);
  Changes c;
  if (!reaped && lone_.OnExit(a, task, exit_code, signal, detail, c)) {
    *queued = core_.CommitAfterUnlock(c);
    return Status::Ok();
  }
  const int64_t now = core_.ports().clock.NowMs();
  const LiveAttempt::ExitRecorded r = a.attempt.RecordExit(task, exit, reaped, detail, now, c);
  core_.Event(c, a, reaped ? EventCode::kReaped : EventCode::kExited,
              r.name + " " + HowItEnded(exit_code, signal, detail, a.spec.signal_grace_s));
  if (r.reaping_ms) core_.metrics().ReapingDone(static_cast<double>(*r.reaping_ms) / 1000.0);
  if (r.decided_now) OnOutcome(a, c);
  *queued = core_.CommitAfterUnlock(c);
  return Status::Ok();
}

void AgentProtocol::OnDisconnect(const TaskRef& ref, const TaskChannel* channel) {
  MutexLock lock(core_.mu());
  OpenExperiment* found = core_.Find(ref.experiment_id);
  if (!found || found->attempt.number() != ref.attempt) return;
  const ProcPlace place = found->attempt.Place(ref.proc_id);
  if (place.kind == ProcPlace::kSpare) found->attempt.SpareDisconnected(ref.proc_id, channel);
  if (place.kind == ProcPlace::kTask) found->attempt.Disconnected(place.task, channel);
}

void AgentProtocol::OnOutcome(OpenExperiment& a, Changes& c) {
  const Outcome& o = a.attempt.run->outcome();
  if (o.kind == Outcome::kSucceeded) {
    core_.EndAttempt(a, EndReason::kSucceeded, o.reason, c);
    core_.SetState(c, a, ExperimentState::kSucceeded, o.reason);
    ReapRemaining(a, c, "training succeeded: " + o.reason);
    ReleaseWaitingAgents(a.attempt, "training succeeded");
  } else if (o.kind == Outcome::kFailed) {
    // What the failure means for a restart is decided when the job has
    // ended: a task killed by SIGTERM may be the symptom of a preemption or
    // the time limit, which Slurm's final state tells apart.
    ReapRemaining(a, c, "attempt failed: " + o.reason);
    a.FailureStopping(core_.ports().clock.NowMs());
    c.experiment = a.record;
  }
}

void AgentProtocol::ReapRemaining(OpenExperiment& a, Changes& c, const std::string& reason) {
  const int64_t now = core_.ports().clock.NowMs();
  const int grace_ms = core_.config().shutdown_grace_ms;
  const std::string names = a.attempt.ShutdownAll(
      reason, grace_ms, now + grace_ms + core_.config().reap_timeout_margin_ms, now);
  if (!names.empty()) core_.Event(c, a, EventCode::kReaping, "Shutdown sent to " + names);
}

}  // namespace tfslurm
