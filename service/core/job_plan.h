// JobPlan: what one attempt's job is, decided once before anything of the
// attempt is rendered or submitted: its components, the memory per task of
// each from its own partition, and the Unix account it runs as. Submission
// plans once per attempt (Submission::PlanJob asks the partitions and the
// accounts, then PlanJob decides), and the dry run, the script, the request
// to Slurm and the memory the experiment shows all read that one plan.
//
// Thread safety: plain values; PlanJob is a pure function.
#pragma once

#include <vector>

#include "base/status.h"
#include "service/core/components.h"
#include "service/core/memory.h"
#include "service/core/ports/accounts.h"
#include "service/core/spec.h"

namespace tfslurm {

struct JobPlan {
  std::vector<JobComponent> components;  // JobComponents(spec): one for a plain job
  std::vector<MemoryPlan> memory;        // per component, in component order
  RunAs account;                         // the Unix account the job runs as
  // The experiment's one memory line (mem_per_task_mb, mem_explanation, the
  // submitting event): the first component's numbers, and with several
  // components an explanation naming each.
  MemoryPlan Summary() const;
};

// The plan of `spec`'s job, component k on `partitions[k]` (one per
// component of JobComponents(spec), in order; an InvalidArgument there is
// Slurm's word that the partition does not exist). Every component that
// does not fit its partition, or has none, is named in one InvalidArgument,
// each field by its component's own block (a role's partition is
// roles.<role>.partition).
StatusOr<JobPlan> PlanJob(const ExperimentSpec& spec,
                          const std::vector<StatusOr<PartitionShape>>& partitions, RunAs account);

}  // namespace tfslurm
