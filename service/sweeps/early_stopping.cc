#include "service/sweeps/early_stopping.h"

#include <algorithm>

#include "base/number_text.h"

namespace tfslurm::sweeps {
namespace {

// The running average of `curve` over its points up to the one that
// reached `step`.
double RunningAverage(const Curve& curve, int64_t reached_at) {
  double sum = 0;
  int n = 0;
  for (const auto& [s, v] : curve) {
    if (s > reached_at) break;
    sum += v;
    ++n;
  }
  return n ? sum / n : 0;
}

StopDecision Asha(const EarlyStopping& rule, const SweepObjective& objective,
                  const std::vector<Curve>& curves, StopDecision d) {
  std::vector<double> at_rung;
  for (const Curve& c : curves)
    if (auto p = PointAt(c, d.rung_step)) at_rung.push_back(p->second);
  std::sort(at_rung.begin(), at_rung.end(),
            [&](double a, double b) { return objective.Better(a, b); });
  const size_t keep =
      std::max<size_t>(1, at_rung.size() / static_cast<size_t>(rule.reduction_factor));
  d.cut = at_rung[keep - 1];
  d.compared = static_cast<int>(at_rung.size());
  const bool stop = objective.Better(d.cut, d.value);
  d.verdict = stop ? StopDecision::Verdict::kStop : StopDecision::Verdict::kContinue;
  d.why = objective.tag + " " + SignificantDigits(d.value, 6) + " at step " +
          std::to_string(d.step) + " is " + (stop ? "worse than" : "within") + " rung " +
          std::to_string(d.rung + 1) + "'s cut " + SignificantDigits(d.cut, 6) + " (step " +
          std::to_string(d.rung_step) + ": the best " + std::to_string(keep) + " of " +
          std::to_string(at_rung.size()) + " trials there go on, reduction factor " +
          std::to_string(rule.reduction_factor) + ")";
  return d;
}

StopDecision Median(const EarlyStopping& rule, const SweepObjective& objective,
                    const std::vector<Curve>& curves, size_t trial, StopDecision d) {
  std::vector<double> averages;
  for (size_t i = 0; i < curves.size(); ++i) {
    if (i == trial) continue;
    if (auto p = PointAt(curves[i], d.rung_step))
      averages.push_back(RunningAverage(curves[i], p->first));
  }
  d.compared = static_cast<int>(averages.size());
  // Its best so far, up to the point that reached the rung.
  double best = d.value;
  for (const auto& [s, v] : curves[trial]) {
    if (s > d.step) break;
    if (objective.Better(v, best)) best = v;
  }
  d.value = best;
  if (d.compared < rule.min_trials) {
    d.verdict = StopDecision::Verdict::kContinue;
    d.why = "only " + std::to_string(d.compared) + " other trials at rung " +
            std::to_string(d.rung + 1) + " (step " + std::to_string(d.rung_step) + "); the rule " +
            "needs " + std::to_string(rule.min_trials);
    return d;
  }
  std::sort(averages.begin(), averages.end());
  const size_t n = averages.size();
  d.cut = n % 2 ? averages[n / 2] : (averages[n / 2 - 1] + averages[n / 2]) / 2;
  const bool stop = objective.Better(d.cut, best);
  d.verdict = stop ? StopDecision::Verdict::kStop : StopDecision::Verdict::kContinue;
  d.why = "best " + objective.tag + " " + SignificantDigits(best, 6) + " by step " +
          std::to_string(d.step) + " is " + (stop ? "worse than" : "no worse than") + " rung " +
          std::to_string(d.rung + 1) + "'s cut " + SignificantDigits(d.cut, 6) + " (step " +
          std::to_string(d.rung_step) + ": the median of " + std::to_string(n) +
          " other trials' running averages)";
  return d;
}

}  // namespace

Curve CurveOf(const ScalarSeries& series) {
  Curve c;
  for (const ScalarSeries::Point& p : series.points)
    if (p.value) c[p.step] = *p.value;  // (attempt, step) order: a later attempt wins
  return c;
}

std::optional<std::pair<int64_t, double>> PointAt(const Curve& curve, int64_t step) {
  auto it = curve.lower_bound(step);
  if (it == curve.end()) return std::nullopt;
  return *it;
}

std::optional<std::pair<int64_t, double>> ObjectiveOf(const Curve& curve,
                                                      const SweepObjective& objective) {
  if (curve.empty()) return std::nullopt;
  if (objective.at_step) return PointAt(curve, *objective.at_step);
  return *curve.rbegin();
}

Curve UpToRung(const Curve& curve, const EarlyStopping& rule, int stopped_at) {
  if (stopped_at < 0 || stopped_at >= static_cast<int>(rule.rungs.size())) return curve;
  auto reached = PointAt(curve, rule.rungs[stopped_at]);
  if (!reached) return curve;
  return Curve(curve.begin(), curve.upper_bound(reached->first));
}

StopDecision DecideAtRung(const EarlyStopping& rule, const SweepObjective& objective,
                          const std::vector<Curve>& curves, size_t trial, int rungs_passed) {
  StopDecision d;
  if (rule.rule == StoppingRule::kNone || trial >= curves.size() || rungs_passed < 0 ||
      rungs_passed >= static_cast<int>(rule.rungs.size()))
    return d;
  d.rung = rungs_passed;
  d.rung_step = rule.rungs[rungs_passed];
  auto reached = PointAt(curves[trial], d.rung_step);
  if (!reached) return d;
  d.step = reached->first;
  d.value = reached->second;
  return rule.rule == StoppingRule::kAsha ? Asha(rule, objective, curves, d)
                                          : Median(rule, objective, curves, trial, d);
}

}  // namespace tfslurm::sweeps
