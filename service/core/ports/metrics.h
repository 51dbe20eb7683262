// The metrics port: what core tells the operators' monitoring as it
// happens. service/metrics/ implements it for Prometheus; NoMetrics is the
// default, so a core without one (unit tests, benchmarks) counts nothing.
//
// Thread safety: implementations are thread-safe and cheap; core calls them
// under its lock, so they must not block or call back into core.
#pragma once

#include <string>

#include "service/core/records.h"

namespace tfslurm {

// Where a restart runs: inside the failed attempt's Slurm job, or as a new one.
enum class RestartKind { kInPlace, kNewJob };

class Metrics {
 public:
  virtual ~Metrics() = default;
  // A task's first registration of an attempt (not its reconnections).
  virtual void Registered() = 0;
  // A task's agent started, `seconds_after_launch` after srun launched its
  // step: under pyxis and OCI the image's import and the container's setup
  // are in it. `runtime`: the tasks' container runtime, "none" without one.
  virtual void TaskStarted(const std::string& runtime, double seconds_after_launch) = 0;
  // A container started: a task's under pyxis and OCI (the agent runs in
  // it), a program's under enroot and Apptainer (the agent starts each).
  virtual void ContainerStarted(const std::string& runtime) = 0;
  // The barrier completed: seconds from the job's start to the assignments.
  virtual void RendezvousDone(double seconds) = 0;
  // Every task sent a Shutdown confirmed its exit: seconds from the Shutdown.
  virtual void ReapingDone(double seconds) = 0;
  // An attempt ended for this reason.
  virtual void AttemptEnded(EndReason reason) = 0;
  // An automatic restart was decided after an attempt that ended so.
  virtual void Restarted(EndReason reason, RestartKind kind) = 0;
  // A task's program was restarted alone inside its attempt
  // (restart.max_task_restarts); `role` is its TF role.
  virtual void TaskRestartedAlone(const std::string& role) = 0;
  // One poll of Slurm's jobs: how long it took, and whether it failed.
  virtual void SlurmPolled(double seconds, bool ok) = 0;
  // An ended experiment was deleted: by its owner (`by_retention` false) or
  // by the retention sweep; `files_removed` entries of its directory went
  // with it (0: its files were kept).
  virtual void ExperimentDeleted(bool by_retention, int64_t files_removed) = 0;
};

class NoMetrics final : public Metrics {
 public:
  void Registered() override {}
  void TaskStarted(const std::string&, double) override {}
  void ContainerStarted(const std::string&) override {}
  void RendezvousDone(double) override {}
  void ReapingDone(double) override {}
  void AttemptEnded(EndReason) override {}
  void Restarted(EndReason, RestartKind) override {}
  void TaskRestartedAlone(const std::string&) override {}
  void SlurmPolled(double, bool) override {}
  void ExperimentDeleted(bool, int64_t) override {}
};

}  // namespace tfslurm
