#include "client/spec_flags.h"

#include <vector>

namespace tfslurm::client {
namespace {

using nlohmann::json;

// The object at spec[key], created when absent; an error when the spec holds
// something else there, since a flag cannot be merged into it.
StatusOr<json*> ObjectField(json& spec, const char* key) {
  json& field = spec[key];
  if (field.is_null()) field = json::object();
  if (!field.is_object())
    return InvalidArgument(
        std::string("the spec's `") + key + "` must be a mapping to combine it with flags",
        {{key,
          "must be an object, got " + field.dump(-1, ' ', false, json::error_handler_t::replace)}});
  return &field;
}

// The cluster's task count, when every role count is a non-negative integer.
std::optional<int64_t> ClusterTasks(const json& spec) {
  auto cluster = spec.find("cluster");
  if (cluster == spec.end() || !cluster->is_object()) return std::nullopt;
  int64_t total = 0;
  for (const auto& [role, count] : cluster->items()) {
    if (!count.is_number_integer() || count.get<int64_t>() < 0) return std::nullopt;
    total += count.get<int64_t>();
  }
  return total;
}

void FillTaskLayout(json& spec) {
  auto tasks = ClusterTasks(spec);
  if (!tasks || *tasks < 1) return;
  auto resources = spec.find("resources");
  if (resources != spec.end() && !resources->is_object()) return;
  json& r = spec["resources"];
  if (r.is_null()) r = json::object();
  bool has_nodes = r.contains("nodes"), has_per_node = r.contains("tasks_per_node");
  if (!has_nodes && !has_per_node) {
    r["nodes"] = *tasks;
    r["tasks_per_node"] = 1;
  } else if (has_nodes != has_per_node) {
    const json& given = has_nodes ? r["nodes"] : r["tasks_per_node"];
    if (!given.is_number_integer() || given.get<int64_t>() < 1 ||
        *tasks % given.get<int64_t>() != 0)
      return;
    r[has_nodes ? "tasks_per_node" : "nodes"] = *tasks / given.get<int64_t>();
  }
}

}  // namespace

StatusOr<json> ComposeSpec(json spec, const SpecFlags& flags) {
  if (spec.is_null()) spec = json::object();
  if (!spec.is_object())
    return InvalidArgument(
        "the experiment spec must be a mapping of fields (id, command, cluster, ...)",
        {{"", "must be an object, got " + std::string(spec.type_name())}});
  if (flags.id) spec["id"] = *flags.id;
  if (!flags.command.empty()) spec["command"] = flags.command;
  if (flags.workdir)
    spec["workdir"] = *flags.workdir;
  else if (flags.default_workdir && !spec.contains("workdir"))
    spec["workdir"] = *flags.default_workdir;
  if (!flags.env.empty()) {
    auto env = ObjectField(spec, "env");
    if (!env.ok()) return env.status();
    for (const std::string& assignment : flags.env) {
      const size_t eq = assignment.find('=');
      if (eq == std::string::npos || eq == 0)
        return InvalidArgument("--env takes NAME=VALUE, e.g. --env LR=0.1; got '" + assignment +
                               "'");
      (**env)[assignment.substr(0, eq)] = assignment.substr(eq + 1);
    }
  }
  if (flags.ps || flags.workers) {
    auto cluster = ObjectField(spec, "cluster");
    if (!cluster.ok()) return cluster.status();
    if (flags.ps) (**cluster)["ps"] = *flags.ps;
    if (flags.workers) (**cluster)["worker"] = *flags.workers;
  }
  if (flags.nodes || flags.tasks_per_node || flags.partition || flags.time_limit) {
    auto resources = ObjectField(spec, "resources");
    if (!resources.ok()) return resources.status();
    json& r = **resources;
    if (flags.nodes) r["nodes"] = *flags.nodes;
    if (flags.tasks_per_node) r["tasks_per_node"] = *flags.tasks_per_node;
    if (flags.partition) r["partition"] = *flags.partition;
    if (flags.time_limit) r["time_limit"] = *flags.time_limit;
  }
  FillTaskLayout(spec);
  return spec;
}

Status SetSpecField(nlohmann::json& changes, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    return InvalidArgument(
        "--set takes PATH=VALUE with a dotted spec path, e.g. "
        "restart.max_restarts=5 or env.LR=0.1; got '" +
        assignment + "'");
  const std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot == std::string::npos ? dot : dot - start));
    if (parts.back().empty())
      return InvalidArgument("--set: '" + path +
                             "' has an empty part; a path is spec keys joined "
                             "by dots, e.g. resources.time_limit");
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  nlohmann::json value = text;
  if (parts[0] != "env" || text == "null") {
    nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
    if (!parsed.is_discarded()) value = parsed;
  }
  if (!changes.is_object()) changes = nlohmann::json::object();
  nlohmann::json* at = &changes;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    nlohmann::json& next = (*at)[parts[i]];
    if (!next.is_object()) next = nlohmann::json::object();
    at = &next;
  }
  (*at)[parts.back()] = value;
  return Status::Ok();
}

}  // namespace tfslurm::client
