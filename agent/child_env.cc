#include "agent/child_env.h"

#include <map>
#include <optional>
#include <string_view>

#include "schema/tf_config_wire.h"

extern char** environ;

namespace tfslurm::agent {
namespace {

bool IsValidName(std::string_view name) {
  return !name.empty() && name.find('=') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

// TF_CONFIG as sent whole (the JSON route), or put together from the
// attempt's compressed cluster object (the gRPC stream). nullopt when
// cluster_zlib does not inflate, or is missing where cluster_digest names it
// (a node's relay fills it in; agent.proto).
std::optional<std::string> TfConfigOf(const tfslurm::agent::v1::Assignment& assignment) {
  if (assignment.tf_config().empty() && assignment.cluster_zlib().empty() &&
      !assignment.cluster_digest().empty())
    return std::nullopt;
  if (!assignment.tf_config().empty() || assignment.cluster_zlib().empty())
    return assignment.tf_config();
  auto cluster = wire::InflateCluster(assignment.cluster_zlib());
  if (!cluster) return std::nullopt;
  return wire::TfConfigForTask(*cluster, assignment.role(), assignment.index());
}

// JAX's local_device_ids for the GPUs Slurm bound to this task, "" when it
// bound none. slurmstepd names them in CUDA_VISIBLE_DEVICES (ROCR_ for AMD),
// and CUDA and ROCm number the devices a process sees from 0 in that order,
// so the ids are 0..k-1, whatever Slurm's own indexes are. JAX's Slurm
// detection would use [SLURM_LOCALID] instead (clusters/cluster.py:85-87 at
// jax-v0.10.2), a device a task with one GPU of its own does not have.
std::string JaxLocalDeviceIds(const std::map<std::string, std::string>& vars) {
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"}) {
    auto it = vars.find(name);
    // NoDevFiles: Slurm's word for a GPU gres without device files.
    if (it == vars.end() || it->second.empty() || it->second == "NoDevFiles") continue;
    std::string ids;
    int count = 1;
    for (char ch : it->second) count += ch == ',';
    for (int i = 0; i < count; ++i) ids += (i ? "," : "") + std::to_string(i);
    return ids;
  }
  return "";
}

}  // namespace

ChildEnv BuildChildEnv(const ChildEnvInputs& inputs) {
  std::map<std::string, std::string> vars;
  for (const std::string& entry : inputs.inherited) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    vars[entry.substr(0, eq)] = entry.substr(eq + 1);
  }

  ChildEnv result;
  if (inputs.assignment != nullptr) {
    const auto& assignment = *inputs.assignment;
    // Sorted, so rejected names are logged in a stable order.
    std::map<std::string, std::string> assigned(assignment.env().begin(), assignment.env().end());
    for (const auto& [name, value] : assigned) {
      if (!IsValidName(name) || value.find('\0') != std::string::npos) {
        result.rejected.push_back(name);
        continue;
      }
      vars[name] = value;
    }
    auto fill = [&](const char* name, const std::string& value) {
      if (!value.empty() && !assigned.contains(name)) vars[name] = value;
    };
    if (auto tf_config = TfConfigOf(assignment))
      fill("TF_CONFIG", *tf_config);
    else
      result.tf_config_unreadable = true;
    fill("MODEL_DIR", assignment.model_dir());
    // A PyTorch or JAX task has a rank (RANK, JAX_PROCESS_ID in env), not a role.
    if (assignment.framework() != "pytorch" && assignment.framework() != "jax") {
      fill("TFSLURM_ROLE", assignment.role());
      if (!assignment.role().empty()) fill("TFSLURM_INDEX", std::to_string(assignment.index()));
    }
    if (assignment.framework() == "jax" && !assigned.contains("JAX_LOCAL_DEVICE_IDS")) {
      // Only from this task's GPUs, never inherited from elsewhere.
      vars.erase("JAX_LOCAL_DEVICE_IDS");
      if (std::string ids = JaxLocalDeviceIds(vars); !ids.empty())
        vars["JAX_LOCAL_DEVICE_IDS"] = ids;
    }
  }
  auto fill_if_absent = [&](const char* name, const std::string& value) {
    if (!value.empty() && !vars.contains(name)) vars[name] = value;
  };
  // Not from the inherited environment: an agent started by hand inside
  // another tfslurm task must not pass that task's values on.
  for (const char* name :
       {"EXPERIMENT_ID", "TFSLURM_ATTEMPT", "TFSLURM_PORT", "TFSLURM_TF_CONFIG_FILE"}) {
    bool assigned = inputs.assignment != nullptr && inputs.assignment->env().contains(name);
    if (!assigned) vars.erase(name);
  }
  fill_if_absent("EXPERIMENT_ID", inputs.experiment_id);
  if (inputs.attempt > 0) fill_if_absent("TFSLURM_ATTEMPT", std::to_string(inputs.attempt));
  if (inputs.port > 0) fill_if_absent("TFSLURM_PORT", std::to_string(inputs.port));

  vars.erase(kSecretVariable);
  vars.erase(kSecretFileVariable);
  vars.erase(kCaVariable);
  vars.erase(kProveUidVariable);

  result.entries.reserve(vars.size());
  for (const auto& [name, value] : vars) result.entries.push_back(name + "=" + value);
  return result;
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> entries;
  for (char** it = environ; it != nullptr && *it != nullptr; ++it) entries.emplace_back(*it);
  return entries;
}

}  // namespace tfslurm::agent
