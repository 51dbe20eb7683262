// The spec's names, its time format and its canonical JSON form: the parts of
// spec.h that are not validation (spec.cc).
#include "service/core/spec.h"
#include "service/core/spec_checker.h"

#include <regex>

namespace tfslurm {

using nlohmann::json;

bool IsRole(const std::string& role) {
  return role == "chief" || role == "ps" || role == "worker" || role == "evaluator";
}

namespace {

// Compiled at program start, on one thread (see service/core/checkpoint_state.cc).
const std::regex kIdPattern("[a-z0-9][a-z0-9._-]{0,62}");

}  // namespace

bool IsValidExperimentId(const std::string& id) { return std::regex_match(id, kIdPattern); }

bool IsTorchVariable(const std::string& name) {
  for (const char* set :
       {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
        "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR",
        "MASTER_PORT", "OMP_NUM_THREADS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
        "TORCHELASTIC_MAX_RESTARTS"})
    if (name == set) return true;
  return false;
}

bool IsJaxVariable(const std::string& name) {
  return name == "JAX_COORDINATOR_ADDRESS" || name == "JAX_NUM_PROCESSES" ||
         name == "JAX_PROCESS_ID" || name == "JAX_LOCAL_DEVICE_IDS";
}

namespace {

// At program start, on one thread (see checkpoint_state.cc's kLine).
const std::regex kTime(R"((?:(\d{1,5})-)?(\d{1,6})(?::(\d{1,2}))?(?::(\d{1,2}))?)");

}  // namespace

std::optional<int> ParseSlurmTimeMinutes(const std::string& text) {
  std::smatch m;
  if (!std::regex_match(text, m, kTime)) return std::nullopt;
  auto num = [&](int i) { return m[i].matched ? std::stol(m[i].str()) : 0L; };
  long days = num(1), a = num(2), b = num(3), c = num(4);
  long seconds;
  if (m[1].matched) {
    // D-HH, D-HH:MM, D-HH:MM:SS
    seconds = ((days * 24 + a) * 60 + b) * 60 + c;
  } else if (m[4].matched) {
    seconds = (a * 60 + b) * 60 + c;  // HH:MM:SS
  } else if (m[3].matched) {
    seconds = a * 60 + b;  // MM:SS
  } else {
    seconds = a * 60;  // MM
  }
  long minutes = (seconds + 59) / 60;
  if (minutes > kMaxTimeLimitMinutes) return std::nullopt;
  return static_cast<int>(minutes);
}

std::string FormatSlurmTime(int minutes) {
  auto two_digits = [](int n) { return (n < 10 ? "0" : "") + std::to_string(n); };
  int days = minutes / (24 * 60), hours = (minutes / 60) % 24, mins = minutes % 60;
  std::string clock = two_digits(hours) + ":" + two_digits(mins) + ":00";
  return days > 0 ? std::to_string(days) + "-" + clock : clock;
}

bool HasLoneRestarts(const ExperimentSpec& spec) {
  return spec.framework == Framework::kTensorflow && spec.cluster.ps > 0;
}

nlohmann::json ExperimentSpec::ToJson() const {
  json j;
  const bool torch = framework == Framework::kPytorch;
  const bool ranks = HasRanks(framework);
  j["id"] = id;
  j["framework"] = FrameworkName(framework);
  j["command"] = command;
  if (!workdir.empty()) j["workdir"] = workdir;
  j["env"] = env;
  if (torch)
    j["pytorch"] = {{"omp_num_threads",
                     pytorch.omp_num_threads ? json(*pytorch.omp_num_threads) : json("auto")}};
  if (!ranks) {
    j["cluster"] = {{"chief", cluster.chief},
                    {"ps", cluster.ps},
                    {"worker", cluster.worker},
                    {"evaluator", cluster.evaluator}};
    if (placement.kind == PlacementKind::kExplicit)
      j["placement"] = placement.roles;
    else
      j["placement"] = placement.kind == PlacementKind::kSpread ? "spread" : "pack";
  }
  json res = {{"nodes", resources.nodes},
              {"tasks_per_node", resources.tasks_per_node},
              {"cpus_per_task", resources.cpus_per_task},
              {"gpus_per_node", resources.gpus_per_node},
              {"gpus_per_task", resources.gpus_per_task},
              {"time_limit", FormatSlurmTime(resources.time_limit_minutes)}};
  if (!resources.partition.empty()) res["partition"] = resources.partition;
  if (resources.mem_per_task_mb)
    res["mem_per_task_mb"] = *resources.mem_per_task_mb;
  else
    res["mem_per_task_mb"] = "auto";
  // The site's options only when given, as partition: a spec without them
  // reads as it always did.
  for (const auto& [key, value] :
       {std::pair<const char*, const std::string*>{"constraint", &resources.constraint},
        {"nodelist", &resources.nodelist},
        {"account", &resources.account},
        {"qos", &resources.qos},
        {"reservation", &resources.reservation},
        {"exclude", &resources.exclude}})
    if (!value->empty()) res[key] = *value;
  if (resources.exclusive) res["exclusive"] = true;
  if (resources.spare_nodes > 0) res["spare_nodes"] = resources.spare_nodes;
  j["resources"] = res;
  if (!roles.empty()) {
    json blocks = json::object();
    for (const auto& [role, r] : roles) {
      json b = {{"nodes", r.nodes},
                {"tasks_per_node", r.tasks_per_node},
                {"cpus_per_task", r.cpus_per_task},
                {"gpus_per_node", r.gpus_per_node},
                {"gpus_per_task", r.gpus_per_task}};
      if (!r.partition.empty()) b["partition"] = r.partition;
      b["mem_per_task_mb"] = r.mem_per_task_mb ? json(*r.mem_per_task_mb) : json("auto");
      if (!r.constraint.empty()) b["constraint"] = r.constraint;
      if (!r.nodelist.empty()) b["nodelist"] = r.nodelist;
      if (r.exclusive) b["exclusive"] = true;
      blocks[role] = b;
    }
    j["roles"] = blocks;
  }
  j["network"] = {{"address", network_address}};
  if (!ranks) j["success"] = SuccessPolicyName(success);
  json on = json::array();
  for (EndReason r : restart.on) on.push_back(EndReasonName(r));
  j["restart"] = {{"max_restarts", restart.max_restarts},
                  {"on", on},
                  {"backoff_s", restart.backoff_s},
                  {"in_allocation", restart.in_allocation}};
  if (HasLoneRestarts(*this)) j["restart"]["max_task_restarts"] = restart.max_task_restarts;
  j["checkpoint"] = {{"signal_grace_s", signal_grace_s}};
  j["progress"] = {{"stall_timeout_s", stall_timeout_s}};
  j["model_dir"] = model_dir.empty() ? json("auto") : json(model_dir);
  // Only when given, as the site's options: a spec without it reads as it
  // always did.
  if (container.enabled()) j["container"] = spec_internal::ContainerJson(container);
  return j;
}

}  // namespace tfslurm
