// Experiments: core's face to the REST API (api/) and the sweeps (sweeps/):
// submit, cancel, resume, delete and read experiments. It is one of core's
// three faces, split by audience: the agent endpoint (agentrpc/) sees
// Agents (agents.h), the daemon sees Core (core.h: both, and Recover and
// Tick), so each adapter sees the calls meant for it and no other. Behind
// them (experiments.cc) the parts do the work:
//   submission.h      submit, resume, automatic resubmission
//   agent_protocol.h  registration, barrier, heartbeats, progress, exits
//   slurm_watch.h     polling Slurm, timers, restarts, recovery
//   restart_policy.h  what an ended attempt means (pure)
//   core_state.h      the open experiments they share, and their lock
// Core does no I/O of its own: the store, Slurm, the clock, randomness and
// the file system are ports (core/ports/), so tests drive it with fakes and
// no sleeps.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "service/core/core_options.h"
#include "service/core/memory.h"
#include "service/core/ports/metrics.h"
#include "service/core/ports/store.h"
#include "service/core/records.h"

namespace tfslurm {

// A task of the current attempt as GET /experiments/{id} shows it: its
// stored record, the SLURM_PROCID of the agent running it (which names its
// output file; not its index once a spare took a node's place), and its job
// component (core/components.h; not stored, 0 in a plain job).
struct TaskView : TaskRecord {
  ProcId proc_id;
  int component = 0;
};

// What GET /experiments/{id} shows.
struct ExperimentView {
  ExperimentRecord experiment;
  std::vector<SpecRevisionRecord> spec_revisions;  // spec_json left empty
  std::vector<AttemptRecord> attempts;
  std::vector<TaskView> tasks;  // of the current attempt
  // When `tasks` is a page (GetPage): how many tasks its query kept, and
  // every task counted by role and state. -1 and empty: `tasks` is all.
  int64_t tasks_total = -1;
  std::vector<TaskStateCount> task_counts;
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

// Result of a dry run or a submission.
struct SubmitResult {
  ExperimentRecord experiment;
  AttemptRecord attempt;
  MemoryPlan memory;
};

// How a submission goes. A caller that keeps rows of its own about the
// experiment (a sweep's trial) has them written with its first attempt's
// intent, so they are stored exactly when the experiment is.
struct SubmitOptions {
  // Validate and render only: nothing is stored or submitted.
  bool dry_run = false;
  // Written in the transaction that records the experiment and its first
  // attempt's intent.
  Changes with_intent;
  // Slurm refused the first submission, and the experiment is removed
  // again: what to write instead, in that transaction (given the refusal).
  std::function<void(const Status& refusal, Changes& instead)> if_refused;
  // The caller keeps this experiment's id for itself (CoreConfig::kept_ids:
  // a sweep starting its trial), so the id is not refused as kept.
  bool keeper = false;
};

class Experiments {
 public:
  virtual ~Experiments() = default;

  // Validates, stores the intent, submits (SubmitOptions).
  virtual StatusOr<SubmitResult> Submit(const nlohmann::json& spec, const std::string& owner,
                                        const SubmitOptions& options) = 0;
  StatusOr<SubmitResult> Submit(const nlohmann::json& spec, const std::string& owner,
                                bool dry_run) {
    return Submit(spec, owner, SubmitOptions{dry_run, {}, {}});
  }
  // Cancels experiment `id`; its attempt ends with `reason`: kCancelled (a
  // user's cancel) or kStoppedEarly (a sweep's rule), never restarted either
  // way. The programs are stopped at once: each running task's agent is sent
  // a Shutdown now (SIGTERM, SIGKILL after the shutdown grace), as a decided
  // attempt's are, rather than waiting for Slurm to deliver the job's
  // cancel; the Slurm job is cancelled too. FailedPrecondition once it has
  // ended.
  [[nodiscard]] virtual Status Cancel(const std::string& id, const std::string& why,
                                      EndReason reason) = 0;
  [[nodiscard]] Status Cancel(const std::string& id, const std::string& why) {
    return Cancel(id, why, EndReason::kCancelled);
  }
  // Cancel, only if `owner` owns experiment `id` (NotFound otherwise, as for
  // an id that does not exist), checked under core's lock so that the check
  // and the cancel see the same experiment: a caller that knows an
  // experiment by id alone (a sweep's trial, whose id is free again once its
  // experiment is deleted) acts on no one else's.
  [[nodiscard]] virtual Status CancelOwnedBy(const std::string& id, const std::string& owner,
                                             const std::string& why, EndReason reason) = 0;
  // Whether experiment `id` is over for good: it has ended and its last
  // Slurm job has left Slurm (a job still being killed may hold its nodes).
  // Core watches each job until then, also across its own restarts; an
  // experiment it no longer watches whose last attempt is not recorded as
  // ended (its job was still ending when tfslurmd stopped) is looked up in
  // Slurm's job list (read at most once per poll interval), and its attempt
  // is recorded as ended once the job has gone. NotFound for no such id.
  virtual StatusOr<bool> IsOver(const std::string& id) = 0;
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
  // Get with only the page of the current attempt's tasks that `tasks`
  // asks for, read as such from the store (ExperimentView::tasks_total).
  virtual StatusOr<ExperimentView> GetPage(const std::string& id, const TaskQuery& tasks) = 0;
  virtual StatusOr<ExperimentRecord> GetExperiment(const std::string& id) = 0;
  virtual StatusOr<std::vector<AttemptRecord>> ListAttempts(const std::string& id) = 0;
  virtual StatusOr<std::vector<TaskRecord>> ListTasks(const std::string& id, int attempt) = 0;
  // The experiment's training scalars, as the store keeps them (only `tags`
  // when not empty); the caller has checked the experiment exists.
  virtual StatusOr<std::vector<ScalarSeries>> ReadScalars(const std::string& id,
                                                          const std::vector<std::string>& tags) = 0;
  // What a metrics scrape shows as gauges: experiments per state (from the
  // store), the agents connected now, and sweeps' ended trials by end reason.
  struct Gauges {
    std::vector<std::pair<ExperimentState, int64_t>> experiments_by_state;
    int64_t agents_connected = 0;
    std::vector<std::pair<std::string, int64_t>> sweep_trials_by_end_reason;
  };
  virtual StatusOr<Gauges> ReadGauges() = 0;
};

}  // namespace tfslurm
