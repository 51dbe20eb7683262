// A task restarted alone (restart.max_task_restarts). Under TensorFlow's
// parameter servers the chief's ClusterCoordinator survives a worker's loss:
// it treats an UnavailableError from /job:worker as the worker's failure,
// puts the closure back in its queue, trains on with the other workers, and
// its failure handler calls update_server_def until the worker answers again
// at the same address, waiting up to an hour (WorkerPreemptionHandler in
// tensorflow/python/distribute/coordinator/cluster_coordinator.py, TF 2.21:
// wait_on_failure, _preemption_handler, _is_worker_failure,
// _WORKER_MAXIMUM_RECOVERY_SEC). An evaluator is a side-car no one waits for.
// So when a worker's or an evaluator's program dies while the chief and
// every ps run, only that program starts again: its agent, which holds the
// task's port for its whole life (agent/port_reservation.h), reports the
// exit and comes back in standby, and the service answers with the task's
// Assignment for the same attempt: same TF_CONFIG, same address. The attempt
// runs on; each such restart is counted on the task (TaskRecord::restarts),
// capped per attempt, and said in a `restarted_alone` event.
//
// Thread safety: every method needs core's lock held.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "service/core/core_state.h"

namespace tfslurm {

class LoneRestart {
 public:
  explicit LoneRestart(CoreState& core) : core_(core) {}

  // Task `task` of `a` reported its program's exit (not a re-sent report,
  // not reaped). True when the program is restarted alone instead of the
  // exit counting: the exit is noted on the task and in an event, and the
  // task waits for its agent's standby registration (OnStandby).
  bool OnExit(OpenExperiment& a, TaskIndex task, std::optional<int> exit_code,
              std::optional<int> signal, const std::string& detail, Changes& c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());

  // The agent of task `task` registered in standby. True when its program is
  // to run again now: `channel` is the task's, and the caller sends its
  // Assignment. False when it is not restarting alone, or no longer can (the
  // attempt was decided meanwhile): then its death counts as its exit now,
  // and the caller goes on as with any standby.
  bool OnStandby(OpenExperiment& a, TaskIndex task, const std::shared_ptr<TaskChannel>& channel,
                 Changes& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());

 private:
  CoreState& core_;
};

}  // namespace tfslurm
