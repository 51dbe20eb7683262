#include "service/sweeps/early_stopping.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "base/number_text.h"

namespace tfslurm::sweeps {
namespace {

using Verdict = StopDecision::Verdict;

SweepObjective Loss() { return {"loss", ObjectiveGoal::kMin, std::nullopt}; }

EarlyStopping Asha(int factor) {
  EarlyStopping e;
  e.rule = StoppingRule::kAsha;
  e.rungs = {10, 20};
  e.reduction_factor = factor;
  return e;
}

// One report: trial `trial` reached `step` with `value`.
struct Report {
  size_t trial;
  int64_t step;
  double value;
};

// Replays `reports` in order, deciding after each as the service does (each
// trial at its next rung until it waits or stops): the trials stopped, in
// the order they were stopped, with the rung.
std::vector<std::pair<size_t, int>> Replay(const EarlyStopping& rule, size_t trials,
                                           const std::vector<Report>& reports) {
  std::vector<Curve> curves(trials);
  std::vector<int> passed(trials, 0);
  std::vector<bool> stopped(trials, false);
  std::vector<std::pair<size_t, int>> out;
  for (const Report& r : reports) {
    if (stopped[r.trial]) continue;
    curves[r.trial][r.step] = r.value;
    for (size_t t = 0; t < trials; ++t) {
      while (!stopped[t]) {
        StopDecision d = DecideAtRung(rule, Loss(), curves, t, passed[t]);
        if (d.verdict == Verdict::kWait) break;
        if (d.verdict == Verdict::kStop) {
          stopped[t] = true;
          out.emplace_back(t, d.rung);
        } else {
          ++passed[t];
        }
      }
    }
  }
  return out;
}

TEST(EarlyStopping, CurvePointsAndObjective) {
  ScalarSeries s;
  s.points = {{1, 10, 0, 0.9}, {1, 20, 0, 0.8}, {2, 20, 0, 0.7}, {2, 30, 0, std::nullopt}};
  Curve c = CurveOf(s);
  EXPECT_EQ(c.size(), 2u) << "NaN left out; attempt 2's step 20 replaces attempt 1's";
  EXPECT_EQ(c[20], 0.7);
  EXPECT_EQ(PointAt(c, 15)->first, 20) << "a rung is reached at the first point at or past it";
  EXPECT_FALSE(PointAt(c, 21));
  EXPECT_EQ(ObjectiveOf(c, Loss())->second, 0.7);
  SweepObjective at10 = Loss();
  at10.at_step = 10;
  EXPECT_EQ(ObjectiveOf(c, at10)->second, 0.9);
}

TEST(EarlyStopping, AshaKeepsTheBestFractionAtEachRungAsTrialsArrive) {
  const EarlyStopping rule = Asha(2);
  std::vector<Curve> curves(3);
  curves[0] = {{10, 0.5}};
  StopDecision first = DecideAtRung(rule, Loss(), curves, 0, 0);
  EXPECT_EQ(first.verdict, Verdict::kContinue) << "alone at the rung: the best 1 of 1";
  curves[1] = {{10, 0.8}};
  StopDecision second = DecideAtRung(rule, Loss(), curves, 1, 0);
  EXPECT_EQ(second.verdict, Verdict::kStop) << second.why;
  EXPECT_EQ(second.cut, 0.5);
  EXPECT_EQ(second.compared, 2);
  EXPECT_EQ(second.value, 0.8);
  EXPECT_NE(second.why.find("loss 0.8 at step 10 is worse than rung 1's cut 0.5"),
            std::string::npos)
      << second.why;
  curves[2] = {{5, 0.1}};
  EXPECT_EQ(DecideAtRung(rule, Loss(), curves, 2, 0).verdict, Verdict::kWait)
      << "not at step 10 yet";
  EXPECT_EQ(DecideAtRung(rule, Loss(), curves, 0, 2).verdict, Verdict::kWait) << "past every rung";
}

TEST(EarlyStopping, AshaMaximizesWhenTheGoalIsMax) {
  SweepObjective acc{"accuracy", ObjectiveGoal::kMax, std::nullopt};
  std::vector<Curve> curves = {{{10, 0.9}}, {{10, 0.6}}};
  EXPECT_EQ(DecideAtRung(Asha(2), acc, curves, 1, 0).verdict, Verdict::kStop);
  EXPECT_EQ(DecideAtRung(Asha(2), acc, curves, 0, 0).verdict, Verdict::kContinue);
}

TEST(EarlyStopping, AshaIsDeterministicForAnOrderOfReports) {
  const std::vector<Report> reports = {{0, 10, 0.5},  {1, 10, 0.4},  {0, 20, 0.3}, {2, 10, 0.6},
                                       {1, 20, 0.35}, {3, 10, 0.55}, {2, 20, 0.2}, {3, 20, 0.1}};
  const auto a = Replay(Asha(2), 4, reports);
  EXPECT_EQ(a, Replay(Asha(2), 4, reports)) << "the same reports, the same decisions";
  // Trial 1 (0.4) beats trial 0 (0.5) at rung 1, but trial 0 was first and
  // passed alone; trial 2 (0.6) is worst of 3; trial 3 (0.55) is 3rd of 4,
  // outside the best 2. At rung 2 trial 1 (0.35) is worse than trial 0 (0.3).
  EXPECT_EQ(a, (std::vector<std::pair<size_t, int>>{{2, 0}, {1, 1}, {3, 0}}));
  // Another order of the same reports decides otherwise: trial 1 first at
  // rung 1 puts trial 0 out.
  std::vector<Report> swapped = reports;
  std::swap(swapped[0], swapped[1]);
  EXPECT_NE(Replay(Asha(2), 4, swapped), a);
}

TEST(EarlyStopping, MedianRuleWaitsForEnoughTrialsThenStopsTheWorseHalf) {
  EarlyStopping rule;
  rule.rule = StoppingRule::kMedian;
  rule.rungs = {20};
  rule.min_trials = 2;
  std::vector<Curve> curves = {
      {{10, 0.6}, {20, 0.4}},  // running average up to 20: 0.5
      {{10, 0.8}, {20, 0.6}},  // 0.7
      {{10, 0.9}, {20, 0.8}},  // best so far 0.8
  };
  std::vector<Curve> two(curves.begin(), curves.begin() + 2);
  StopDecision few = DecideAtRung(rule, Loss(), two, 1, 0);
  EXPECT_EQ(few.verdict, Verdict::kContinue) << "one other trial, min_trials 2: " << few.why;
  StopDecision d = DecideAtRung(rule, Loss(), curves, 2, 0);
  EXPECT_EQ(d.verdict, Verdict::kStop) << d.why;
  EXPECT_DOUBLE_EQ(d.cut, 0.6) << "median of 0.5 and 0.7";
  EXPECT_EQ(d.value, 0.8);
  StopDecision good = DecideAtRung(rule, Loss(), curves, 0, 0);
  EXPECT_EQ(good.verdict, Verdict::kContinue) << good.why;
}

TEST(EarlyStopping, AStoppedTrialDoesNotCompeteAtRungsPastItsStop) {
  const EarlyStopping rule = Asha(2);  // rungs 10, 20
  // Trial 0 was stopped at rung 1 (index 0) but reported up to step 25
  // before its job ended; its 0.1 at step 20 must not cut trial 1 there.
  Curve stopped = {{10, 0.9}, {20, 0.1}, {25, 0.05}};
  EXPECT_EQ(UpToRung(stopped, rule, 0), (Curve{{10, 0.9}}));
  EXPECT_EQ(UpToRung(stopped, rule, 1), (Curve{{10, 0.9}, {20, 0.1}}));
  EXPECT_EQ(UpToRung(stopped, rule, 2), stopped) << "past every rung: the whole curve";
  std::vector<Curve> curves = {UpToRung(stopped, rule, 0), {{10, 0.5}, {20, 0.4}}};
  EXPECT_EQ(DecideAtRung(rule, Loss(), curves, 1, 1).verdict, Verdict::kContinue);
}

TEST(EarlyStopping, NoRuleNeverDecides) {
  EarlyStopping none;
  std::vector<Curve> curves = {{{10, 1.0}}, {{10, 0.1}}};
  EXPECT_EQ(DecideAtRung(none, Loss(), curves, 0, 0).verdict, Verdict::kWait);
}

}  // namespace
}  // namespace tfslurm::sweeps

namespace tfslurm {
namespace {

TEST(SignificantDigitsTest, WritesWhatPrintfsGConversionWrites) {
  for (double v : {0.0, 3.0, 0.001, 1e-05, 123456789.0, 0.1 + 0.2, -2.5e300, 1.0 / 3.0}) {
    for (int digits : {6, 12}) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.*g", digits, v);
      EXPECT_EQ(SignificantDigits(v, digits), buf) << v << " to " << digits << " digits";
    }
  }
}

}  // namespace
}  // namespace tfslurm
