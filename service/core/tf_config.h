// TF_CONFIG in TensorFlow's exact format:
//   {"cluster": {"chief": [...], "ps": [...], "worker": [...]},
//    "task": {"type": "worker", "index": 1}}
// The evaluator is not part of the training cluster: TensorFlow's
// TFConfigClusterResolver would otherwise wait for it in the PS strategy.
#pragma once

#include <string>
#include <vector>

#include "service/core/placement.h"

namespace tfslurm {

// `addresses[i]` is "host:port" of task i; `roles[i]` its role.
// Returns TF_CONFIG for task `task`.
std::string BuildTfConfig(const std::vector<TaskRole>& roles,
                          const std::vector<std::string>& addresses, int task);

}  // namespace tfslurm
