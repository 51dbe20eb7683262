// Roles and indexes of the tasks of one attempt, from the spec's placement.
// Tasks are ordered node by node, as Slurm numbers them with
// --ntasks-per-node: task i (SLURM_PROCID i) runs on node i / tasks_per_node.
// With per-role resources, the job's components (core/components.h) follow
// each other: the rule holds within each, from its first task and node.
//
// Thread safety: a pure function.
#pragma once

#include <string>
#include <vector>

#include "service/core/spec.h"

namespace tfslurm {

// The role of every task of a PyTorch experiment; its index is the rank.
inline constexpr char kRankRole[] = "rank";

struct TaskRole {
  std::string role;  // chief | ps | worker | evaluator; kRankRole for PyTorch
  int index = 0;     // index within the role, in task order; PyTorch: the rank
};

// One entry per task, element i for SLURM_PROCID i.
//  - pack: roles in order chief, ps, worker, evaluator, filling node 0 first
//    (the ps share the first nodes);
//  - spread: the same order dealt across nodes slot by slot (first slot of
//    every node, then the second slot...), so ps land on different nodes and
//    the chief on node 0;
//  - explicit: the list as given.
// These apply within the `resources` component; in a component of roles
// named in `roles`, each role has whole nodes of its own, in role order.
// Indexes within a role follow task order in all three. A PyTorch spec has
// no roles: every task is kRankRole, its index its SLURM_PROCID.
std::vector<TaskRole> AssignRoles(const ExperimentSpec& spec);

}  // namespace tfslurm
