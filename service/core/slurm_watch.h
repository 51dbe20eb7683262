// The Slurm watch: the periodic work of the lifecycle. Polls Slurm (one RPC
// for every job), follows each attempt's job, classifies how it ended and
// applies the restart policy, reconciles submissions a crash or Slurm
// interrupted (by job name, so none is submitted twice), and runs the
// timers: barrier timeout, reaping deadline, lost heartbeats, restarts due.
// Recover picks up what the last run of the service left.
//
// Thread safety: Tick and Recover may be called from any thread (Tick from
// several at once: only one of them polls). The poll, cancels and step
// kills are made outside the lifecycle's lock; restarts submit under it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "service/core/agent_protocol.h"
#include "service/core/core_state.h"
#include "service/core/in_place_restart.h"
#include "service/core/submission.h"

namespace tfslurm {

class SlurmWatch {
 public:
  SlurmWatch(CoreState& lifecycle, AgentProtocol& agents, Submission& submission)
      : core_(lifecycle), agents_(agents), submission_(submission), in_place_(lifecycle) {}

  // Loads open experiments from the store and reconciles them with Slurm.
  Status Recover() ABSL_LOCKS_EXCLUDED(core_.mu());
  // Polls Slurm every poll_interval_ms, then runs every experiment's timers.
  void Tick() ABSL_LOCKS_EXCLUDED(core_.mu());
  // Experiments::IsOver: whether the experiment has ended and its last job
  // has left Slurm.
  StatusOr<bool> IsOver(const std::string& id) ABSL_LOCKS_EXCLUDED(core_.mu(), jobs_mu_);
  // An agent of experiment `id` came back to wait in its job: when every
  // task's agent now waits, the restart in place is decided at once
  // (CheckInPlace), not at the next Tick, which stays the backstop for the
  // deadlines (an agent that does not come back, spares taking a node's
  // place).
  void OnStandby(const std::string& id) ABSL_LOCKS_EXCLUDED(core_.mu());

 private:
  // Slurm calls to make after releasing the lock.
  struct Actions {
    std::vector<int64_t> cancel_jobs;
    std::vector<int64_t> kill_steps;
    std::vector<std::pair<int64_t, std::string>> shrink_jobs;  // job id, the nodes it keeps
    std::vector<std::pair<std::string, int>> restarts;  // experiment id, its next attempt's number
    std::vector<std::string> resubmits;  // attempts `submitting` that Slurm does not have
  };

  // One poll's news of the attempt's job (LiveAttempt::Polled, given the
  // poll's jobs, by id in `by_id`, and when it began): a submission in
  // doubt is looked up in `jobs`; a job gone from Slurm ends the attempt
  // by what its tasks reported, or as unknown (gone while tfslurmd was
  // down) or node_fail (lost by Slurm); a job there is taken in; a job
  // ended ends the attempt.
  void OnJobUpdate(OpenExperiment& e, const std::vector<JobInfo>& jobs,
                   const std::unordered_map<int64_t, const JobInfo*>& by_id, int64_t poll_ms,
                   int64_t poll_seq, Changes& c, Actions& actions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // What the experiment shows of a job the poll found: its start (`started`
  // since the last poll), or why it is still pending.
  void JobSeen(OpenExperiment& e, const JobInfo& job, bool started, Changes& c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // The job has ended (`news`: the attempt's word on how, where it can
  // tell): the attempt's end is classified from the tasks' reports and
  // the job's final state, and the policy applied.
  void OnJobEnded(OpenExperiment& e, const JobInfo& job, const LiveAttempt::JobNews& news,
                  Changes& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // The agents exited kAgentExitUnverifiedService (schema/agent_exit.h):
  // the startup_error's reason, with task 0's log line saying why.
  std::string UnverifiedServiceReason(const OpenExperiment& e, const JobInfo& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // A task of a job with a container whose agent never registered: the
  // runtime's words on why, read as the owner from the output of SLURM_PROCID
  // `proc` (and the next ones on its node) and of the batch script
  // (container_launch.h's RuntimeStartError).
  std::optional<std::string> ContainerStartFailure(const OpenExperiment& a, ProcId proc)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // A job with a container none of whose agents registered, ended by the
  // agents' own failure (kAgentExitUsage or kAgentExitRefused): the
  // startup_error's reason, with task 0's last error line in the agent's
  // words. nullopt for any other job.
  std::optional<std::string> AgentStartFailure(const OpenExperiment& a, const JobInfo& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // Ends the current attempt for the restart policy's purposes (the Slurm
  // job may still be finishing) and applies what the policy decides.
  void FinishAttempt(OpenExperiment& e, EndReason reason, const std::string& why, Changes& c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // A failed attempt whose agents all wait in its job ends now, and the next
  // may start in place; one whose agents did not come back ends its job. A
  // job that a restart in place left nodes of is shrunk.
  void CheckInPlace(OpenExperiment& e, int64_t now, Changes& c, Actions& actions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // Every timer of the experiment's attempt, then whether a restart is due.
  void CheckTimers(OpenExperiment& e, Changes& c, Actions& actions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // Every task must register within barrier_timeout_ms of the job's start.
  void CheckBarrier(OpenExperiment& e, int64_t now, Changes& c, Actions& actions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // A hang: no new step for progress.stall_timeout_s while training runs.
  void CheckStall(OpenExperiment& e, int64_t now, Changes& c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // Tasks that did not confirm their Shutdown within the grace: the step
  // ends through Slurm.
  void CheckReaping(OpenExperiment& e, int64_t now, Changes& c, Actions& actions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // A user's cancel Slurm did not act on is sent again.
  void RepeatCancel(OpenExperiment& e, int64_t now, Actions& actions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  // A running task silent for several heartbeat intervals is lost (it may
  // come back); heartbeats not written yet are. In a job with spare nodes
  // (submitted --no-kill), Slurm takes a failed node out of the job and the
  // job runs on: the tasks there are gone (Slurm killed them), and the
  // attempt fails as node_fail. The same, in any job, for a task silent
  // past the reconnect window (GoneAfterMs): its node stopped answering, or
  // cannot reach the service.
  void CheckAgents(OpenExperiment& e, int64_t now, Changes& c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  void RunActions(Actions& actions) ABSL_LOCKS_EXCLUDED(core_.mu());
  // Slurm's jobs for IsOver, read at most once per poll interval.
  StatusOr<std::vector<JobInfo>> RecentJobs() ABSL_LOCKS_EXCLUDED(jobs_mu_);
  // Adopts the job of an attempt still `submitting` from `jobs`, or queues
  // its submission in `actions`.
  void ReconcileSubmission(OpenExperiment& e, const std::vector<JobInfo>& jobs, Changes& c,
                           Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());

  CoreState& core_;
  AgentProtocol& agents_;
  Submission& submission_;
  InPlaceRestart in_place_;
  // Tick reads it outside the lock, and Tick may run on several threads:
  // the one that advances it polls.
  std::atomic<int64_t> last_poll_ms_{0};
  Mutex jobs_mu_;
  bool jobs_read_ ABSL_GUARDED_BY(jobs_mu_) = false;
  int64_t jobs_read_ms_ ABSL_GUARDED_BY(jobs_mu_) = 0;
  std::vector<JobInfo> jobs_ ABSL_GUARDED_BY(jobs_mu_);
};

}  // namespace tfslurm
