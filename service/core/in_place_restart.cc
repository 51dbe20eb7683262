#include "service/core/in_place_restart.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "service/core/restart_policy.h"
#include "service/core/wording.h"

namespace tfslurm {
namespace {

std::string JobText(const AttemptRecord& attempt) {
  return "Slurm job " + std::to_string(attempt.slurm_job_id);
}

// The tasks whose agents do not wait in the job, named (at most five).
std::string Absent(const AttemptRun& run, int* count) {
  std::string names;
  *count = 0;
  for (TaskIndex i : run.indices()) {
    if (run.task(i).standing_by()) continue;
    if (++*count <= 5) names += (names.empty() ? "" : ", ") + TaskName(run.task(i), i);
  }
  if (*count > 5) names += ", ...";
  return names;
}

// What the next attempt in place does with the job's nodes: those whose
// agents do not wait (gone with their node) or that the bad-node memory
// excludes leave it, and ready spares take their place, lowest first.
struct NodePlan {
  std::vector<int> out;              // the job's nodes that leave, in slot order
  std::optional<NodeSlots> slots;    // after the spares took their place; nullopt: too few
  std::string swaps;                 // "node3 (a spare) takes node2's place", for the event
  std::map<int, std::string> names;  // job node -> name, of the nodes above
};

NodePlan PlanNodes(const OpenExperiment& a) {
  const LiveAttempt& at = a.attempt;
  const AttemptRun& run = *at.run;
  NodePlan plan;
  const int per_node = at.node_slots().tasks_per_node();
  std::map<int, int> slot_of;  // job node -> the slot it runs, of the nodes that leave
  for (TaskIndex i : run.indices()) {
    const int node = at.node_slots().JobNodeOfTask(i);
    if (!run.task(i).node.empty()) plan.names[node] = run.task(i).node;
    const bool suspect =
        !a.suspects.only_if_down && std::find(a.suspects.nodes.begin(), a.suspects.nodes.end(),
                                              run.task(i).node) != a.suspects.nodes.end();
    if ((!run.task(i).standing_by() || suspect) && !slot_of.contains(node)) {
      slot_of[node] = i.value() / per_node;
      plan.out.push_back(node);
    }
  }
  std::sort(plan.out.begin(), plan.out.end());
  plan.slots = at.node_slots().Replacing(plan.out, at.ReadySpares());
  if (!plan.slots) return plan;
  for (int node : plan.out) {
    // The spare that runs the slot `node` ran.
    const int spare = plan.slots->JobNodeOfSlot(slot_of[node]);
    auto agent = at.spare_agents.find(ProcId(spare * per_node));
    const std::string spare_name =
        agent != at.spare_agents.end() ? agent->second.node : "node " + std::to_string(spare);
    plan.names[spare] = spare_name;
    plan.swaps += (plan.swaps.empty() ? "" : ", ") + spare_name + " (a spare) takes " +
                  plan.names[node] + "'s place";
  }
  return plan;
}

// Nodes that leave a job's attempts while Slurm still counts them in the
// job (one cut off from the service only: its slurmd answers slurmctld)
// leave the Slurm job too, so that their slurmd ends what the old attempt
// left running there (SlurmClient::ShrinkJob).
struct Shrink {
  std::string keep;  // the job's other nodes, comma-separated; empty: no shrink
  std::string note;  // for the restart's event
};

// `job_nodes`: the job's nodes as Slurm last named them (a node it took out
// already is not among them); `leaving`: the names of those that leave.
Shrink ShrinkFor(const std::vector<std::string>& job_nodes, const std::set<std::string>& leaving,
                 const std::string& job_text) {
  Shrink shrink;
  std::string gone;
  for (const std::string& node : job_nodes) {
    std::string& list = leaving.contains(node) ? gone : shrink.keep;
    list += (list.empty() ? "" : ",") + node;
  }
  if (gone.empty() || shrink.keep.empty()) return {};
  shrink.note = "; " + gone + " taken out of " + job_text + ", whose processes there Slurm ends";
  return shrink;
}

}  // namespace

std::string AttemptLogDir(const std::string& output_root, const std::string& id, int number) {
  return output_root + "/" + id + "/logs/attempt-" + std::to_string(number);
}

InPlaceCheck InPlaceRestart::Check(OpenExperiment& a, int64_t now) {
  LiveAttempt& at = a.attempt;
  const AttemptRun& run = *at.run;
  if (!a.MayRestartInPlace() || at.record.state != AttemptState::kRunning ||
      !run.assignments_sent() || run.outcome().kind != Outcome::kFailed)
    return {};
  if (!at.failed_at_ms) at.failed_at_ms = now;
  // Long enough for a Shutdown's grace, the reaping's margin and an agent
  // that reconnects: its stream broke just as its program ended.
  const CoreConfig& config = core_.config();
  const int64_t wait =
      config.shutdown_grace_ms + config.reap_timeout_margin_ms + config.reconnect_window_ms;
  int absent = 0;
  std::string names = Absent(run, &absent);
  bool spares_cover = false;
  if (absent > 0 && !at.record.node_slots.spares().empty()) {
    // Agents that Slurm or their silence says are gone with their node
    // need not be waited for: spares take their nodes' place.
    bool all_gone = true;
    for (TaskIndex i : run.indices())
      if (!run.task(i).standing_by())
        all_gone = all_gone && (at.tasks[i.value()].state == TaskState::kLost ||
                                NodeLeftJob(at, run.task(i).node));
    if (all_gone || now - at.failed_at_ms > wait) {
      if (!PlanNodes(a).slots)
        return {InPlaceCheck::kGiveUp, EndReason::kRetryableExit,
                std::to_string(absent) + " of " + std::to_string(run.size()) + " agents (" + names +
                    ") are gone from " + JobText(at.record) +
                    ", and too few spare nodes wait in it to take their nodes' place"};
      spares_cover = true;
    }
  }
  if (absent == 0 || spares_cover) {
    if (run.outcome().by_sigterm && !at.decided_reason)
      return {InPlaceCheck::kLetTheJobEnd, EndReason::kRetryableExit,
              "the failure was a SIGTERM, which Slurm sends at a time limit, a preemption or a "
              "cancel: the job's end decides"};
    EndReason reason = at.decided_reason ? *at.decided_reason : run.outcome().failure;
    // A failure the policy does not restart needs no place to restart in:
    // it ends now, and no event speaks of a restart that will not come.
    const bool restarts =
        DecideAfterAttempt(a.spec.restart, reason, "", at.record.number, a.record.restarts)
            .action == AfterAttempt::kRestart;
    if (restarts)
      if (std::optional<std::string> obstacle = Obstacle(a, now))
        return {InPlaceCheck::kLetTheJobEnd, EndReason::kRetryableExit, *obstacle};
    return {InPlaceCheck::kReady, reason, run.outcome().reason};
  }
  if (now - at.failed_at_ms <= wait) return {InPlaceCheck::kWaiting, EndReason::kRetryableExit, ""};
  return {InPlaceCheck::kGiveUp, EndReason::kRetryableExit,
          std::to_string(absent) + " of " + std::to_string(run.size()) + " agents (" + names +
              ") did not come back to wait in " + JobText(at.record) + " within " + Seconds(wait) +
              " of the attempt's failure"};
}

std::optional<std::string> InPlaceRestart::Obstacle(const OpenExperiment& a, int64_t now) const {
  const LiveAttempt& at = a.attempt;
  // Once the job has ended, its end is the reason (a SIGTERM that left the
  // decision to it turned out to be a preemption, say).
  if (at.record.state != AttemptState::kRunning)
    return JobText(at.record) + " has ended (" + at.record.slurm_state + ")";
  if (!at.in_place_given_up.empty()) return at.in_place_given_up;
  if (at.job_state != JobState::kRunning && at.job_state != JobState::kUnknown)
    return JobText(at.record) + " is " + JobStateName(at.job_state) + ", not running";
  int absent = 0;
  std::string names = Absent(*at.run, &absent);
  const bool has_spares = !at.record.node_slots.spares().empty();
  const NodePlan plan = PlanNodes(a);
  if (absent > 0 && !plan.slots)
    return std::to_string(absent) + " agents (" + names + ") are not waiting in the job" +
           (has_spares ? ", and too few spare nodes wait in it to take their nodes' place" : "");
  if (!plan.slots) {
    std::string nodes;
    for (const std::string& n : a.suspects.nodes) nodes += (nodes.empty() ? "" : ",") + n;
    return "the next attempt is to exclude " + nodes + " (" + a.suspects.why + "), and " +
           (has_spares ? "no spare node waits in the job to take its place"
                       : "the job has no spare node");
  }
  if (at.job_end_ms > 0) {
    // The next attempt should reach a checkpoint before the time limit's
    // warning: it may come checkpoint.signal_grace_s + 30 s early.
    const int64_t need = (int64_t{a.spec.signal_grace_s} + 60) * 1000;
    const int64_t left = at.job_end_ms - now;
    if (left < need)
      return "only " + Seconds(std::max<int64_t>(left, 0)) + " left before " + JobText(at.record) +
             "'s time limit; an attempt in place needs at least " + Seconds(need) +
             " (checkpoint.signal_grace_s + 60 s)";
  }
  return std::nullopt;
}

namespace {

// The next attempt's record: the same job as `old`'s (its name, id and the
// secret its script gave the agents), running, in place, on `slots`.
AttemptRecord NextInPlace(const AttemptRecord& old, const std::optional<NodeSlots>& slots,
                          int64_t now) {
  AttemptRecord r;
  r.experiment_id = old.experiment_id;
  r.number = old.number + 1;
  r.secret_sha256 = old.secret_sha256;
  r.job_name = old.job_name;
  r.slurm_job_id = old.slurm_job_id;
  r.state = AttemptState::kRunning;
  r.slurm_state = old.slurm_state;
  r.nodes = old.nodes;
  r.sbatch_script = old.sbatch_script;
  r.in_place = true;
  r.spec_revision = old.spec_revision;  // the same spec, in the same job
  // Obstacle found enough spares for the nodes that leave.
  if (slots) r.node_slots = *slots;
  r.submitted_at = r.started_at = now;
  return r;
}

}  // namespace

std::string InPlaceRestart::PrepareLogDir(const OpenExperiment& a, AttemptRecord& r,
                                          std::string& note) {
  // The tasks' output moves to the new attempt's log directory, made as the
  // job's account; if it cannot be made, it stays where it is.
  std::string log_dir = AttemptLogDir(core_.config().output_root, a.record.id, r.number);
  const std::string stays =
      "; task output stays in attempt " + std::to_string(r.number - 1) + "'s log directory: ";
  auto account = core_.ports().accounts.ForOwner(a.record.owner);
  if (!account.ok()) {
    note = stays + account.status().message();
    return "";
  }
  if (Status s = core_.ports().files.CreateDirectories(log_dir, *account); !s.ok()) {
    note = stays + s.message();
    log_dir.clear();
  }
  if (auto cp =
          core_.ports().files.ReadCheckpointState(a.record.model_dir, a.spec.framework, *account))
    r.start_step = cp->step;
  return log_dir;
}

void InPlaceRestart::Begin(OpenExperiment& a, Changes& c, const std::string& why) {
  const int64_t now = core_.ports().clock.NowMs();
  LiveAttempt& old = a.attempt;
  old.record.state = AttemptState::kEnded;
  old.record.ended_at = now;
  c.attempts.push_back(old.record);

  const NodePlan plan = PlanNodes(a);
  AttemptRecord r = NextInPlace(old.record, plan.slots, now);
  for (TaskIndex i : old.run->indices()) {
    if (std::find(plan.out.begin(), plan.out.end(), old.node_slots().JobNodeOfTask(i)) ==
        plan.out.end())
      continue;
    auto ch = old.channels.find(i);
    if (ch == old.channels.end()) continue;
    if (ch->second)
      ch->second->Send(ReleaseMsg{"its node " + old.run->task(i).node +
                                  " leaves this job's attempts: a spare node takes its place"});
    old.channels.erase(ch);
  }
  std::set<std::string> leaving;
  for (int node : plan.out)
    if (auto name = plan.names.find(node); name != plan.names.end()) leaving.insert(name->second);
  const Shrink shrink = ShrinkFor(old.job_node_names, leaving, JobText(r));
  std::string note;
  const std::string log_dir = PrepareLogDir(a, r, note);

  LiveAttempt next(a.spec, r);
  next.job_seen = true;
  next.start_seen_in_slurm = true;
  next.job_started_ms = now;  // the barrier timeout runs from here
  next.job_known_seq = old.job_known_seq;
  next.job_end_ms = old.job_end_ms;
  next.job_state = old.job_state;
  next.job_node_names = old.job_node_names;
  next.shrink_to = shrink.keep;
  next.component_job_ids = old.component_job_ids;
  auto waiting = std::move(old.channels);
  std::vector<std::shared_ptr<TaskChannel>> spares;
  for (auto& [proc, spare] : old.spare_agents)
    if (spare.channel) spares.push_back(std::move(spare.channel));
  c.attempts.push_back(r);
  c.tasks.insert(c.tasks.end(), next.tasks.begin(), next.tasks.end());
  a.record.current_attempt = r.number;
  a.record.updated_at = now;
  a.attempt = std::move(next);

  const std::string where = "in " + JobText(r) + ", restarted in place";
  core_.Event(
      c, a, EventCode::kRestart,
      "attempt " + std::to_string(r.number) + " " + where +
          ": every agent restarts its program, nothing goes back to Slurm's queue" +
          (plan.swaps.empty() ? "" : "; " + plan.swaps) + shrink.note +
          (r.start_step ? "; resumes from checkpoint step " + std::to_string(*r.start_step) : "") +
          note);
  core_.SetState(c, a, ExperimentState::kStarting,
                 why + "; attempt " + std::to_string(r.number) + " " + where);
  for (auto& [task, channel] : waiting)
    if (channel) channel->Send(NextAttemptMsg{r.number, why, log_dir});
  // Every spare moves too: one taking a node's place registers as its
  // task, the others as spares again.
  for (auto& channel : spares) channel->Send(NextAttemptMsg{r.number, why, log_dir});
}

InPlaceCheck InPlaceRestart::Decide(OpenExperiment& a, int64_t now, Changes& c) {
  InPlaceCheck check = Check(a, now);
  if (check.kind != InPlaceCheck::kGiveUp && check.kind != InPlaceCheck::kLetTheJobEnd)
    return check;
  // The job ends, and its end classifies the attempt as it would have
  // without agents waiting (OnJobEnded); FinishAttempt then says why the
  // restart, if any, is a new job.
  a.attempt.GiveUpInPlace(check.why);
  ReleaseWaitingAgents(a.attempt, check.why);
  core_.Event(
      c, a, EventCode::kRestart,
      "not in place: " + check.why +
          (check.kind == InPlaceCheck::kGiveUp ? "; ending the job" : "; the job's end decides"));
  return check;
}

bool InPlaceRestart::TellNextAttempt(const TaskRef& ref, const RegisterInfo& info,
                                     TaskChannel& channel) {
  const OpenExperiment* open = core_.Find(ref.experiment_id);
  if (!open) return false;
  const OpenExperiment& a = *open;
  // The next attempt started in this job while this agent was away (its
  // stream broke, or tfslurmd restarted, between the attempt's record and
  // the agent's NextAttempt): it is told again. The secret is the job's.
  const std::optional<int> number = a.attempt.MissedNextAttempt(ref, info.slurm_job_id);
  if (!number) return false;
  channel.Send(NextAttemptMsg{*number, "attempt " + std::to_string(*number) + " runs in this job",
                              AttemptLogDir(core_.config().output_root, a.record.id, *number)});
  return true;
}

void InPlaceRestart::OnStandby(const TaskRef& ref, const RegisterInfo& info,
                               std::shared_ptr<TaskChannel> channel,
                               const StatusOr<OpenExperiment*>& found, const ProcPlace& place) {
  if (TellNextAttempt(ref, info, *channel)) return;
  if (!found.ok()) {
    channel->Send(RefusalFor(found.status()));
    return;
  }
  OpenExperiment& a = **found;
  if (place.kind == ProcPlace::kSpare) return OnSpare(a, ref, info, std::move(channel));
  // Only a failure can bring a next attempt to this job; until the attempt
  // is decided, a task that ended early (a rank done first) waits too.
  if (!a.MayRestartInPlace() || !a.attempt.StandBy(place.task, channel))
    channel->Send(
        ReleaseMsg{IsTerminal(a.record.state) || a.record.state == ExperimentState::kRestarting
                       ? a.record.reason
                       : "no further attempt runs in this job"});
}

void InPlaceRestart::OnSpare(OpenExperiment& a, const TaskRef& ref, const RegisterInfo& info,
                             std::shared_ptr<TaskChannel> channel) {
  // A spare may register before any task proves the job runs (the attempt
  // is still pending then): only an ended attempt has no use for it.
  switch (a.attempt.SpareRegistered(ref.proc_id, info.node_name, a.MayRestartInPlace(),
                                    info.standby, channel)) {
    case LiveAttempt::SpareAnswer::kReleased:
      channel->Send(ReleaseMsg{IsTerminal(a.record.state) ? a.record.reason
                                                          : "no further attempt runs in this job"});
      return;
    case LiveAttempt::SpareAnswer::kToldItsPart:
      channel->Send(SpareMsg{"node " + info.node_name + " is a spare of Slurm job " +
                             std::to_string(a.attempt.job_id()) +
                             " (resources.spare_nodes): it takes a failed node's place in a "
                             "restart in place"});
      return;
    case LiveAttempt::SpareAnswer::kWaits:
      return;
  }
}

void ReleaseWaitingAgents(LiveAttempt& attempt, const std::string& why) {
  for (TaskIndex i : attempt.run->indices()) {
    TaskSlot& slot = attempt.run->mutable_task(i);
    if (!slot.standing_by()) continue;
    slot.agent = TaskSlot::AgentLink::kNormal;
    auto ch = attempt.channels.find(i);
    if (ch == attempt.channels.end()) continue;
    if (ch->second) ch->second->Send(ReleaseMsg{why});
    attempt.channels.erase(ch);
  }
  for (auto& [proc, spare] : attempt.spare_agents)
    if (spare.channel) std::exchange(spare.channel, nullptr)->Send(ReleaseMsg{why});
}

}  // namespace tfslurm
