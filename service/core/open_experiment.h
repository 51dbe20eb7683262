// An open experiment in memory, and its current attempt as one value.
// CoreState (core_state.h) keeps every open experiment; the parts of core
// (submission, agent_protocol, slurm_watch) change them under its lock.
//
// Thread safety: plain values; CoreState's lock guards every OpenExperiment.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "service/core/agent_messages.h"
#include "service/core/attempt_run.h"
#include "service/core/ports/slurm.h"
#include "service/core/records.h"
#include "service/core/spec.h"

namespace tfslurm {

// The current attempt: its record, its tasks (as stored, and as its run
// decides them), the channels of the agents connected for them, and its
// timers. An attempt begins by replacing the whole value (Submission::
// SubmitAttempt, CoreState::Load), so nothing of one attempt carries into
// the next.
struct LiveAttempt {
  LiveAttempt() = default;
  // Attempt `record.number` of `spec`, every task pending.
  LiveAttempt(const ExperimentSpec& spec, AttemptRecord attempt);

  AttemptRecord record;
  std::unique_ptr<AttemptRun> run;
  std::vector<TaskRecord> tasks;
  std::map<int, std::shared_ptr<TaskChannel>> channels;
  std::set<int> heartbeat_dirty;  // tasks whose heartbeat is not persisted yet
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
  std::map<int, SpareAgent> spare_agents;
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
