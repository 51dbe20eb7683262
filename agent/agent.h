// The agent from its command line to its exit status: checks the task's
// Slurm identity and the attempt secret, reserves the program's port,
// resolves the address other tasks will use, then runs the Session.
//
// Exit statuses (see README.md):
//   0    the program was reaped by a Shutdown from the service
//   2    the agent could not start: bad arguments, missing variables,
//        unresolvable address, no port
//   3    the service refused the task permanently
//   else the program's status: its exit code, 126/127 when it could not be
//        started, 128 + signal when a signal ended it
//
// Thread safety: for the main thread: RunAgent runs the agent once, and
// SetUpLogging replaces spdlog's process-wide default logger.
#ifndef TFSLURM_AGENT_AGENT_H_
#define TFSLURM_AGENT_AGENT_H_

#include <string>

#include "agent/slurm_env.h"
#include "schema/agent_exit.h"

namespace tfslurm::agent {

inline constexpr int kExitUsage = kAgentExitUsage;

struct AgentOptions {
  std::string service;        // --service HOST:PORT
  std::string experiment_id;  // --experiment
  int attempt = 0;            // --attempt
  std::string address = "hostname";
  double exit_ack_timeout_s = 30;
  double exit_report_timeout_s = 120;
  double keepalive_s = 60;
  double unknown_experiment_timeout_s = 300;
  std::string log_level = "info";
  // --log-dir: when set, the agent (and so its program) writes its output to
  // DIR/task-<SLURM_PROCID>.out itself. The script of a heterogeneous job
  // uses it: srun's --output=task-%t.out names component k's files
  // SLURM_PROCID + k there (slurmstepd_job.c adds the component's offset).
  std::string log_dir;
  // main's argc: the relay (agent/relay/relay_route.h) runs this binary as
  // the process's command line started it, a loader's words before it.
  int argc = 0;
};

// Call BlockAgentSignals() first, before any thread exists.
int RunAgent(const AgentOptions& options, const EnvLookup& env);

// Sends the agent's log lines to stderr (Slurm writes it to the task's
// output file), each prefixed with the task so that lines from many tasks
// can be told apart: "[tfslurm-agent exp=mnist attempt=1 proc=3] ...".
void SetUpLogging(const std::string& experiment_id, int attempt, const std::string& proc_id);

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_AGENT_H_
