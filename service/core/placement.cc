#include "service/core/placement.h"

#include <map>

namespace tfslurm {

std::vector<TaskRole> AssignRoles(const ExperimentSpec& spec) {
  const int nodes = spec.resources.nodes, per_node = spec.resources.tasks_per_node;
  const int total = nodes * per_node;
  std::vector<std::string> roles(total);

  if (spec.framework == Framework::kPytorch) {
    // No roles: task i is rank i (SLURM_PROCID), as torchrun numbers them.
    std::vector<TaskRole> ranks(total);
    for (int i = 0; i < total; ++i) ranks[i] = {kRankRole, i};
    return ranks;
  }
  if (spec.placement.kind == PlacementKind::kExplicit) {
    roles = spec.placement.roles;
  } else {
    std::vector<std::string> order;
    const ClusterShape& c = spec.cluster;
    order.insert(order.end(), c.chief, "chief");
    order.insert(order.end(), c.ps, "ps");
    order.insert(order.end(), c.worker, "worker");
    order.insert(order.end(), c.evaluator, "evaluator");
    for (int k = 0; k < total; ++k) {
      int proc = k;
      if (spec.placement.kind == PlacementKind::kSpread) {
        int node = k % nodes, slot = k / nodes;
        proc = node * per_node + slot;
      }
      roles[proc] = order[k];
    }
  }

  std::vector<TaskRole> out(total);
  std::map<std::string, int> next_index;
  for (int i = 0; i < total; ++i) out[i] = {roles[i], next_index[roles[i]]++};
  return out;
}

}  // namespace tfslurm
