// What a sweep reads of its trials: their experiments (only the sweep
// owner's), the node-hours they used, the best of them, and a trial that
// reports scalars but not the objective's tag. Pure functions of the store's
// rows, shared by the runner's steps (sweep_runner.h) and its views.
//
// Thread safety: none of their own; the store is thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "service/core/ports/store.h"
#include "service/core/records.h"
#include "service/sweeps/early_stopping.h"
#include "service/sweeps/sweep_spec.h"
#include "service/sweeps/sweeps.h"

namespace tfslurm::sweeps {

// Node-seconds of an experiment's attempts up to `now_ms`: each attempt
// from its start (a job running) to its end, times the job's nodes.
double NodeSeconds(const ExperimentRecord& e, const std::vector<AttemptRecord>& attempts,
                   int64_t now_ms);

// The experiment of trial `t`: only one its sweep started. A trial is tied
// to its experiment by id, and an id is free again once its experiment is
// deleted, so the owner is checked too: someone else's experiment of that id
// (made after a deletion, or while the trial waited to start) is not the
// trial's, and nothing of it is shown or acted on (NotFound, as if gone).
StatusOr<ExperimentRecord> TrialExperiment(Store& store, const SweepRecord& sweep,
                                           const SweepTrialRecord& t);

// The best trial: among those that succeeded, else among those not stopped
// early; by objective.
std::optional<int> BestTrial(const std::vector<SweepTrialView>& trials,
                             const SweepObjective& objective);

// A trial that reports training scalars, but not the objective's tag: most
// likely a misspelled objective.tag, which would otherwise leave every trial
// unjudged to its end.
struct ObjectiveMissing {
  std::string trial;  // its experiment id
  std::vector<std::string> tags;
  std::string nearest;          // the tag nearest the objective's ("did you mean")
  bool ran_to_its_end = false;  // its experiment succeeded without it

  // What the sweep's reason says of it: the tags it reported, and the
  // nearest to `objective`.
  std::string Why(const std::string& objective) const;
};

// Among the trials with no point of the objective's tag: one that
// succeeded without it, else the first that reported other tags. With
// `states` (of the trials that ran at this step's start) only those are
// looked at; without, every started trial (once, as the sweep completes).
std::optional<ObjectiveMissing> FindObjectiveMissing(
    Store& store, const std::vector<SweepTrialRecord>& trials, const std::vector<Curve>& curves,
    const std::vector<std::optional<ExperimentState>>& states, const std::string& objective);

}  // namespace tfslurm::sweeps
