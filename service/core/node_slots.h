// Which nodes of an attempt's Slurm job run the experiment's tasks, and
// which wait as spares (resources.spare_nodes).
//
// A job for N nodes and K spares holds N + K nodes, and its srun step runs
// tasks_per_node agents on each: SLURM_PROCID p on the job's node
// p / tasks_per_node (SLURM_NODEID; Slurm's block distribution, as
// placement.h relies on). The experiment's node slot s (its tasks
// s * tasks_per_node ... s * tasks_per_node + tasks_per_node - 1, numbered as
// placement.h does) runs on the job's node slots()[s]; the nodes in spares()
// wait with no program; any other node of the job is out of it (failed, or
// left for a spare). A new job starts with slots 0..N-1 and spares N..N+K-1.
// A restart in place may give a failed or excluded slot's place to the
// lowest spare (Replacing): placement stays deterministic.
//
// Thread safety: a value type.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "service/core/task_identity.h"

namespace tfslurm {

// Where an agent's SLURM_PROCID puts it in the attempt.
struct ProcPlace {
  enum Kind {
    kTask,   // it runs the experiment's task `task`
    kSpare,  // its node is a spare: it waits with no program
    kOut,    // its node is out of the attempt, or the proc is out of range
  } kind = kOut;
  TaskIndex task;
};

class NodeSlots {
 public:
  // A job with no spare: slot s on node s, for any number of slots.
  NodeSlots() = default;
  // A new job of `nodes` slots and `spares` spare nodes after them, each
  // running `tasks_per_node` agents.
  static NodeSlots ForNewJob(int nodes, int spares, int tasks_per_node);

  // The job's node running slot `slot`.
  int JobNodeOfSlot(int slot) const;
  // The job's node running task `task`, and the task's SLURM_PROCID.
  int JobNodeOfTask(TaskIndex task) const { return JobNodeOfSlot(task.value() / tasks_per_node_); }
  ProcId ProcOfTask(TaskIndex task) const {
    return ProcId(JobNodeOfTask(task) * tasks_per_node_ + task.value() % tasks_per_node_);
  }
  // Where SLURM_PROCID `proc` is in an attempt of `tasks` tasks.
  ProcPlace Place(ProcId proc, int tasks) const;
  // 1 for a job with no spare, where a slot is a task.
  int tasks_per_node() const { return tasks_per_node_; }

  const std::vector<int>& spares() const { return spares_; }
  bool IsIdentity() const { return slots_.empty() && spares_.empty(); }

  // The slots after each job node in `failed` that runs a slot gives its
  // place to the lowest spare of `ready` (spares whose agents wait) left, in
  // the order given; nullopt when they are too few. The spares not taken
  // stay spares.
  std::optional<NodeSlots> Replacing(const std::vector<int>& failed,
                                     const std::vector<int>& ready) const;

  // For the store: "" for a job with no spare, else
  // {"slots":[..],"spares":[..],"tasks_per_node":T};
  // nullopt for text that is neither.
  std::string ToText() const;
  static std::optional<NodeSlots> FromText(const std::string& text);

  bool operator==(const NodeSlots& o) const {
    return slots_ == o.slots_ && spares_ == o.spares_ && tasks_per_node_ == o.tasks_per_node_;
  }

 private:
  int tasks_per_node_ = 1;
  // Empty with no spare: slot s on node s.
  std::vector<int> slots_;
  std::vector<int> spares_;
};

}  // namespace tfslurm
