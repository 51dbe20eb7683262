#include "service/core/sweep_objective.h"

#include <algorithm>

#include "base/nearest_word.h"

namespace tfslurm {

std::string ObjectiveMissing::Why(const std::string& objective) const {
  std::string list;
  for (size_t i = 0; i < tags.size() && i < 8; ++i) list += (i ? ", " : "") + tags[i];
  if (tags.size() > 8) list += ", ... (" + std::to_string(tags.size()) + " tags)";
  return "trial " + trial + " reported " + list + " but not " + objective +
         ", the sweep's objective" + (nearest.empty() ? "" : " (did you mean '" + nearest + "'?)");
}

std::optional<ObjectiveMissing> FindObjectiveMissing(
    Store& store, const std::vector<SweepTrialRecord>& trials, const std::vector<Curve>& curves,
    const std::vector<std::optional<ExperimentState>>& states, const std::string& objective) {
  std::optional<ObjectiveMissing> found;
  for (size_t i = 0; i < trials.size(); ++i) {
    const SweepTrialRecord& t = trials[i];
    if (t.state == SweepTrialState::kNotStarted || !curves[i].empty()) continue;
    if (!states.empty() && !states[i]) continue;
    auto tags = store.ListScalarTags(t.experiment_id);
    if (!tags.ok() || tags->empty() ||
        std::find(tags->begin(), tags->end(), objective) != tags->end())
      continue;
    ObjectiveMissing m{t.experiment_id, *tags, NearestWord(objective, *tags)};
    m.ran_to_its_end = !states.empty() && states[i] == ExperimentState::kSucceeded;
    if (m.ran_to_its_end) return m;
    if (!found) found = std::move(m);
  }
  return found;
}

}  // namespace tfslurm
