// The sbatch script: readable, inspectable before submission and safe.
// Nothing from a spec reaches shell text unquoted; the user's command is not
// in the script at all (the agent receives it from the service) except in a
// comment, JSON-encoded so no byte of it can end the comment.
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include "service/core/memory.h"
#include "service/core/ports/slurm.h"
#include "service/core/spec.h"

namespace tfslurm::slurm {

// How tasks reach the service: the agent's path and the service's address.
struct AgentLaunch {
  std::string agent_path;       // absolute path of tfslurm-agent on the nodes
  std::string service_address;  // host:port of the agent endpoint (gRPC)
};

struct AttemptPaths {
  std::string log_dir;  // per attempt: batch.out and task-<procid>.out
};

// The SubmitRequest for `attempt` of `spec`; its script is rendered too.
// `secret` goes to the environment only. `exclude_nodes`: the experiment's
// bad-node memory (--exclude; no line when empty). `memory` is the first
// component's; with per-role resources (a heterogeneous job, core/
// components.h) `more_memory` has the others', in component order, and the
// script gets a `#SBATCH hetjob` section per further component and one
// `srun --het-group=0,...` step over all. Without them the request and
// the script are exactly those of a plain job.
SubmitRequest BuildSubmitRequest(const ExperimentSpec& spec, const MemoryPlan& memory, int attempt,
                                 const AttemptPaths& paths, const AgentLaunch& launch,
                                 const std::string& secret,
                                 const std::vector<std::string>& base_environment,
                                 const std::vector<std::string>& exclude_nodes = {},
                                 const std::vector<MemoryPlan>& more_memory = {});

std::string JobName(const std::string& experiment_id, int attempt);

// Quotes `s` for bash so that it is one word whose value is `s`, byte for
// byte: single quotes, with ' written as '\''.
std::string ShellQuote(const std::string& s);

}  // namespace tfslurm::slurm
