// TF_CONFIG in TensorFlow's exact format:
//   {"cluster": {"chief": [...], "ps": [...], "worker": [...]},
//    "task": {"type": "worker", "index": 1}}
// The evaluator is not part of the training cluster: TensorFlow's
// TFConfigClusterResolver would otherwise wait for it in the PS strategy.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "service/core/placement.h"

namespace tfslurm {

// `addresses[i]` is "host:port" of task i; `roles[i]` its role.
// Returns TF_CONFIG for task `task`.
std::string BuildTfConfig(const std::vector<TaskRole>& roles,
                          const std::vector<std::string>& addresses, int task);

// The same in two steps, for a whole attempt: the cluster object once (it is
// O(tasks) long), then each task's TF_CONFIG around it. Building it per
// task would make an attempt's assignments O(tasks^2).
std::string BuildClusterSpec(const std::vector<TaskRole>& roles,
                             const std::vector<std::string>& addresses);
std::string TfConfigForTask(const std::string& cluster_spec, const TaskRole& task);

// "; TF_CONFIG is N bytes, ..." (for the barrier's event) when the cluster
// object of `tasks` tasks makes TF_CONFIG longer than a program can be
// started with (wire::kMaxTfConfigBytes): a TensorFlow cluster past about
// 7,700 tasks with short host names, 3,400 with long ones. The agents then
// pass it through a file (agent/tf_config_file.h), which only a Python
// program started without -S or -I reads by itself: the event says so.
// "" when it fits.
std::string TfConfigTooLong(const std::string& cluster_spec, int tasks);

}  // namespace tfslurm
