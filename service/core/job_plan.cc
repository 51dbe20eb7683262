#include "service/core/job_plan.h"

#include <utility>

namespace tfslurm {

MemoryPlan JobPlan::Summary() const {
  if (memory.empty()) return {};
  MemoryPlan summary = memory.front();
  if (memory.size() == 1) return summary;
  summary.explanation.clear();
  for (size_t k = 0; k < memory.size() && k < components.size(); ++k)
    summary.explanation += (k ? "; " : "") + std::string("component ") + std::to_string(k) + " (" +
                           ComponentRoles(components[k]) + "): " + memory[k].explanation;
  return summary;
}

StatusOr<JobPlan> PlanJob(const ExperimentSpec& spec,
                          const std::vector<StatusOr<PartitionShape>>& partitions, RunAs account) {
  JobPlan plan;
  plan.components = JobComponents(spec);
  plan.account = std::move(account);
  if (partitions.size() != plan.components.size())
    return Internal("PlanJob: " + std::to_string(partitions.size()) + " partitions for " +
                    std::to_string(plan.components.size()) + " job components");
  std::vector<FieldError> fields;
  std::string message;
  for (size_t k = 0; k < plan.components.size(); ++k) {
    const JobComponent& c = plan.components[k];
    StatusOr<MemoryPlan> memory = partitions[k].ok()
                                      ? ComputeMemPerTask(*partitions[k], c.resources, c.field)
                                      : StatusOr<MemoryPlan>(partitions[k].status());
    if (memory.ok()) {
      plan.memory.push_back(*memory);
      continue;
    }
    // One message for every component that does not fit.
    const std::string what = plan.components.size() > 1 ? "component " + std::to_string(k) + " (" +
                                                              ComponentRoles(c) + "): "
                                                        : "";
    message += (message.empty() ? "" : "; ") + what + memory.status().message();
    for (FieldError f : memory.status().fields()) {
      if (c.field != "resources" && f.field.rfind("resources.partition", 0) == 0)
        f.field = c.field + ".partition";
      f.reason = what + f.reason;
      fields.push_back(std::move(f));
    }
  }
  if (!message.empty()) return InvalidArgument(message, std::move(fields));
  return plan;
}

}  // namespace tfslurm
