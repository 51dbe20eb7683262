// How events and messages name a task and a duration, the same everywhere.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "service/core/attempt_run.h"

namespace tfslurm {

// "worker:1 (task 3 on node2)"; a PyTorch task, whose rank is its task
// number: "rank 3 (on node2)".
inline std::string TaskName(const TaskSlot& t, int proc) {
  if (t.role.role == kRankRole)
    return "rank " + std::to_string(t.role.index) + (t.node.empty() ? "" : " (on " + t.node + ")");
  return t.role.role + ":" + std::to_string(t.role.index) + " (task " + std::to_string(proc) +
         (t.node.empty() ? "" : " on " + t.node) + ")";
}

// "5 s", rounded to the nearest second.
inline std::string Seconds(int64_t ms) { return std::to_string((ms + 500) / 1000) + " s"; }

}  // namespace tfslurm
