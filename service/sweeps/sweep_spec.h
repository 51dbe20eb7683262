// The sweep spec: many trials of one base experiment over a parameter space,
// with a search, an objective and an early-stopping rule. ParseSweepSpec is
// the only way to a SweepSpec, so every sweep in the service has passed its
// checks (the base experiment's included: each trial's spec is checked by
// ParseSpec in ExpandTrials, sweep_space.h). Documented in
// schema/sweep-spec.md.
//
// Thread safety: plain values; the functions are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "service/core/spec.h"

namespace tfslurm::sweeps {

// What one parameter sets in a trial's experiment spec, from its name:
//   env.NAME     the environment variable NAME (the value as text)
//   arg.FLAG     the argument FLAG=value appended to the command (FLAG
//                starts with '-'), or replacing a FLAG=... already there
//   a.b.c        the spec field at that path (resources.nodes, ...), the
//                value as it is (a number stays a number)
enum class ParameterTarget { kEnv, kArg, kField };

// One axis of the parameter space.
struct SweepParameter {
  std::string name;  // as written: env.LR, arg.--lr, resources.nodes
  ParameterTarget target = ParameterTarget::kField;
  std::string key;  // NAME, FLAG, or the field's path

  enum class Kind { kValues, kRange, kLogRange };
  Kind kind = Kind::kValues;
  std::vector<nlohmann::json> values;  // kValues: numbers, strings or booleans
  // kRange, kLogRange: from low to high. `count` points (the ends included,
  // evenly spaced, on a log scale for kLogRange) for a grid, or for a random
  // search a draw among them; 0 (random search only): any value between.
  double low = 0;
  double high = 0;
  int count = 0;
  bool integer = false;  // both ends were integers: every value is rounded to one

  // The grid's points of this axis (kValues: the values). Empty for a
  // continuous range (count 0).
  std::vector<nlohmann::json> GridPoints() const;
};

enum class SearchKind { kGrid, kRandom };
// The order a grid's points become trials. Early stopping judges trials as
// they reach each rung, so a grid started in its listed order (a learning
// rate's values low to high, say) lets the first values listed pass the
// early rungs against few peers; shuffled, every part of the grid reaches
// them early. Optuna's GridSampler shuffles its grid too
// (optuna/samplers/_grid.py).
enum class GridOrder { kListed, kShuffled };
enum class ObjectiveGoal { kMin, kMax };
enum class StoppingRule { kNone, kAsha, kMedian };

struct SweepObjective {
  std::string tag;  // a training scalar's tag (docs/scalars.md)
  ObjectiveGoal goal = ObjectiveGoal::kMin;
  // The value at the first point at or past this step; nullopt: the last point.
  std::optional<int64_t> at_step;
  // True when `a` is better than `b`.
  bool Better(double a, double b) const { return goal == ObjectiveGoal::kMin ? a < b : a > b; }
};

struct EarlyStopping {
  StoppingRule rule = StoppingRule::kNone;
  std::vector<int64_t> rungs;  // steps, increasing: where the rule decides
  int reduction_factor = 3;    // asha: the best 1/reduction_factor at a rung go on
  int min_trials = 3;          // median: other trials at the rung before it stops any
};

struct SweepSpec {
  std::string id;                          // empty: the caller generates one
  nlohmann::json experiment;               // the base experiment spec, as given (no id)
  std::vector<SweepParameter> parameters;  // by name
  SearchKind search = SearchKind::kGrid;
  // grid: listed by default, shuffled by default with early stopping.
  GridOrder order = GridOrder::kListed;
  uint64_t seed = 0;   // random search; a shuffled grid's order
  int max_trials = 0;  // grid: its number of points
  int max_concurrent = 1;
  SweepObjective objective;
  EarlyStopping early_stopping;
  std::optional<double> max_node_hours;  // nullopt: no cap

  // The canonical form: every default spelled out. ParseSweepSpec of it
  // gives the same spec back.
  nlohmann::json ToJson() const;
};

// Limits of one sweep.
inline constexpr int kMaxTrials = 1000;
inline constexpr int kMaxConcurrentTrials = 100;
inline constexpr int kMaxSweepParameters = 32;
inline constexpr int kMaxRungs = 32;
// A sweep id leaves room for "-<trial>" in an experiment id (63 at most).
inline constexpr size_t kMaxSweepIdLength = 63 - 5;

// Validates `input`; every problem is reported at once as a FieldError
// naming the field, the value and what is allowed, the base experiment's as
// "experiment.<field>". Trials are not expanded here (ExpandTrials).
StatusOr<SweepSpec> ParseSweepSpec(const nlohmann::json& input, const SpecLimits& limits = {});

bool IsValidSweepId(const std::string& id);
const char* StoppingRuleName(StoppingRule rule);
const char* ObjectiveGoalName(ObjectiveGoal goal);

}  // namespace tfslurm::sweeps
