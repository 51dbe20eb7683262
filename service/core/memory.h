// Memory per task and the fit check: the rule sites apply by hand
// ("MEMPERTASK"), done once, with the reasoning kept for the sbatch script.
// Pure logic: the partition shape comes from slurm/ (or a test).
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "service/core/spec.h"

namespace tfslurm {

struct NodeShape {
  std::string name;
  int cpus = 0;
  int64_t real_memory_mb = 0;
  // DOWN, DRAINED or DRAINING, FAILED, or not responding: Slurm will not
  // start a job on it now.
  bool unavailable = false;
};

struct PartitionShape {
  std::string name;
  // The DefMemPerCPU Slurm applies to the partition's jobs: the partition's
  // own (shared partitions), else the cluster-wide one from slurm.conf.
  std::optional<int64_t> def_mem_per_cpu_mb;
  bool def_mem_per_cpu_cluster_wide = false;  // it came from slurm.conf's top level
  std::optional<int> max_time_minutes;        // nullopt: INFINITE
  std::vector<NodeShape> nodes;
};

struct MemoryPlan {
  int64_t mem_per_cpu_mb = 0;   // what the job asks Slurm for (--mem-per-cpu)
  int64_t mem_per_task_mb = 0;  // mem_per_cpu_mb * cpus_per_task
  std::string explanation;      // one line, for the script's comment and the API
};

// Computes memory per task for `resources` on `partition` and checks that the
// job fits: `nodes` nodes that each hold tasks_per_node tasks' CPUs and
// memory, and a time limit within MaxTime. A spec that cannot run is refused
// with the numbers (InvalidArgument naming resources.* fields).
// `field` is where the refusals point: "resources", or a component's
// "roles.<role>" (core/components.h).
StatusOr<MemoryPlan> ComputeMemPerTask(const PartitionShape& partition, const Resources& resources,
                                       const std::string& field = "resources");

}  // namespace tfslurm
