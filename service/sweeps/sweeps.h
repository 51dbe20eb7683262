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
  // Every poll interval, each open sweep's step: trials that ended are
  // recorded, running ones judged at their rungs, the cap applied, the next
  // trials started, and the sweep completed when its last trial has ended.
  virtual void Tick() = 0;
};

struct SweepsConfig {
  SpecLimits limits;                // a trial's spec, as any submission's
  int64_t poll_interval_ms = 2000;  // how often Tick takes a step
};

// Sweeps over `experiments`, keeping their rows in `store`; each must
// outlive them.
std::unique_ptr<Sweeps> NewSweeps(Experiments& experiments, Store& store, Clock& clock,
                                  Randomness& random, SweepsConfig config);

}  // namespace tfslurm::sweeps
