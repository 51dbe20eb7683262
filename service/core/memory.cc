#include "service/core/memory.h"

#include <algorithm>

namespace tfslurm {
namespace {

std::string N(int64_t v) { return std::to_string(v); }

// Memory per CPU: the spec's, else the partition's (or the cluster's)
// DefMemPerCPU, else the smallest node's RealMemory per CPU; with how it
// was chosen.
MemoryPlan ChooseMemPerCpu(const PartitionShape& partition, const Resources& r,
                           const std::string& where) {
  MemoryPlan plan;
  if (r.mem_per_task_mb) {
    // Slurm is asked per CPU; round up so each task gets at least what it asked.
    plan.mem_per_cpu_mb = (*r.mem_per_task_mb + r.cpus_per_task - 1) / r.cpus_per_task;
    plan.explanation = "mem_per_task_mb " + N(*r.mem_per_task_mb) + " given in the spec; " +
                       N(plan.mem_per_cpu_mb) + " MB per CPU x " + N(r.cpus_per_task) + " CPUs";
  } else if (partition.def_mem_per_cpu_mb) {
    plan.mem_per_cpu_mb = *partition.def_mem_per_cpu_mb;
    const std::string origin = partition.def_mem_per_cpu_cluster_wide
                                   ? "cluster-wide DefMemPerCPU=" + N(plan.mem_per_cpu_mb) +
                                         " MB (" + where + " sets none)"
                                   : where + " DefMemPerCPU=" + N(plan.mem_per_cpu_mb) + " MB";
    plan.explanation = "auto: " + origin + " x " + N(r.cpus_per_task) + " CPUs per task";
  } else {
    auto smallest = std::min_element(
        partition.nodes.begin(), partition.nodes.end(), [](const NodeShape& a, const NodeShape& b) {
          return a.real_memory_mb * std::max(b.cpus, 1) < b.real_memory_mb * std::max(a.cpus, 1);
        });
    plan.mem_per_cpu_mb = smallest->real_memory_mb / std::max(smallest->cpus, 1);
    plan.explanation = "auto: smallest RealMemory/CPUs in " + where + " is " + smallest->name +
                       " (" + N(smallest->real_memory_mb) + " MB / " + N(smallest->cpus) +
                       " CPUs = " + N(plan.mem_per_cpu_mb) + " MB per CPU) x " +
                       N(r.cpus_per_task) + " CPUs per task";
  }
  plan.mem_per_task_mb = plan.mem_per_cpu_mb * r.cpus_per_task;
  plan.explanation += " = " + N(plan.mem_per_task_mb) + " MB per task";
  return plan;
}

// Whether enough nodes of the partition hold every task of their share at
// once (CPUs and memory), spare nodes included; each shortfall named.
void CheckNodesFit(const PartitionShape& partition, const Resources& r, const MemoryPlan& plan,
                   const std::string& field, const std::string& where,
                   std::vector<FieldError>& errors) {
  const int64_t cpus_needed = int64_t{r.tasks_per_node} * r.cpus_per_task;
  const int64_t mem_needed = int64_t{r.tasks_per_node} * plan.mem_per_task_mb;
  int cpu_fit = 0, mem_fit = 0, both_fit = 0;
  int most_cpus = 0;
  int64_t most_mem = 0;
  for (const NodeShape& n : partition.nodes) {
    bool cpu_ok = n.cpus >= cpus_needed, mem_ok = n.real_memory_mb >= mem_needed;
    cpu_fit += cpu_ok;
    mem_fit += mem_ok;
    both_fit += cpu_ok && mem_ok;
    most_cpus = std::max(most_cpus, n.cpus);
    most_mem = std::max(most_mem, n.real_memory_mb);
  }
  // Spare nodes are held for the whole job, as the others.
  const int job_nodes = r.nodes + r.spare_nodes;
  const std::string nodes_needed =
      N(job_nodes) + " node" + (job_nodes == 1 ? "" : "s") +
      (r.spare_nodes > 0 ? " (" + N(r.nodes) + " and " + N(r.spare_nodes) + " spare_nodes)" : "");
  if (static_cast<int>(partition.nodes.size()) < job_nodes) {
    errors.push_back({field + ".nodes", "asks for " + nodes_needed + " but " + where + " has " +
                                            N(partition.nodes.size())});
    return;
  }
  if (cpu_fit < job_nodes)
    errors.push_back({field + ".tasks_per_node",
                      N(r.tasks_per_node) + " tasks x " + N(r.cpus_per_task) + " cpus_per_task = " +
                          N(cpus_needed) + " CPUs per node, but only " + N(cpu_fit) + " nodes of " +
                          where + " have that many (most: " + N(most_cpus) + "); " + nodes_needed +
                          " needed"});
  if (mem_fit < job_nodes)
    errors.push_back({field + ".mem_per_task_mb",
                      N(r.tasks_per_node) + " tasks x " + N(plan.mem_per_task_mb) + " MB = " +
                          N(mem_needed) + " MB per node, but only " + N(mem_fit) + " nodes of " +
                          where + " have that much RealMemory (most: " + N(most_mem) + " MB); " +
                          nodes_needed + " needed"});
  if (cpu_fit >= job_nodes && mem_fit >= job_nodes && both_fit < job_nodes)
    errors.push_back({field, "only " + N(both_fit) + " nodes of " + where + " have both " +
                                 N(cpus_needed) + " CPUs and " + N(mem_needed) + " MB; " +
                                 nodes_needed + " needed"});
}

}  // namespace

StatusOr<MemoryPlan> ComputeMemPerTask(const PartitionShape& partition, const Resources& r,
                                       const std::string& field) {
  std::vector<FieldError> errors;
  const std::string where = "partition " + partition.name;
  if (partition.nodes.empty()) {
    return InvalidArgument(where + " has no nodes",
                           {{field + ".partition", where + " has no nodes to run on"}});
  }
  const MemoryPlan plan = ChooseMemPerCpu(partition, r, where);
  CheckNodesFit(partition, r, plan, field, where, errors);
  if (partition.max_time_minutes && r.time_limit_minutes > *partition.max_time_minutes) {
    errors.push_back(
        {"resources.time_limit",
         FormatSlurmTime(r.time_limit_minutes) + " exceeds " + where + " MaxTime " +
             FormatSlurmTime(*partition.max_time_minutes) +
             "; ask for at most MaxTime (a longer training runs as a chain of attempts "
             "with restart.on: [timeout])"});
  }
  if (!errors.empty())
    return InvalidArgument("the experiment does not fit " + where, std::move(errors));
  return plan;
}

}  // namespace tfslurm
