#include "service/sweeps/sweep_trials.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/nearest_word.h"
#include "service/core/components.h"
#include "service/core/spec.h"
#include "service/sweeps/sweep_space.h"

namespace tfslurm::sweeps {
namespace {

// The nodes a job of `spec_json` holds: every component's.
int NodesOf(const std::string& spec_json) {
  auto spec = ParseSpec(nlohmann::json::parse(spec_json, nullptr, false));
  if (!spec.ok()) return 1;
  int nodes = 0;
  for (const JobComponent& c : JobComponents(*spec)) nodes += c.resources.nodes;
  return nodes > 0 ? nodes : 1;
}

}  // namespace

double NodeSeconds(const ExperimentRecord& e, const std::vector<AttemptRecord>& attempts,
                   int64_t now_ms) {
  double ms = 0;
  for (const AttemptRecord& a : attempts) {
    if (a.in_place || a.started_at == 0) continue;  // in place: the job of the one before
    const int64_t end = a.ended_at > 0 ? a.ended_at : now_ms;
    if (end > a.started_at) ms += static_cast<double>(end - a.started_at);
  }
  return ms / 1000.0 * NodesOf(e.spec_json);
}

StatusOr<ExperimentRecord> TrialExperiment(Store& store, const SweepRecord& sweep,
                                           const SweepTrialRecord& t) {
  if (t.state == SweepTrialState::kNotStarted)
    return NotFound("trial " + std::to_string(t.index) + " never started");
  auto e = store.GetExperiment(t.experiment_id);
  if (!e.ok()) return e.status();
  if (e->owner != sweep.owner) return NotFound("no experiment '" + t.experiment_id + "'");
  return e;
}

std::optional<int> BestTrial(const std::vector<SweepTrialView>& trials,
                             const SweepObjective& objective) {
  auto pick = [&](bool succeeded_only) -> std::optional<int> {
    std::optional<int> best;
    std::optional<double> value;
    for (const SweepTrialView& v : trials) {
      const SweepTrialRecord& t = v.trial;
      if (!t.objective || t.end_reason == EndReason::kStoppedEarly) continue;
      // Its experiment's state, or the trial's own record of its end when
      // the experiment was deleted since.
      const bool succeeded =
          v.state ? *v.state == ExperimentState::kSucceeded : t.end_reason == EndReason::kSucceeded;
      if (succeeded_only && !succeeded) continue;
      if (!value || objective.Better(*t.objective, *value)) {
        value = t.objective;
        best = t.index;
      }
    }
    return best;
  };
  if (auto best = pick(true)) return best;
  if (auto best = pick(false)) return best;
  // Every trial stopped early (a rule cutting at every rung): the best
  // value seen is still the sweep's best.
  std::optional<int> best;
  std::optional<double> value;
  for (const SweepTrialView& v : trials)
    if (v.trial.objective && (!value || objective.Better(*v.trial.objective, *value))) {
      value = v.trial.objective;
      best = v.trial.index;
    }
  return best;
}

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

Status CheckIdNotKept(Store& store, const std::string& id, const std::string& owner) {
  // <sweep>-<n>: n from 1 to the sweep's trials, written as TrialId writes it.
  const size_t dash = id.rfind('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == id.size() || id.size() - dash > 6)
    return Status::Ok();
  int n = 0;
  for (size_t i = dash + 1; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9') return Status::Ok();
    n = n * 10 + (id[i] - '0');
  }
  auto sweep = store.GetSweep(id.substr(0, dash));
  if (!sweep.ok() || n < 1 || n > sweep->trials || TrialId(sweep->id, n) != id) return Status::Ok();
  if (sweep->owner != owner)
    return Status(StatusCode::kAlreadyExists,
                  "experiment id '" + id + "' is taken; choose another id",
                  {{"id", "'" + id + "' is taken"}});
  return Status(StatusCode::kAlreadyExists,
                "experiment id '" + id + "' is kept for trial " + std::to_string(n) +
                    " of your sweep '" + sweep->id + "'; choose another id",
                {{"id", "'" + id + "' is kept for trial " + std::to_string(n) + " of sweep '" +
                            sweep->id + "'"}});
}

}  // namespace tfslurm::sweeps
