// Early stopping of a sweep's trials from their objective curves, as pure
// functions: ASHA (asynchronous successive halving) and the median stopping
// rule, each deciding at the rungs (steps) of EarlyStopping. A decision
// reads only the curves as reported so far, so replaying the same reports
// in the same order gives the same decisions (tests/unit/early_stopping_test.cc).
//
//   asha    at rung r, the values of every trial that has reached r (this one
//           included) are ranked; the best max(1, n / reduction_factor) go
//           on, the others stop. Its cut is the worst value that goes on.
//   median  at rung r, with at least min_trials other trials at r: the trial
//           stops when its best value so far is worse than the median of the
//           others' running averages up to r. Its cut is that median.
//
// A trial reaches rung r at its first point at or past step r; its value at
// the rung is that point's.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "service/core/records.h"
#include "service/sweeps/sweep_spec.h"

namespace tfslurm::sweeps {

// A trial's objective curve: value by step. Later attempts replace points of
// the steps they report again (a restart from a checkpoint).
using Curve = std::map<int64_t, double>;

// The curve of one tag as the store keeps it (points without a value left out).
Curve CurveOf(const ScalarSeries& series);

// The first point at or past `step`, if the curve has reached it.
std::optional<std::pair<int64_t, double>> PointAt(const Curve& curve, int64_t step);

// The objective of a curve (SweepObjective::at_step, or the last point).
std::optional<std::pair<int64_t, double>> ObjectiveOf(const Curve& curve,
                                                      const SweepObjective& objective);

// A stopped trial's curve as it competes at later rungs: its points up to
// the one that reached rung `stopped_at`, where it was stopped. Points it
// reported while its job was being stopped (or before the service judged
// it) do not make it a competitor at rungs it was never allowed to reach.
Curve UpToRung(const Curve& curve, const EarlyStopping& rule, int stopped_at);

struct StopDecision {
  enum class Verdict {
    kWait,      // the trial has not reached its next rung (or has passed them all)
    kContinue,  // it passed rung `rung`
    kStop,      // it stops at rung `rung`
  };
  Verdict verdict = Verdict::kWait;
  int rung = 0;           // index into EarlyStopping::rungs
  int64_t rung_step = 0;  // that rung's step
  int64_t step = 0;       // the trial's point that reached it
  double value = 0;       // the trial's value there (median: its best so far)
  double cut = 0;         // the rule's cut at the rung
  int compared = 0;       // values the cut was taken from
  std::string why;        // for people: the value against the cut
};

// The decision for trial `trial` (an index into `curves`) at rung
// `rungs_passed`, the first it has not passed yet. kWait when the rule is
// none, the trial is past its last rung, or has not reached this one.
StopDecision DecideAtRung(const EarlyStopping& rule, const SweepObjective& objective,
                          const std::vector<Curve>& curves, size_t trial, int rungs_passed);

}  // namespace tfslurm::sweeps
