#include "service/core/components.h"

namespace tfslurm {

std::vector<JobComponent> JobComponents(const ExperimentSpec& spec) {
  std::vector<JobComponent> out;
  JobComponent shared;
  shared.shared = true;
  shared.field = "resources";
  shared.resources = spec.resources;
  shared.constraint = spec.resources.constraint;
  if (HasRanks(spec.framework) || spec.roles.empty()) {
    if (spec.framework == Framework::kTensorflow)
      for (const char* role : kRoleOrder)
        if (spec.cluster.Count(role) > 0) shared.roles.push_back(role);
    out.push_back(shared);
    return out;
  }
  for (const char* role : kRoleOrder)
    if (!spec.roles.contains(role) && spec.cluster.Count(role) > 0) shared.roles.push_back(role);
  if (!shared.roles.empty()) out.push_back(shared);

  // Named roles, grouped by shape in the order of their first role.
  std::vector<const RoleResources*> shapes;
  std::vector<JobComponent> groups;
  for (const char* role : kRoleOrder) {
    auto it = spec.roles.find(role);
    if (it == spec.roles.end() || spec.cluster.Count(role) == 0) continue;
    const RoleResources& r = it->second;
    size_t g = 0;
    while (g < shapes.size() && !shapes[g]->SameShape(r)) ++g;
    if (g == shapes.size()) {
      shapes.push_back(&r);
      JobComponent c;
      c.field = std::string("roles.") + role;
      c.resources = r;  // nodes: the group's, summed below
      c.resources.nodes = 0;
      c.constraint = r.constraint;
      groups.push_back(c);
    }
    groups[g].roles.push_back(role);
    groups[g].resources.nodes += r.nodes;
  }
  out.insert(out.end(), groups.begin(), groups.end());

  int task = 0, node = 0;
  for (JobComponent& c : out) {
    c.first_task = task;
    c.first_node = node;
    task += c.Tasks();
    node += c.resources.nodes;
  }
  return out;
}

int ComponentOfTask(const std::vector<JobComponent>& components, TaskIndex task) {
  for (size_t i = components.size(); i-- > 0;)
    if (task.value() >= components[i].first_task) return static_cast<int>(i);
  return 0;
}

std::string ComponentRoles(const JobComponent& component) {
  if (component.roles.empty()) return "all";
  std::string out;
  for (const std::string& role : component.roles) out += (out.empty() ? "" : ", ") + role;
  return out;
}

}  // namespace tfslurm
