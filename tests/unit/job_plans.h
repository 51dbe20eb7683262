// A JobPlan for tests of rendering and submission requests: the spec's
// components with memory plans given by hand (Submission::PlanFor asks the
// partitions instead), running as nobody in particular.
#pragma once

#include <vector>

#include "service/core/job_plan.h"

namespace tfslurm::testing {

// Component 0 gets `first`, component k the (k-1)th of `more`, or `first`.
inline JobPlan PlanOf(const ExperimentSpec& spec, const MemoryPlan& first,
                      const std::vector<MemoryPlan>& more = {}) {
  JobPlan plan;
  plan.components = JobComponents(spec);
  for (size_t k = 0; k < plan.components.size(); ++k)
    plan.memory.push_back(k == 0 || k - 1 >= more.size() ? first : more[k - 1]);
  return plan;
}

}  // namespace tfslurm::testing
