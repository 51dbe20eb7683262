// The sbatch script: readable, inspectable before submission and safe.
// Nothing from a spec reaches shell text unquoted; the user's command is not
// in the script at all (the agent receives it from the service) except in a
// comment, JSON-encoded so no byte of it can end the comment.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/shell_quote.h"
#include "service/core/container_launch.h"
#include "service/core/job_plan.h"
#include "service/core/memory.h"
#include "service/core/ports/slurm.h"
#include "service/core/spec.h"

namespace tfslurm {

// How tasks reach the service: the agent's path and the service's address.
struct AgentLaunch {
  std::string agent_path;       // absolute path of tfslurm-agent on the nodes
  std::string service_address;  // host:port of the agent endpoint (gRPC)
  // The site's runtime for container.runtime auto (tfslurmd
  // --container-runtime); kAuto: the site names none.
  ContainerRuntime container_runtime = ContainerRuntime::kAuto;
  // The self-contained agent (deploy/containers/agent-bundle.sh) that pyxis
  // and Slurm's OCI support run inside the container, at this path on the
  // nodes and in the container (tfslurmd --container-agent-dir).
  std::string container_agent_dir;
  // The release slurmctld reported when tfslurmd started ("22.05.8") when
  // its OCI support cannot run an attempt's bundle (before 23.02:
  // slurm::OciRunsAttemptBundles); empty when it can, or did not answer.
  std::string oci_unable_slurm_release;
};

struct AttemptPaths {
  std::string log_dir;         // per attempt: batch.out and task-<procid>.out
  std::string experiment_dir;  // <output_root>/<id>: a container mounts it, logs/ with it
  std::string model_dir;       // MODEL_DIR, mounted too
};

// What the attempt's containers mount: AttemptPaths and the launch's agent.
ContainerPaths ContainerPathsFor(const ExperimentSpec& spec, const AttemptPaths& paths,
                                 const AgentLaunch& launch);

// The attempt secret's file in the attempt's log directory, mode 0600, the
// job's user's (Files::WriteSecretFile).
inline constexpr char kSecretFileName[] = "attempt.secret";

// One attempt's own part of its job.
struct AttemptJob {
  int number = 1;
  AttemptPaths paths;
  // The file holding the attempt's secret (Files::WriteSecretFile): its
  // path goes to the job's environment, TFSLURM_SECRET_FILE.
  std::string secret_file;
  // The experiment's bad-node memory (--exclude, after the spec's own).
  std::vector<std::string> excluded_nodes;
};

// The SubmitRequest for attempt `attempt` of `spec` as `plan` planned it;
// its script is rendered too. With per-role resources (a heterogeneous job,
// core/components.h) the script gets a `#SBATCH hetjob` section per further
// component and one `srun --het-group=0,...` step over all; without them
// the request and the script are exactly those of a plain job. The job runs
// as plan.account.
SubmitRequest BuildSubmitRequest(const ExperimentSpec& spec, const JobPlan& plan,
                                 const AttemptJob& attempt, const AgentLaunch& launch,
                                 const std::vector<std::string>& base_environment);

std::string JobName(const std::string& experiment_id, int attempt);

}  // namespace tfslurm
