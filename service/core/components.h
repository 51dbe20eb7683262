// The components of an experiment's Slurm job. Without per-role resources
// (`roles` in the spec) there is one: `resources`, and the job is a plain
// job as it always was. With them, the job is one heterogeneous job with a
// component per distinct resource group:
//  - component 0 is `resources`, holding every role `roles` does not name
//    (absent when roles names every role that has tasks);
//  - then one component per group of named roles whose blocks agree on
//    everything but nodes (partition, tasks_per_node, cpus_per_task,
//    gpus_per_node, mem_per_task_mb, constraint, nodelist, exclusive), its
//    nodes the sum of theirs,
//    in the order of each group's first role: chief, ps, worker, evaluator.
// srun --het-group numbers tasks (SLURM_PROCID) and nodes (SLURM_NODEID)
// across the whole job in component order, so a component's tasks are one
// contiguous range starting at first_task, on nodes from first_node.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "service/core/spec.h"
#include "service/core/task_identity.h"

namespace tfslurm {

struct JobComponent {
  // The roles whose tasks run here, in the order chief, ps, worker,
  // evaluator (for PyTorch, none).
  std::vector<std::string> roles;
  // The `resources` component, whose roles share nodes by `placement`; in a
  // named group each role has whole nodes of its own, in role order.
  bool shared = false;
  // Where a refusal about it points: "resources" or "roles.<first role>".
  std::string field;
  Resources resources;     // partition, nodes, tasks_per_node, ... of this component
  std::string constraint;  // --constraint; empty: none
  int first_task = 0;      // SLURM_PROCID of its first task
  int first_node = 0;      // SLURM_NODEID of its first node
  int Tasks() const { return resources.Tasks(); }
};

std::vector<JobComponent> JobComponents(const ExperimentSpec& spec);

// The index in `components` of the component running task `task`.
int ComponentOfTask(const std::vector<JobComponent>& components, TaskIndex task);

// "ps, worker" for a component's roles; "all" for a PyTorch job's one.
std::string ComponentRoles(const JobComponent& component);

}  // namespace tfslurm
