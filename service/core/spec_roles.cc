// The spec's per-role resources (`roles`): parsing, what a role inherits
// from `resources`, and the rules that tie roles to `cluster` and
// `placement`. Split from spec.cc for size; documented in
// schema/experiment-spec.md ("roles").
#include <regex>

#include "service/core/spec_checker.h"

namespace tfslurm::spec_internal {
namespace {

void ParseRole(Checker& c, const json& v, const std::string& role, ExperimentSpec& spec) {
  const std::string path = "roles." + role;
  if (!c.IsObject(v, path)) return;
  c.OnlyKeys(v, path,
             {"partition", "nodes", "tasks_per_node", "cpus_per_task", "gpus_per_node",
              "gpus_per_task", "mem_per_task_mb", "constraint", "nodelist", "exclusive"});
  // What the block leaves out comes from `resources`, but nodes (1),
  // tasks_per_node (below) and the per-component site options, which sbatch
  // does not carry from one component to the next (spec.h); time_limit is
  // the job's.
  RoleResources r;
  static_cast<Resources&>(r) = spec.resources;
  r.nodes = 1;
  r.constraint.clear();
  r.nodelist.clear();
  r.exclusive = false;
  if (!ParseNodeShape(c, v, path, r)) {
    // Absent: the role's tasks spread evenly over its nodes.
    int tasks = spec.cluster.Count(role);
    r.tasks_per_node = tasks > 0 && tasks % r.nodes == 0 ? tasks / r.nodes : 1;
  }
  spec.roles[role] = r;
}

}  // namespace

void ParseRoles(Checker& c, const json& v, ExperimentSpec& spec) {
  if (!c.IsObject(v, "roles")) return;
  c.OnlyKeys(v, "roles", {"chief", "ps", "worker", "evaluator"});
  for (const char* role : kRoleOrder)
    if (v.contains(role)) ParseRole(c, v[role], role, spec);
}

void CheckRoles(Checker& c, const json& input, const ExperimentSpec& spec,
                const SpecLimits& limits) {
  const ClusterShape& k = spec.cluster;
  int unnamed = 0;  // tasks of the roles that use `resources`
  for (const char* role : kRoleOrder) {
    const int want = k.Count(role);
    auto it = spec.roles.find(role);
    if (it == spec.roles.end()) {
      unnamed += want;
      continue;
    }
    const RoleResources& r = it->second;
    const std::string path = std::string("roles.") + role;
    if (want == 0) {
      c.Fail(path, std::string("gives resources to ") + role + " but cluster." + role +
                       " is 0; remove it or set cluster." + role);
    } else if (r.Tasks() != want) {
      c.Fail(path, "gives " + std::to_string(r.Tasks()) + " tasks (nodes " +
                       std::to_string(r.nodes) + " x tasks_per_node " +
                       std::to_string(r.tasks_per_node) + ") but cluster." + role + " is " +
                       std::to_string(want) + "; a role's tasks are its nodes x tasks_per_node");
    }
  }
  if (k.Total() > limits.max_tasks) return;  // reported with cluster already
  if (unnamed > 0 && unnamed != spec.resources.Tasks()) {
    std::string roles;
    for (const char* role : kRoleOrder)
      if (!spec.roles.contains(role) && k.Count(role) > 0)
        roles +=
            (roles.empty() ? "" : " + ") + std::string(role) + " " + std::to_string(k.Count(role));
    c.Fail("cluster", "has " + std::to_string(unnamed) + " tasks without a block in roles (" +
                          roles + ") but resources give " + std::to_string(spec.resources.Tasks()) +
                          " (nodes " + std::to_string(spec.resources.nodes) + " x tasks_per_node " +
                          std::to_string(spec.resources.tasks_per_node) +
                          "); the roles not named in roles share resources");
  }
  // Without a `resources` component, its per-component options would
  // reach no job description: refused rather than dropped.
  if (unnamed == 0) {
    const Resources& res = spec.resources;
    const std::pair<const char*, bool> unused[] = {{"constraint", !res.constraint.empty()},
                                                   {"nodelist", !res.nodelist.empty()},
                                                   {"exclusive", res.exclusive}};
    for (const auto& [name, given] : unused)
      if (given)
        c.Fail(std::string("resources.") + name,
               "applies to the tasks that share resources, but every role with tasks has a "
               "block in roles; set " +
                   std::string(name) + " in those blocks instead");
  }
  if (input.contains("placement") && input["placement"].is_array())
    c.Fail("placement",
           "a list of roles cannot be combined with roles: each role in roles has its own nodes; "
           "use spread or pack for the roles that share resources");
}

}  // namespace tfslurm::spec_internal
