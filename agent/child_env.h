// Builds the environment of the user's program.
//
// The service computes what the program needs (TF_CONFIG, EXPERIMENT_ID,
// MODEL_DIR, TFSLURM_ROLE/INDEX/ATTEMPT/PORT, the spec's env) and sends it in
// Assignment.env; the agent applies it on top of its own environment (so
// PATH, HOME, SLURM_*, the site's modules and the CUDA_VISIBLE_DEVICES
// slurmstepd bound the task to carry over unchanged).
// Values are passed as bytes through execve, never through a shell, so quotes,
// `$(...)`, newlines and unicode arrive unchanged.
//
// The attempt secret (TFSLURM_SECRET_FILE) authenticates the agent to the service;
// the program has no use for it, so it never reaches the program's
// environment, not even when the assignment names it.
//
// Where the Assignment carries a value in a field of its own and env lacks
// the variable, the field fills it (TF_CONFIG, MODEL_DIR, TFSLURM_ROLE,
// TFSLURM_INDEX; the last two not for PyTorch or JAX, whose tasks have ranks); so do the agent's
// own --experiment/--attempt and the port it reserved (EXPERIMENT_ID, TFSLURM_ATTEMPT,
// TFSLURM_PORT). A variable in Assignment.env always wins. A JAX task also gets
// JAX_LOCAL_DEVICE_IDS, 0..k-1 for the k GPUs in the CUDA_VISIBLE_DEVICES (or
// ROCR_VISIBLE_DEVICES) slurmstepd gave it, and none when it has none.
//
// Thread safety: BuildChildEnv is a pure function; CurrentEnvironment reads
// `environ`, which nothing may change meanwhile (setenv, putenv).
#ifndef TFSLURM_AGENT_CHILD_ENV_H_
#define TFSLURM_AGENT_CHILD_ENV_H_

#include <string>
#include <vector>

#include "agent.pb.h"

namespace tfslurm::agent {

inline constexpr char kSecretVariable[] = "TFSLURM_SECRET";
// Where tfslurmd's jobs carry the secret: the path of a file only the job's
// user reads (the job's environment travels in Slurm's RPCs, in the clear).
// TFSLURM_SECRET itself is for agents started otherwise (by hand, a bench).
inline constexpr char kSecretFileVariable[] = "TFSLURM_SECRET_FILE";
// The agent's own settings from the job's environment (service_access.h);
// not the program's business, so removed from its environment too.
inline constexpr char kCaVariable[] = "TFSLURM_CA";
inline constexpr char kProveUidVariable[] = "TFSLURM_PROVE_UID";

struct ChildEnvInputs {
  std::vector<std::string> inherited;  // "NAME=value" entries, e.g. CurrentEnvironment()
  const tfslurm::agent::v1::Assignment* assignment = nullptr;
  std::string experiment_id;
  int attempt = 0;
  int port = 0;
};

struct ChildEnv {
  std::vector<std::string> entries;  // "NAME=value", sorted by name
  // Assignment variables that cannot be put in an environment (empty name,
  // '=' in the name, NUL byte anywhere), for the log.
  std::vector<std::string> rejected;
  // The assignment's cluster_zlib is missing (named by cluster_digest alone)
  // or did not inflate: no TF_CONFIG was set.
  bool tf_config_unreadable = false;
};

ChildEnv BuildChildEnv(const ChildEnvInputs& inputs);

// This process's environment as "NAME=value" entries.
std::vector<std::string> CurrentEnvironment();

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_CHILD_ENV_H_
