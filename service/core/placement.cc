#include "service/core/placement.h"

#include <map>

#include "service/core/components.h"

namespace tfslurm {
namespace {

// The roles of one component's tasks, element j for its j-th task.
std::vector<std::string> ComponentRoleList(const ExperimentSpec& spec, const JobComponent& c) {
  const int nodes = c.resources.nodes, per_node = c.resources.tasks_per_node;
  const int total = c.Tasks();
  if (c.shared && spec.placement.kind == PlacementKind::kExplicit) return spec.placement.roles;
  std::vector<std::string> order;
  for (const std::string& role : c.roles) order.insert(order.end(), spec.cluster.Count(role), role);
  // A named group gives each role whole nodes of its own, in role order.
  if (!c.shared || spec.placement.kind == PlacementKind::kPack) return order;
  std::vector<std::string> roles(total);
  for (int k = 0; k < total; ++k) {
    int node = k % nodes, slot = k / nodes;
    roles[node * per_node + slot] = order[k];
  }
  return roles;
}

}  // namespace

std::vector<TaskRole> AssignRoles(const ExperimentSpec& spec) {
  if (HasRanks(spec.framework)) {
    // No roles: task i is rank i (SLURM_PROCID), as torchrun numbers them;
    // for JAX, it is process_id i.
    const int total = spec.resources.Tasks();
    std::vector<TaskRole> ranks(total);
    for (int i = 0; i < total; ++i) ranks[i] = {kRankRole, i};
    return ranks;
  }
  std::vector<std::string> roles;
  for (const JobComponent& c : JobComponents(spec)) {
    std::vector<std::string> part = ComponentRoleList(spec, c);
    roles.insert(roles.end(), part.begin(), part.end());
  }
  std::vector<TaskRole> out(roles.size());
  std::map<std::string, int> next_index;
  for (size_t i = 0; i < roles.size(); ++i) out[i] = {roles[i], next_index[roles[i]]++};
  return out;
}

}  // namespace tfslurm
