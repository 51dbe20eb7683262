// Reads the task's identity from the variables srun sets for every task.
//
// The agent is only meaningful as a Slurm task: without these variables the
// service cannot tell which task registers, so a missing or malformed one is a
// configuration error reported with every offending name at once.
//
// Thread safety: ReadTaskIdentity keeps no state and only calls `lookup`;
// ProcessEnvironment's lookup calls getenv(3), safe while no thread changes
// the environment.
#ifndef TFSLURM_AGENT_SLURM_ENV_H_
#define TFSLURM_AGENT_SLURM_ENV_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/status.h"

namespace tfslurm::agent {

struct TaskIdentity {
  int64_t slurm_job_id = 0;  // SLURM_JOB_ID
  int proc_id = 0;           // SLURM_PROCID: rank of the task in the job
  int node_id = 0;           // SLURM_NODEID: index of the node in the job
  int local_id = 0;          // SLURM_LOCALID: index of the task on its node
  std::string node_name;     // SLURMD_NODENAME
  // From the step's launch (TFSLURM_STEP_LAUNCHED_AT_MS, which tfslurm's job
  // script sets) to this agent's start; nullopt without it.
  std::optional<int64_t> started_after_launch_ms;
};

// Looks a variable up; injected so tests need not touch the process
// environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// getenv(3) of this process.
EnvLookup ProcessEnvironment();

// Fails naming every missing or non-numeric variable. `now_ms`: the wall
// clock now, in milliseconds since the epoch, for started_after_launch_ms
// (at least 0: the nodes' clocks may differ by a little).
StatusOr<TaskIdentity> ReadTaskIdentity(const EnvLookup& lookup, int64_t now_ms);

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_SLURM_ENV_H_
