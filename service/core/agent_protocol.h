// The agent protocol as the lifecycle runs it: registration and the barrier,
// the assignments (role, index, TF_CONFIG), heartbeats, checkpoint progress,
// exit reports, disconnects, and reaping the tasks left when an attempt is
// decided. Replies go to the agents through their TaskChannels.
//
// Thread safety: the On* methods may be called from any thread and take the
// lifecycle's lock themselves; ReapRemaining needs it held.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "service/core/agent_messages.h"
#include "service/core/core_state.h"
#include "service/core/in_place_restart.h"
#include "service/core/lone_restart.h"

namespace tfslurm {

class AgentProtocol {
 public:
  explicit AgentProtocol(CoreState& lifecycle)
      : core_(lifecycle), lone_(lifecycle), in_place_(lifecycle) {}

  // Attaches `channel` for the task; the reply (Assignment or Refused)
  // arrives through it, now or when the barrier completes. What the
  // registration changed is in the store when this returns; the barrier's
  // commit (every task's row) is written after core's lock is released.
  void OnRegister(const TaskRef& ref, const RegisterInfo& info,
                  std::shared_ptr<TaskChannel> channel) ABSL_LOCKS_EXCLUDED(core_.mu());
  Status OnHeartbeat(const TaskRef& ref) ABSL_LOCKS_EXCLUDED(core_.mu());
  Status OnProgress(const TaskRef& ref, int64_t step, const std::string& path)
      ABSL_LOCKS_EXCLUDED(core_.mu());
  // Keeps the reporting task's training scalars (ports/store.h,
  // AppendScalars); a larger step than this attempt's so far is progress
  // (progress.stall_timeout_s). Points that cannot be kept are dropped and
  // an event says so once per attempt: the report itself is never refused,
  // since a refusal stops the agent's program.
  Status OnScalars(const TaskRef& ref, std::vector<ScalarPoint> points)
      ABSL_LOCKS_EXCLUDED(core_.mu());
  // `detail` (the agent's word on why, e.g. "cannot run 'x': No such file or
  // directory") is kept with the task, bounded and without control
  // characters, and joins the exit in the event and the attempt's reason.
  // An exit judged a start-up failure (ExitReport::at_startup) before the
  // attempt's first step (a new checkpoint or scalar step) ends it as
  // startup_error.
  // `held`: as Agents::OnExited.
  Status OnExited(const TaskRef& ref, const ExitReport& exit, HeldWrites* held)
      ABSL_LOCKS_EXCLUDED(core_.mu());
  void WriteHeld(HeldWrites& held) ABSL_LOCKS_EXCLUDED(core_.mu());
  // The stream of `channel` broke; the agent may reconnect.
  void OnDisconnect(const TaskRef& ref, const TaskChannel* channel) ABSL_LOCKS_EXCLUDED(core_.mu());

  // Sends Shutdown to every task still running and sets the deadline after
  // which the Slurm watch ends the step itself.
  void ReapRemaining(OpenExperiment& e, Changes& c, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());

 private:
  // An agent whose program ended is back, to wait in the job: a TF task
  // restarted alone (lone_restart.h), or the restart in place's
  // (InPlaceRestart::OnStandby).
  void OnStandby(const TaskRef& ref, const RegisterInfo& info, std::shared_ptr<TaskChannel> channel)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // A registration for the current attempt: recorded, and the barrier's
  // Assignments sent when it is the last; its changes are queued
  // (CoreState::CommitAfterUnlock). Returns whether it queued any.
  bool RegisterTask(const TaskRef& ref, const RegisterInfo& info,
                    std::shared_ptr<TaskChannel> channel) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // An exit report: recorded, its changes queued as RegisterTask's (sets
  // `queued` when it queued any).
  Status OnExitedLocked(const TaskRef& ref, const ExitReport& exit, bool* queued)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // Checks a TaskRef: first that its secret is the secret of its attempt
  // (anything else, a missing experiment included, is one NotFound of the
  // same bytes), then that the attempt is current; and places its
  // SLURM_PROCID in the attempt's nodes (node_slots.h): a task, a spare, or
  // out of range.
  StatusOr<OpenExperiment*> FindAgent(const TaskRef& ref, ProcPlace* place)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // Whether `ref.secret` is the secret of attempt `ref.attempt` of its
  // experiment (`open`, when in memory; else the stored attempt).
  bool HoldsSecretOf(const TaskRef& ref, const OpenExperiment* open)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // Site mode: the uid munged vouched for must be the one the job runs as
  // (logged when the secret was right but the uid is not).
  Status CheckProvenUid(OpenExperiment& a, const TaskRef& ref)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // FindAgent for the agent of a task: the task's index in *task.
  StatusOr<OpenExperiment*> FindTask(const TaskRef& ref, TaskIndex* task)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // /metrics: a task's agent started (RegisterInfo.started_after_launch_ms),
  // and under pyxis and OCI its container with it.
  void CountStart(const OpenExperiment& a, int64_t started_after_launch_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // To every connected task, or only to `only_task`.
  void SendAssignments(OpenExperiment& e, Changes& c,
                       std::optional<TaskIndex> only_task = std::nullopt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // The attempt has just been decided by the tasks' exits.
  void OnOutcome(OpenExperiment& e, Changes& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());

  CoreState& core_;
  LoneRestart lone_;
  InPlaceRestart in_place_;
};

}  // namespace tfslurm
