// A sweep whose objective no trial reports: most likely a misspelled
// objective.tag, which would otherwise leave every trial unjudged to its
// end. SweepRunner names the tags the trials did report, and the nearest.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "service/core/early_stopping.h"
#include "service/core/ports/store.h"
#include "service/core/records.h"

namespace tfslurm {

// A trial that reports training scalars, but not the objective's tag.
struct ObjectiveMissing {
  std::string trial;  // its experiment id
  std::vector<std::string> tags;
  std::string nearest;          // the tag nearest the objective's ("did you mean")
  bool ran_to_its_end = false;  // its experiment succeeded without it

  // "trial T reported a, b but not OBJECTIVE, the sweep's objective (did you mean 'b'?)"
  std::string Why(const std::string& objective) const;
};

// Among the trials with no point of the objective's tag (`curves`, by
// trial): one that succeeded without it, else the first that reported other
// tags. With `states` (of the trials that ran at this step's start) only
// those are looked at; without, every started trial (once, as the sweep
// completes).
std::optional<ObjectiveMissing> FindObjectiveMissing(
    Store& store, const std::vector<SweepTrialRecord>& trials, const std::vector<Curve>& curves,
    const std::vector<std::optional<ExperimentState>>& states, const std::string& objective);

}  // namespace tfslurm
