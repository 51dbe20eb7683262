// Sweeps: trials of one base experiment over a parameter space
// (schema/sweep-spec.md), each an ordinary experiment <sweep>-<n> of the
// sweep's owner, at most max_concurrent in Slurm at once, stopped early by
// the sweep's rule, cancelled with the sweep or at its node-hours cap.
//
// Sweeps are a client of core, not a part of it: they start, read and stop
// experiments through core's facade (core/experiments.h) and keep their own
// rows through the store port, and core knows nothing of them. The REST
// routes (api/sweeps_api.h) and the daemon's ticker call this face.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "service/core/experiments.h"
#include "service/core/ports/clock.h"
#include "service/core/ports/store.h"
#include "service/core/records.h"
#include "service/core/spec.h"

namespace tfslurm::sweeps {

// What GET /sweeps/{id} shows of one trial.
struct SweepTrialView {
  SweepTrialRecord trial;  // objective: while it runs, as its scalars stand now
  // Its experiment's state and reason; nullopt when it has none (not
  // started, or deleted).
  std::optional<ExperimentState> state;
  std::string reason;
};

// What a sweep's deletion removed: its trials' experiments, each as
// Experiments::Delete removed it.
struct SweepDeleteResult {
  std::string id;
  std::vector<DeleteResult> experiments;
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

class Sweeps {
 public:
  virtual ~Sweeps() = default;

  // Checks the sweep and every trial (as a dry run of its submission), then
  // stores it and starts its first trials. Nothing is stored when anything
  // is refused.
  virtual StatusOr<SweepView> Submit(const nlohmann::json& spec, const std::string& owner) = 0;
  virtual StatusOr<SweepView> Get(const std::string& id) = 0;
  // Newest first; `owner` empty: everyone's.
  virtual StatusOr<std::vector<SweepRecord>> List(const std::string& owner) = 0;
  // Cancels the sweep and its running trials. FailedPrecondition once it
  // has ended.
  [[nodiscard]] virtual Status Cancel(const std::string& id, const std::string& why) = 0;
  // Removes an ended sweep: its trials' experiments (each as
  // Experiments::Delete would, with `files` their directories) and then its
  // own rows. FailedPrecondition while it runs; Unavailable while a trial's
  // Slurm job is still finishing (retry). A trial's experiment deleted
  // already, or not the sweep owner's, is skipped.
  virtual StatusOr<SweepDeleteResult> Delete(const std::string& id, bool files) = 0;
  // Every poll interval, each open sweep's step: trials that ended are
  // recorded, running ones judged at their rungs, the cap applied, the next
  // trials started, and the sweep completed when its last trial has ended.
  virtual void Tick() = 0;
};

struct SweepsConfig {
  SpecLimits limits;                // a trial's spec, as any submission's
  int64_t poll_interval_ms = 2000;  // how often Tick takes a step
  // Sweeps still running per owner; one more is refused (ResourceExhausted),
  // since every open sweep is stepped at each poll on the ticker's thread.
  int max_open_per_owner = 10;
};

// Whether a submission of experiment `id` by `owner` takes an id a sweep
// keeps: <sweep>-<n>, n from 1 to a stored sweep's trials, is kept for that
// trial while the sweep exists, so that nobody (its owner included, by
// hand) takes it before the trial starts. The sweep's owner is told why;
// anyone else only that it is taken, as for any id (AlreadyExists). Core
// asks it of every submission but a sweep's own (CoreConfig::kept_ids).
Status CheckIdNotKept(Store& store, const std::string& id, const std::string& owner);

// Sweeps over `experiments`, keeping their rows in `store`; each must
// outlive them.
std::unique_ptr<Sweeps> NewSweeps(Experiments& experiments, Store& store, Clock& clock,
                                  Randomness& random, SweepsConfig config);

}  // namespace tfslurm::sweeps
