// An open experiment in memory, and its current attempt as one value that
// owns its transitions.
// CoreState (core_state.h) keeps every open experiment; the parts of core
// (submission, agent_protocol, slurm_watch) change them under its lock.
//
// Thread safety: plain values; CoreState's lock guards every OpenExperiment.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "service/core/agent_messages.h"
#include "service/core/attempt_run.h"
#include "service/core/ports/slurm.h"
#include "service/core/ports/store.h"
#include "service/core/records.h"
#include "service/core/spec.h"

namespace tfslurm {

// The current attempt: its record, its tasks (as stored, and as its run
// decides them), the channels of the agents connected for them, and its
// timers. An attempt begins by replacing the whole value (Submission::
// SubmitAttempt, CoreState::Load), so nothing of one attempt carries into
// the next. What happens to it (an agent's message, a poll of its job, a
// timer, its end) is one call, which keeps its record, its tasks' records
// and its run in step, queues what is to be written and returns what the
// part still does (events, metrics, messages, Slurm's calls). The
// questions and steps those calls are made of are private, so the parts of
// core cannot spell a decision out again; the layering test counts the
// lines outside these files that call into the attempt or touch a field.
struct LiveAttempt {
  LiveAttempt() = default;
  // Attempt `record.number` of `spec`, every task pending.
  LiveAttempt(const ExperimentSpec& spec, AttemptRecord attempt);

  // Who it is, and what an agent of it must prove.
  int number() const { return record.number; }
  int64_t job_id() const { return record.slurm_job_id; }  // 0 before Slurm took it
  const std::string& job_name() const { return record.job_name; }
  // Attempt `number`'s intent is recorded and it waits to be submitted
  // (`submitting`).
  bool AwaitsSubmission(int number) const {
    return record.number == number && record.state == AttemptState::kSubmitting;
  }
  bool SecretIs(const std::string& sha256_hex) const { return sha256_hex == record.secret_sha256; }
  // Where SLURM_PROCID `proc` runs in this attempt: a task, a spare, or out.
  ProcPlace Place(ProcId proc) const;
  // The same, or why an agent of `proc` has no place in it (out of range,
  // or its node is no longer the attempt's).
  StatusOr<ProcPlace> PlaceAgent(ProcId proc) const;

  // The agents and their tasks' records. Register records task `task`'s
  // agent, registered on `channel` (again, when it had), on its record and
  // the attempt's (running from the first registration), queuing in `c`
  // what is to be written now; or refuses it, changing nothing, when it
  // comes too late (the attempt decided before the task first registered).
  struct Registration {
    std::optional<std::string> refused;  // why, when refused
    bool again = false;                  // the task had registered before (a reconnect)
    bool barrier_complete = false;       // this one completed the barrier
    // The assignments went out before it: a task whose agent never got its
    // own needs it now.
    bool assignments_out = false;
    // A Shutdown went to the task and its exit is not in: its reason, to
    // send again to the agent that reconnected.
    std::optional<std::string> shutdown_again;
    std::string name;  // how events name the task, when `again`
  };
  Registration Register(TaskIndex task, const RegisterInfo& info,
                        std::shared_ptr<TaskChannel> channel, int64_t now, Changes& c);
  // A heartbeat of task `task`'s agent. A task that was lost by silence is
  // back (its record queued in `c`): its name then, for the event.
  std::optional<std::string> Heartbeat(TaskIndex task, int64_t now, Changes& c);
  // Task `task`'s stream `channel` broke (a newer one may have replaced it):
  // a running task's agent may be gone, a waiting one waits no more.
  void Disconnected(TaskIndex task, const TaskChannel* channel);
  // A spare's stream broke: its channel is dropped until it comes back.
  void SpareDisconnected(ProcId proc, const TaskChannel* channel);

  // The rendezvous. BeginAssigning starts a round of assignments: to every
  // registered task whose agent is connected (only `only_task`'s, if
  // given), their records queued in `c`. The first round is the barrier's:
  // training starts at `now` (progress for the stall timeout).
  struct AssignmentRound {
    bool first = false;
    // TF_CONFIG's cluster object, built and compressed once for every
    // assignment; null for PyTorch and JAX, which have none.
    std::shared_ptr<const SharedCluster> cluster;
    std::vector<std::pair<TaskIndex, std::shared_ptr<TaskChannel>>> channels;
    // The first round only: the assigned event's text (how many tasks, and
    // what they were sent), and how long the rendezvous took since the job
    // started, in ms (nullopt if unknown).
    std::string summary;
    std::optional<int64_t> rendezvous_ms;
  };
  AssignmentRound BeginAssigning(std::optional<TaskIndex> only_task, int64_t now, Changes& c);

  // Progress: a checkpoint step, or training scalars of task `task`.
  // ScalarsSeen notes the steps of `points`, or says why they are not kept
  // (only the reporting task's are).
  void CheckpointWritten(int64_t now);
  std::optional<std::string> ScalarsSeen(TaskIndex task, const std::vector<ScalarPoint>& points,
                                         int64_t now);
  // Whether an event already said that some scalars were not kept; marks
  // it said.
  bool TakeScalarNotice();

  // A task's exit (Exited): the run decides, and its record follows,
  // queued in `c`. Already: a report sent again, or a death the lone
  // restart noted.
  bool ExitAlreadyKnown(TaskIndex task) const;
  struct ExitRecorded {
    std::string name;          // how events name the task
    bool decided_now = false;  // this exit decided the attempt's outcome
    // It confirmed the last Shutdown of a reaping: how long that took, in ms.
    std::optional<int64_t> reaping_ms;
  };
  ExitRecorded RecordExit(TaskIndex task, const ExitReport& exit, bool reaped,
                          const std::string& detail, int64_t now, Changes& c);

  // The reaping: Shutdown to every task still running (ShutdownAll, which
  // returns their names for the event, empty if none), its deadline from
  // `now`.
  std::string ShutdownAll(const std::string& reason, int grace_ms, int64_t deadline_ms,
                          int64_t now);

  // A user's cancel, sent again every `every_ms` while the job is there.
  void RepeatCancel(int64_t now, int64_t every_ms, std::vector<int64_t>& cancel_jobs);

  // A task whose node is gone, and why (HeardAt).
  struct GoneTask {
    TaskIndex task;
    std::string why;
  };

  // The timers' decisions (SlurmWatch::CheckTimers): each asks its question
  // above and, when it holds, decides in one step, returning only what the
  // part still does itself (events, the experiment's reason and suspects,
  // the reaping, Slurm's calls after the lock).
  //
  // The barrier: the tasks still missing `timeout_ms` after the job started
  // (BarrierTimedOut), as the reason names them (at most 20), and the first
  // of them, whose container the part looks at (nullopt while the barrier
  // holds). FailAtBarrier fails the attempt by it: as startup_error when
  // `container` (the runtime's words) says that task's container did not
  // start, a failure that repeats at every start, else as start_failed;
  // its job is cancelled, once. The reason.
  struct BarrierMiss {
    std::string why;
    std::optional<TaskIndex> first;
  };
  std::optional<BarrierMiss> MissedBarrier(int64_t now, int64_t timeout_ms) const;
  std::string FailAtBarrier(const BarrierMiss& miss, const std::optional<std::string>& container,
                            std::vector<int64_t>& cancel_jobs);
  // A stall (StalledFor `stall_ms`) fails the attempt as stalled, its
  // reason saying the last step (`checkpoint_step`, or a scalar's) and
  // which tasks still heartbeat within `silent_after_ms`. The tasks that
  // stopped, all on one node while others still heartbeat, point at that
  // node (suspect_node, and why). nullopt: no stall.
  struct Stall {
    std::string why;
    std::optional<std::string> suspect_node;
    std::string suspect_why;
  };
  std::optional<Stall> FailStalled(int64_t now, int64_t stall_ms, int64_t silent_after_ms,
                                   std::optional<int64_t> checkpoint_step);
  // The reaping's deadline passed (ReapOverdue): the step is ended through
  // Slurm (kill_steps, and the event naming the tasks that did not confirm
  // their Shutdown; both empty when every task did), the restart in place
  // given up when the job was to host it (`in_allocation`), and a failed
  // attempt's job, with nothing left to do, cancelled once. Nothing at all
  // when every task confirmed and the job may host the next attempt (no
  // user's cancel, not given up): the restart in place decides then, not
  // the deadline.
  struct StepEnd {
    std::string event;
    std::vector<int64_t> kill_steps;
  };
  StepEnd EndOverdueStep(int64_t now, bool in_allocation, bool user_cancelled,
                         std::vector<int64_t>& cancel_jobs);
  // What Slurm is to do once a restart in place was checked: a given up
  // one (`given_up`: an agent did not come back to wait) cancels the job,
  // once; one that began, at this check or at an agent's standby, shrinks
  // the job when it left out nodes Slurm still counts (TakeShrink).
  void AfterInPlaceCheck(bool given_up, std::vector<int64_t>& cancel_jobs,
                         std::vector<std::pair<int64_t, std::string>>& shrink_jobs);
  // What the service heard of its agents by `now`: the running tasks
  // silent past their limit become lost (MarkSilentLost; not while `deaf`,
  // when the silence is the service's own), each with its event's text;
  // every heartbeat not written yet is queued (FlushHeartbeats); then the
  // tasks whose node is gone (TasksGone), each for EndGoneTask. One step,
  // so a task is lost by its silence before it is gone by it.
  struct Heard {
    std::vector<std::string> lost;
    std::vector<GoneTask> gone;
  };
  Heard HeardAt(int64_t now, bool deaf, int64_t lost_after_ms, int64_t vanished_after_ms,
                int64_t gone_after_ms, Changes& c);
  // Task `gone.task` ended with its node (TaskGone, queued in `c`; `event`
  // says so). It fails an undecided attempt as node_fail (`failed`: the
  // experiment's reason, empty when the attempt was decided before); a
  // decided one is blamed on the node (BlameNode). One task at a time: the
  // part reaps the others after the one that failed the attempt.
  struct LostTask {
    std::string event;
    std::string failed;
  };
  LostTask EndGoneTask(const GoneTask& gone, int64_t now, Changes& c);
  // A restart is due: the number of the attempt that follows this one,
  // once this one has ended (its job has left Slurm), else nullopt.
  std::optional<int> Successor() const {
    if (record.state != AttemptState::kEnded) return std::nullopt;
    return record.number + 1;
  }

  // Its job, as Slurm's polls find it (SlurmWatch). The attempt's state,
  // its outcome so far, and whether its end is recorded.
  AttemptState state() const { return record.state; }
  const Outcome& outcome() const { return run->outcome(); }
  bool EndRecorded() const { return record.end_reason.has_value(); }
  // A job of its name found for an attempt still `submitting`: adopted.
  void AdoptJob(int64_t job_id, int64_t known_seq, Changes& c);
  // How an attempt whose job left Slurm ended: its tasks' word, the
  // service's decision, or what the job's disappearance says.
  struct GoneEnd {
    EndReason reason;
    std::string why;
    std::string event;
  };
  // It ends as `reason`, because `why`; with `ended_at`, now (its job
  // gone, or never submitted); queued in `c`. CoreState::EndAttempt calls
  // it and counts the end.
  void End(EndReason reason, const std::string& why, std::optional<int64_t> ended_at, Changes& c);
  // A cancel of its job was sent at `now`; its job id.
  int64_t CancelSent(int64_t now);
  // A submission in doubt is looked up in Slurm from `at_ms` on.
  void ReconcileAt(int64_t at_ms) { reconcile_at_ms = at_ms; }
  // The one node of every lost task, when they were all on one.
  std::optional<std::string> LoneLostNode() const;
  // How its ended job decides the attempt's end, where the attempt can
  // tell: success decided by the tasks stands whatever the reaping did to
  // the job; then Slurm's word on a time limit, a node failure (the job's
  // nodes suspect, if down: suspects_why) or a preemption, which wins over
  // the tasks' exits (a SIGTERM may be its symptom); then the service's
  // decision, the tasks' failure, or a job that completed. nullopt: the
  // part judges from what else it knows (a cancel outside tfslurm, out of
  // memory, a start that failed, the exit code).
  struct JobEnd {
    EndReason reason = EndReason::kUnknown;
    std::string why;
    std::string suspects_why;
  };
  // A poll's news of its job, taken in (SlurmWatch::OnJobUpdate): nothing
  // to do (ended, no job yet, or submitted after the poll began: absent
  // from it, not gone); a submission in doubt to look up (kReconcile, due
  // by `poll_ms`, when the poll began); its job gone from Slurm (the
  // attempt ended, `gone` says how); its job there (NoteJob: `started` now,
  // the record queued in `c` when it changed); or its job ended (its
  // record, with `exit_code`, and its tasks without an exit queued in `c`;
  // `end` as EndedAs says). `job` is its job in the poll, if found.
  struct JobNews {
    enum Kind { kNothing, kReconcile, kGone, kThere, kEnded } kind = kNothing;
    const JobInfo* job = nullptr;
    bool started = false;
    GoneEnd gone;
    int exit_code = 0;  // 128 + the signal that killed it, if one did
    std::optional<JobEnd> end;
  };
  JobNews Polled(const std::unordered_map<int64_t, const JobInfo*>& by_id, int64_t poll_seq,
                 int64_t poll_ms, int64_t now, Changes& c);
  // An attempt still `submitting` looked up in `jobs` by name: the newest
  // job of its name is adopted (its sequence from `next_seq`, asked then
  // only; cancelled at once after a user's cancel); without one, a
  // cancelled experiment's attempt ends unsubmitted, any other is to be
  // submitted (again). With the event's text.
  struct Reconciled {
    enum Kind { kAdopted, kNotSubmitted, kSubmit } kind;
    std::string event;
  };
  Reconciled Reconcile(const std::vector<JobInfo>& jobs, bool user_cancelled,
                       const std::function<int64_t()>& next_seq, int64_t now, Changes& c,
                       std::vector<int64_t>& cancel_jobs);
  // What a restarted service finds of it (SlurmWatch::Recover): a
  // submission in doubt (`submitting`: looked up in Slurm by name); an end
  // that no next attempt followed (`unfollowed`: why, empty if it has not
  // ended; the service stopped between them); a failure decided before the
  // restart while it runs (`reap`: why its tasks still running are told to
  // stop when their agents come back, empty if none).
  struct Recovery {
    bool submitting = false;
    std::string unfollowed;
    std::string reap;
  };
  Recovery Recovered() const;

  // The restart in place (InPlaceRestart). The job's node slots; the spare
  // nodes whose every agent waits in the job.
  const NodeSlots& node_slots() const { return record.node_slots; }
  std::vector<int> ReadySpares() const;
  // A restart in place is given up (`why`: no next attempt runs in this
  // job).
  void GiveUpInPlace(const std::string& why) { in_place_given_up = why; }
  // An agent of an earlier attempt of this job, back to wait, that missed
  // this attempt's NextAttempt: this attempt runs in place in its job
  // (`job_id`), the agent holds the job's secret, and its proc has not
  // come back for this attempt. This attempt's number then, to tell it.
  std::optional<int> MissedNextAttempt(const TaskRef& ref, int64_t job_id) const;
  // Task `task`'s agent is back to wait in the job for a next attempt, on
  // `channel`: kept waiting when its program has ended while the attempt
  // runs (and the experiment MayRestartInPlace, which the caller asks);
  // false, keeping nothing, when it may not.
  bool StandBy(TaskIndex task, const std::shared_ptr<TaskChannel>& channel);
  // A spare's agent (SLURM_PROCID `proc` on `node`) registered, on
  // `channel`: noted. Released when the experiment may not restart in
  // place (`may_wait` false); told its part when it registered to start
  // (not `standby`); else it waits in the job, its channel kept until it
  // breaks.
  enum class SpareAnswer { kReleased, kToldItsPart, kWaits };
  SpareAnswer SpareRegistered(ProcId proc, const std::string& node, bool may_wait, bool standby,
                              const std::shared_ptr<TaskChannel>& channel);

  // A TF worker restarted alone (LoneRestart). RestartAlone: task `task`'s
  // program died; whether it starts again alone (AttemptRun::
  // RestartsAloneNow), within `cap` lone restarts per attempt. When it
  // does, its death is on its record, which stays running (queued in `c`).
  struct LoneDeath {
    enum Kind { kNotAlone, kCapped, kRestarts } kind = kNotAlone;
    int so_far = 0;       // this attempt's lone restarts before this death
    std::string name;     // how events name the task
    std::string role;     // its role, for the metric
    std::string address;  // where it runs, again
  };
  LoneDeath RestartAlone(TaskIndex task, std::optional<int> exit_code, std::optional<int> signal,
                         const std::string& detail, int cap, Changes& c);
  // LoneAgentBack: task `task`'s agent is back in standby: it restarts
  // (kRestarts, on `channel`), or the attempt was decided meanwhile and its
  // death is its exit (kEnded, queued in `c`; `ended` says so for the
  // event), or it was not restarting alone.
  enum class LoneBack { kNotAlone, kRestarts, kEnded };
  struct LoneReturn {
    LoneBack kind = LoneBack::kNotAlone;
    std::string ended;
  };
  LoneReturn LoneAgentBack(TaskIndex task, const std::shared_ptr<TaskChannel>& channel,
                           bool user_cancelled, int64_t now, Changes& c);

 private:
  // The questions and steps its one-call methods above are made of: the
  // parts of core ask the attempt through those, never these.
  //
  // How events name task `task`.
  std::string TaskNameOf(TaskIndex task) const;
  // The deadline of the reaping passed and the step was not ended yet.
  bool ReapOverdue(int64_t now) const;
  // The Slurm job ids whose step 0 is this attempt's (a heterogeneous job's
  // step has a part in each component's record).
  std::vector<int64_t> StepJobIds() const;
  // Its step was ended through Slurm: no next attempt runs in this job
  // (`why`, unless a reason was already given).
  void StepKilled(const std::string& why);
  // The service decides: the attempt fails with `outcome`, as end reason
  // `reason` (the job's CANCELLED state is then not a user's scancel).
  void Fail(const Outcome& outcome, EndReason reason);
  // Cancels the job once (queued in `cancel_jobs`), unless already done.
  void CancelJobOnce(std::vector<int64_t>& cancel_jobs);
  // A restart in place left nodes out: the job to shrink and to which
  // nodes, once (nullopt when there is nothing to do).
  std::optional<std::pair<int64_t, std::string>> TakeShrink();
  // The timers' questions. BarrierTimedOut: tasks are still missing
  // `timeout_ms` after the job started. StalledFor: training runs and has
  // made no step for longer than `stall_ms` (0: never); then how long.
  bool BarrierTimedOut(int64_t now, int64_t timeout_ms) const;
  std::optional<int64_t> StalledFor(int64_t now, int64_t stall_ms) const;
  // The latest step seen: the experiment's checkpoint's or a scalar's.
  std::optional<int64_t> LastStep(std::optional<int64_t> checkpoint_step) const;
  // Which tasks still heartbeat within `silent_after_ms` (their names, at
  // most 20, and how many), and the nodes of those that stopped.
  struct Liveness {
    std::string alive;
    int alive_count = 0;
    std::set<std::string> silent_nodes;
  };
  Liveness LivenessAt(int64_t now, int64_t silent_after_ms) const;
  // Tasks whose node is gone, each with why: Slurm took the node out of
  // the job, or it is silent past `gone_after_ms` (never while `deaf`: the
  // service hears no agent at all). Only while the attempt runs.
  std::vector<GoneTask> TasksGone(int64_t now, bool deaf, int64_t gone_after_ms) const;
  // Task `task` ended with its node (SIGKILL, `why`), its record queued.
  void TaskGone(TaskIndex task, const std::string& why, int64_t now, Changes& c);
  // The peers a gone node left often fail first (a collective's broken
  // connection, counted retryable): the node is the cause, and its class
  // is the attempt's.
  void BlameNode();
  // Running tasks silent past their limit become lost (queued in `c`):
  // each with how long it was silent. Then FlushHeartbeats queues every
  // heartbeat not written yet.
  std::vector<std::pair<TaskIndex, int64_t>> MarkSilentLost(int64_t now, int64_t lost_after_ms,
                                                            int64_t vanished_after_ms, Changes& c);
  void FlushHeartbeats(Changes& c);
  // Its job in a poll's jobs by id: the one with its id and its name (ids
  // start again when a slurmctld loses its state), or null.
  const JobInfo* FindJob(const std::unordered_map<int64_t, const JobInfo*>& by_id) const;
  // The newest job of its name, for an attempt whose submission is in
  // doubt; null if none. ReconcileDue: such an attempt is to be looked up.
  const JobInfo* NewestJobNamed(const std::vector<JobInfo>& jobs) const;
  bool ReconcileDue(int64_t now) const { return now >= reconcile_at_ms; }
  // The job was named to this process after the poll `poll_seq` began, so
  // that poll could not see it.
  bool KnownAfter(int64_t poll_seq) const { return job_known_seq > poll_seq; }
  // A poll's view of its job: its state, nodes, components, end time, and
  // its start (the tasks' nodes named then; `started` says so); true when
  // the record changed.
  bool NoteJob(const JobInfo& job, int64_t now, bool* started);
  // The job is cancelled now (queued in `cancel_jobs`).
  void CancelJob(int64_t now, std::vector<int64_t>& cancel_jobs);
  // It ends: now (EndNow), its job gone from Slurm (JobVanished), or its
  // job finished with `exit_code` (JobFinished); the record queued in `c`.
  void EndNow(int64_t now, Changes& c);
  void JobVanished(int64_t now, Changes& c);
  void JobFinished(int64_t now, int exit_code, Changes& c);
  // How its job's leaving Slurm ended it (GoneEnd).
  GoneEnd WhyJobGone() const;
  // Tasks without an exit when the job ended: reaped (a Shutdown went to
  // them) or lost, queued in `c`.
  void TasksEndWithJob(Changes& c);
  // Its record, as it is now, queued in `c`.
  void QueueRecord(Changes& c) const { c.attempts.push_back(record); }
  // How its ended job decides its end, where it can tell (JobEnd).
  std::optional<JobEnd> EndedAs(const JobInfo& job) const;
  // A restart in place was given up (GiveUpInPlace).
  bool GaveUpInPlace() const { return !in_place_given_up.empty(); }

 public:
  // Its state. Public still: tests and CoreState::Load build attempts
  // field by field.
  AttemptRecord record;
  std::unique_ptr<AttemptRun> run;
  std::vector<TaskRecord> tasks;
  std::map<TaskIndex, std::shared_ptr<TaskChannel>> channels;
  std::set<TaskIndex> heartbeat_dirty;  // tasks whose heartbeat is not persisted yet
  int64_t job_started_ms = 0;
  int64_t reap_deadline_ms = 0;
  int64_t reap_started_ms = 0;  // when the first Shutdown of the reaping went out
  // When this attempt last made progress: its assignments (training
  // starts), then each new checkpoint step. progress.stall_timeout_s runs
  // from here.
  int64_t last_progress_ms = 0;
  // The largest step of this attempt's training scalars: a larger one is
  // progress too.
  std::optional<int64_t> max_scalar_step;
  // An event has said this attempt's scalars were not all kept (the
  // agent's reports are not refused: that would stop the program).
  bool scalar_notice_given = false;
  std::set<std::string> lost_nodes;  // nodes of this attempt's tasks that went lost
  bool step_killed = false;
  // A heterogeneous job's component job ids, from the last poll (empty for a
  // plain job): ending its step means signalling each.
  std::vector<int64_t> component_job_ids;
  bool job_cancel_sent = false;
  // Set when the service itself ended the attempt (barrier timeout, stall),
  // so the job's CANCELLED state is not taken for a user's scancel.
  std::optional<EndReason> decided_reason;
  int64_t cancel_sent_at_ms = 0;
  bool start_seen_in_slurm = false;
  // This process has seen the attempt's job in Slurm (or Slurm took it from
  // this process). False after a restart of the service until a poll finds it.
  bool job_seen = false;
  // An attempt still `submitting` (its submission was interrupted, or Slurm
  // did not answer) is looked up in Slurm by name, then submitted, at the
  // first poll from this time on.
  int64_t reconcile_at_ms = 0;
  // When Slurm's answer named this attempt's job, in submission order: a
  // poll whose snapshot began before it cannot have seen the job.
  int64_t job_known_seq = 0;
  // When the job reaches its time limit (Slurm's end_time for a running
  // job), from the last poll; 0 when unknown.
  int64_t job_end_ms = 0;
  // The job's state at the last poll (kUnknown before the first).
  JobState job_state = JobState::kUnknown;
  // When a restart in place first found this attempt failed: its agents
  // have until a deadline from then to come back and wait in the job.
  int64_t failed_at_ms = 0;
  // Why this attempt's successor cannot start in its job, once that was
  // decided before the job ended (an agent did not come back to wait).
  std::string in_place_given_up;
  // The tasks below this index were standing by when a standby last looked
  // (SlurmWatch::OnStandby), so that the one completing the set is found
  // without a scan of every task at every standby.
  int standby_scan_from = 0;
  // The agents of the job's spare nodes (record.node_slots), by
  // SLURM_PROCID: their node's name, and the channel core holds while one
  // waits in the job (null until it does, and after its stream broke).
  struct SpareAgent {
    std::string node;
    std::shared_ptr<TaskChannel> channel;
  };
  std::map<ProcId, SpareAgent> spare_agents;
  // The job's nodes, as the last poll named them: with spares the job is
  // submitted --no-kill, and Slurm takes a failed node out of its list
  // (excise_node_from_job) while the job runs on. Empty before a poll.
  std::vector<std::string> job_node_names;
  // The nodes the job is to keep, comma-separated, when a restart in place
  // left some of its nodes out that Slurm still counts in it (a node cut
  // off from the service only): the next Tick asks Slurm to shrink the job
  // to these (SlurmClient::ShrinkJob), which ends the job's processes on
  // the others. Empty: nothing to do.
  std::string shrink_to;
};

// Bad-node memory: the nodes an attempt's end points at, for the next
// automatic attempt to exclude (Submission::ExcludeSuspects).
struct SuspectNodes {
  std::vector<std::string> nodes;
  // Only those of `nodes` Slurm reports unavailable then (a NODE_FAIL names
  // the job's nodes, not the one that failed).
  bool only_if_down = false;
  std::string why;
};

struct OpenExperiment {
  ExperimentRecord record;
  ExperimentSpec spec;
  LiveAttempt attempt;
  bool user_cancelled = false;
  SuspectNodes suspects;
  // Automatic submissions that failed in a row, for the retry backoff.
  int submit_failures = 0;
  // The uid the owner's jobs run as, looked up once (Accounts) when an
  // agent first proves its uid (CoreConfig::agents_prove_uid).
  std::optional<uint32_t> job_uid;

  // Whether the current attempt may still be followed by a next attempt in
  // its own job (restart.in_allocation): nothing has ended it, neither a
  // user's cancel, nor its end recorded or decided by the service (the
  // job's cancel sent, its step killed), nor its success, nor a restart in
  // place given up. The one rule every in-place decision asks (a task's
  // agent back to wait in the job, a spare's, InPlaceRestart::Check at each
  // Tick), so a new way for an attempt to end is added here alone.
  bool MayRestartInPlace() const;
  // The SLURM_PROCID that runs task `task` in the current attempt: its own
  // index, unless a spare node took its node's place (node_slots.h).
  ProcId ProcOfTask(TaskIndex task) const { return attempt.node_slots().ProcOfTask(task); }
  // Task `task`'s Assignment in the current attempt: its role, the
  // program's command, workdir and environment, what its agent reports.
  AssignmentMsg AssignmentFor(TaskIndex task, std::shared_ptr<const SharedCluster> cluster,
                              int heartbeat_interval_ms, int shutdown_grace_ms) const;
  // A user cancels it: no attempt follows, and the current one is decided
  // (failed, "cancelled"), so that its tasks' exits from now on are reaped.
  void UserCancels();
  // A checkpoint of step `step` was written at `now`: the experiment's
  // record (not yet queued) and the attempt's progress. False, changing
  // nothing, when that step is the one already known.
  bool CheckpointAt(int64_t step, int64_t now);
  // The current attempt failed (its outcome), and its tasks are stopped:
  // the experiment's reason says so until the job's end classifies the
  // failure (record not yet queued). A SIGTERM that tfslurm did not send is
  // how Slurm ends a job at its time limit, at a preemption or at a
  // scancel: until Slurm says which, it is not called a failure.
  void FailureStopping(int64_t now);
  // The answer to a resume or a delete of an experiment that has ended
  // while its last job has not yet left Slurm: retry soon.
  Status JobStillFinishing() const;
  // Whether core is done with it: final, and its last attempt ended (its
  // job has left Slurm). CoreState::CloseEnded forgets it then.
  bool Over() const;
  // Whether no task of the current attempt has registered (every one still
  // pending): a job that ended so never ran the program.
  bool NoAgentRegistered() const;
};

// Whether Slurm's last poll of the attempt's running job left `node` out:
// a job with spare nodes runs on without a failed node (--no-kill).
bool NodeLeftJob(const LiveAttempt& attempt, const std::string& node);

}  // namespace tfslurm
