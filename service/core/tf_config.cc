#include "service/core/tf_config.h"

#include <map>

#include <nlohmann/json.hpp>

#include "schema/tf_config_wire.h"

namespace tfslurm {

std::string BuildClusterSpec(const std::vector<TaskRole>& roles,
                             const std::vector<std::string>& addresses) {
  // Place each address at its index within the role; indexes follow task
  // order, so this is the same as appending in task order.
  std::map<std::string, std::vector<std::string>> cluster;
  for (size_t i = 0; i < roles.size(); ++i) {
    if (roles[i].role == "evaluator") continue;
    auto& list = cluster[roles[i].role];
    if (list.size() <= static_cast<size_t>(roles[i].index)) list.resize(roles[i].index + 1);
    list[roles[i].index] = addresses[i];
  }
  nlohmann::ordered_json c = nlohmann::ordered_json::object();
  for (const char* role : {"chief", "ps", "worker"})
    if (cluster.count(role)) c[role] = cluster[role];
  return c.dump();
}

std::string TfConfigForTask(const std::string& cluster_spec, const TaskRole& task) {
  return wire::TfConfigForTask(cluster_spec, task.role, task.index);
}

std::string BuildTfConfig(const std::vector<TaskRole>& roles,
                          const std::vector<std::string>& addresses, int task) {
  return TfConfigForTask(BuildClusterSpec(roles, addresses), roles[task]);
}

std::string TfConfigTooLong(const std::string& cluster_spec, int tasks) {
  const size_t longest = wire::TfConfigForTask(cluster_spec, "evaluator", tasks).size();
  if (longest <= wire::kMaxTfConfigBytes) return "";
  return "; TF_CONFIG is " + std::to_string(longest) +
         " bytes, more than Linux passes to a program in one environment variable (" +
         std::to_string(wire::kMaxTfConfigBytes) +
         " bytes): each agent writes it to a file (TFSLURM_TF_CONFIG_FILE) that a sitecustomize "
         "module it puts on PYTHONPATH loads into os.environ, where TensorFlow reads it";
}

}  // namespace tfslurm
