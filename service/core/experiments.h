// Experiments: core's face. The REST routes (api/), the agent endpoint
// (agentrpc/) and the daemon call it and nothing else of core's state;
// NewExperiments makes it, once, from everything it needs (its ports, its
// config, where it reports metrics and who is told of its writes). Behind it
// (experiments.cc) the parts do the work:
//   submission.h      submit, resume, automatic resubmission
//   agent_protocol.h  registration, barrier, heartbeats, progress, exits
//   slurm_watch.h     polling Slurm, timers, restarts, recovery
//   restart_policy.h  what an ended attempt means (pure)
//   sweep_runner.h    sweeps: trials started, stopped early, ended
//   core_state.h      the open experiments they share, and their lock
// Core does no I/O of its own: the store, Slurm, the clock, randomness and
// the file system are ports (core/ports/), so tests drive it with fakes and
// no sleeps.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "service/core/agent_messages.h"
#include "service/core/core_options.h"
#include "service/core/memory.h"
#include "service/core/ports/metrics.h"
#include "service/core/ports/store.h"
#include "service/core/records.h"

namespace tfslurm {

// What GET /experiments/{id} shows.
struct ExperimentView {
  ExperimentRecord experiment;
  std::vector<SpecRevisionRecord> spec_revisions;  // spec_json left empty
  std::vector<AttemptRecord> attempts;
  std::vector<TaskRecord> tasks;  // of the current attempt; proc_id is SLURM_PROCID
  // The current attempt's spare nodes (resources.spare_nodes), in job node
  // order: the node's name once its agents registered ("" before), and
  // whether every agent there waits in the job, ready to take a failed
  // node's place.
  struct Spare {
    std::string node;
    bool waiting = false;
  };
  std::vector<Spare> spares;
  std::vector<EventRecord> events;
  // The image and the runtime each role runs in (container in the spec;
  // the runtime resolved with the site's, container_launch.h); empty
  // without a container.
  std::vector<RoleContainer> containers;
};

// What a deletion removed.
struct DeleteResult {
  std::string id;
  // The experiment's directory, when its files were removed; else "".
  std::string files_removed_from;
  int64_t entries_removed = 0;
  // A model_dir outside the experiment's directory, which is never removed.
  std::string model_dir_kept;
};

// What GET /sweeps/{id} shows of one trial.
struct SweepTrialView {
  SweepTrialRecord trial;  // objective: while it runs, as its scalars stand now
  // Its experiment's state and reason; nullopt when it has none (not
  // started, or deleted).
  std::optional<ExperimentState> state;
  std::string reason;
};

// What GET /sweeps/{id} shows.
struct SweepView {
  SweepRecord sweep;
  std::vector<SweepTrialView> trials;  // the started ones, by index
  // The best objective among the trials that succeeded; while none has, the
  // best so far of those not stopped early; if every trial was stopped, the
  // best of them. nullopt: no objective yet.
  std::optional<int> best_trial;
  double node_seconds = 0;  // every trial's nodes x running time so far
};

// Result of a dry run or a submission.
struct SubmitResult {
  ExperimentRecord experiment;
  AttemptRecord attempt;
  MemoryPlan memory;
};

class Experiments {
 public:
  virtual ~Experiments() = default;

  // Loads open experiments from the store and reconciles them with Slurm:
  // an attempt whose submission was interrupted is matched by job name, or
  // submitted now. Call once before serving. When slurmctld does not answer
  // or the submission fails, Tick goes on reconciling at every poll.
  [[nodiscard]] virtual Status Recover() = 0;

  // Validates, stores the intent, submits. `dry_run` validates and renders
  // only: nothing is stored or submitted.
  virtual StatusOr<SubmitResult> Submit(const nlohmann::json& spec, const std::string& owner,
                                        bool dry_run) = 0;
  [[nodiscard]] virtual Status Cancel(const std::string& id, const std::string& why) = 0;
  // Starts a new attempt of a finished experiment with the same MODEL_DIR, so
  // the program restores its latest checkpoint. The restart budget starts
  // over. FailedPrecondition while the experiment still runs. `changes`
  // (null: none) changes the spec as a merge patch (core/spec_changes.h:
  // what may change, and why the rest may not); the changed spec is the
  // next spec revision, which the new attempt runs.
  virtual StatusOr<AttemptRecord> Resume(const std::string& id,
                                         const nlohmann::json& changes = nullptr) = 0;
  // Removes an ended experiment from the store (its attempts, tasks, events,
  // scalars, spec revisions), and with `files` its directory <output
  // root>/<id>, as the owner's account (core/deletion.h). The id is free
  // again. FailedPrecondition while it is open, naming its state.
  virtual StatusOr<DeleteResult> Delete(const std::string& id, bool files) = 0;

  // Reads, as the store has them.
  virtual StatusOr<ExperimentView> Get(const std::string& id) = 0;
  virtual StatusOr<ExperimentRecord> GetExperiment(const std::string& id) = 0;
  virtual StatusOr<std::vector<AttemptRecord>> ListAttempts(const std::string& id) = 0;
  virtual StatusOr<std::vector<TaskRecord>> ListTasks(const std::string& id, int attempt) = 0;
  // The experiment's training scalars, as the store keeps them (only `tags`
  // when not empty); the caller has checked the experiment exists.
  virtual StatusOr<std::vector<ScalarSeries>> ReadScalars(const std::string& id,
                                                          const std::vector<std::string>& tags) = 0;
  // Sweeps (core/sweep_runner.h). SubmitSweep checks the sweep and every
  // trial before anything is stored, then starts its first trials.
  virtual StatusOr<SweepView> SubmitSweep(const nlohmann::json& spec, const std::string& owner) = 0;
  virtual StatusOr<SweepView> GetSweep(const std::string& id) = 0;
  // Newest first; `owner` empty: everyone's.
  virtual StatusOr<std::vector<SweepRecord>> ListSweeps(const std::string& owner) = 0;
  // Cancels the sweep and its running trials.
  [[nodiscard]] virtual Status CancelSweep(const std::string& id, const std::string& why) = 0;

  // What a metrics scrape shows as gauges: experiments per state (from the
  // store), the agents connected now, and sweeps' ended trials by end reason.
  struct Gauges {
    std::vector<std::pair<ExperimentState, int64_t>> experiments_by_state;
    int64_t agents_connected = 0;
    std::vector<std::pair<std::string, int64_t>> sweep_trials_by_end_reason;
  };
  virtual StatusOr<Gauges> ReadGauges() = 0;

  // The agent protocol (agent_protocol.h). OnRegister attaches `channel`
  // for the task; the reply (Assignment or Refused) arrives through it, now
  // or when the barrier completes.
  virtual void OnRegister(const TaskRef& ref, const RegisterInfo& info,
                          std::shared_ptr<TaskChannel> channel) = 0;
  virtual Status OnHeartbeat(const TaskRef& ref) = 0;
  virtual Status OnProgress(const TaskRef& ref, int64_t step, const std::string& path) = 0;
  virtual Status OnScalars(const TaskRef& ref, std::vector<ScalarPoint> points) = 0;
  virtual Status OnExited(const TaskRef& ref, const ExitReport& exit) = 0;
  // `detail`: the agent's own word on why the program ended (Exited.detail).
  Status OnExited(const TaskRef& ref, std::optional<int> exit_code, std::optional<int> signal,
                  bool reaped, const std::string& detail = "") {
    return OnExited(ref, ExitReport{exit_code, signal, reaped, detail});
  }
  virtual void OnDisconnect(const TaskRef& ref, const TaskChannel* channel) = 0;

  // Periodic work (slurm_watch.h): polls Slurm every poll_interval_ms (one
  // RPC), times out barriers, marks lost tasks, ends unconfirmed reaps,
  // submits restarts. Safe to call from several threads at once.
  virtual void Tick() = 0;
};

// Core, made from its ports and config. `metrics` (which must outlive it;
// null: nothing is counted) hears what core counts; every observer is told
// of every batch of changes core commits.
std::unique_ptr<Experiments> NewExperiments(
    const CorePorts& ports, CoreConfig config, Metrics* metrics = nullptr,
    std::vector<std::shared_ptr<CommitObserver>> observers = {});

}  // namespace tfslurm
