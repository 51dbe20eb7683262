// Training scalars as core handles them: which reported points are kept
// (ScalarProblem), and the steps per second a chart shows beside them
// (StepsPerSecond). The store keeps them (ports/store.h, AppendScalars);
// AgentProtocol::OnScalars takes them in.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "service/core/records.h"

namespace tfslurm {

// The agent sends at most this many points per message (schema/agent.proto);
// more are dropped.
inline constexpr size_t kMaxScalarsPerReport = 1000;
inline constexpr size_t kMaxScalarTagBytes = 256;

// Why `point` cannot be kept ("its tag is empty"), or nullopt. A tag must be
// 1..kMaxScalarTagBytes bytes of UTF-8 without control characters (C0, DEL,
// C1) or bidi controls (base/unsafe_text.h): it is shown in JSON, tables and
// the dashboard as it is.
std::optional<std::string> ScalarProblem(const ScalarPoint& point);

// Steps per second over time, from one tag's points: between points of one
// attempt at least kMinRateIntervalS apart (each from the last one used),
// (step - earlier step) / (wall_time - earlier wall_time), at the later
// point's wall time. The tag is the one whose
// newest step is largest (the most finely stepped: a per-batch tag rather
// than a per-epoch one), the one with more points on a tie.
struct StepRate {
  std::string tag;
  std::vector<double> wall_time;
  std::vector<double> value;
  std::vector<int> attempt;
};
inline constexpr double kMinRateIntervalS = 1.0;
// nullopt when no tag has two points of one attempt far enough apart.
std::optional<StepRate> StepsPerSecond(const std::vector<ScalarSeries>& series);

}  // namespace tfslurm
