#include "service/sweeps/sweep_space.h"

#include <cmath>
#include <set>
#include <utility>

#include "base/number_text.h"

namespace tfslurm::sweeps {
namespace {

using nlohmann::json;

// SplitMix64 (Steele, Lea, Flood 2014): a fixed sequence for a seed on every
// platform, which std::uniform_*_distribution does not promise.
class Draws {
 public:
  explicit Draws(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // In [0, 1), from the top 53 bits.
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  size_t Index(size_t n) { return static_cast<size_t>(Next() % n); }

 private:
  uint64_t state_;
};

json Draw(const SweepParameter& p, Draws& draws) {
  if (p.kind == SweepParameter::Kind::kValues || p.count > 0) {
    std::vector<json> points = p.GridPoints();
    return points[draws.Index(points.size())];
  }
  const double u = draws.Unit();
  double v = p.kind == SweepParameter::Kind::kRange
                 ? p.low + u * (p.high - p.low)
                 : std::exp(std::log(p.low) + u * (std::log(p.high) - std::log(p.low)));
  if (p.integer) return static_cast<int64_t>(std::llround(v));
  return std::stod(SignificantDigits(v, 12));
}

void Apply(const SweepParameter& p, const json& value, json& spec) {
  switch (p.target) {
    case ParameterTarget::kEnv:
      if (!spec.contains("env") || !spec["env"].is_object()) spec["env"] = json::object();
      spec["env"][p.key] = ParameterText(value);
      return;
    case ParameterTarget::kArg: {
      const std::string arg = p.key + "=" + ParameterText(value);
      json& command = spec["command"];
      if (!command.is_array()) command = json::array();
      for (json& a : command)
        if (a.is_string() && a.get_ref<const std::string&>().rfind(p.key + "=", 0) == 0) {
          a = arg;
          return;
        }
      command.push_back(arg);
      return;
    }
    case ParameterTarget::kField: {
      json* at = &spec;
      size_t start = 0;
      while (true) {
        size_t dot = p.key.find('.', start);
        std::string segment = p.key.substr(start, dot == std::string::npos ? dot : dot - start);
        if (dot == std::string::npos) {
          (*at)[segment] = value;
          return;
        }
        if (!at->contains(segment) || !(*at)[segment].is_object()) (*at)[segment] = json::object();
        at = &(*at)[segment];
        start = dot + 1;
      }
    }
  }
}

// The parameter a spec problem at `field` comes from, if any.
const SweepParameter* Culprit(const SweepSpec& spec, const std::string& field) {
  for (const SweepParameter& p : spec.parameters) {
    switch (p.target) {
      case ParameterTarget::kEnv:
        if (field == "env." + p.key) return &p;
        break;
      case ParameterTarget::kArg:
        if (field.rfind("command", 0) == 0) return &p;
        break;
      case ParameterTarget::kField:
        if (field == p.key || field.rfind(p.key + ".", 0) == 0 || field.rfind(p.key + "[", 0) == 0)
          return &p;
        break;
    }
  }
  return nullptr;
}

// A grid's points in odometer order, the last axis turning fastest.
std::vector<json> GridInListedOrder(const SweepSpec& spec) {
  std::vector<json> out;
  std::vector<std::vector<json>> axes;
  for (const SweepParameter& p : spec.parameters) axes.push_back(p.GridPoints());
  std::vector<size_t> at(axes.size(), 0);
  while (static_cast<int>(out.size()) < spec.max_trials) {
    json point = json::object();
    for (size_t i = 0; i < axes.size(); ++i) point[spec.parameters[i].name] = axes[i][at[i]];
    out.push_back(std::move(point));
    size_t i = axes.size();
    while (i > 0) {
      --i;
      if (++at[i] < axes[i].size()) break;
      at[i] = 0;
      if (i == 0) return out;
    }
    if (axes.empty()) return out;
  }
  return out;
}

// A Fisher-Yates shuffle driven by the seed: the same order on every
// platform, as for Draw.
std::vector<json> Shuffled(std::vector<json> points, uint64_t seed) {
  Draws draws(seed);
  for (size_t i = points.size(); i > 1; --i) std::swap(points[i - 1], points[draws.Index(i)]);
  return points;
}

}  // namespace

std::string TrialId(const std::string& sweep_id, int index) {
  return sweep_id + "-" + std::to_string(index);
}

std::string ParameterText(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

std::vector<json> SweepPoints(const SweepSpec& spec) {
  std::vector<json> out;
  if (spec.search == SearchKind::kRandom) {
    Draws draws(spec.seed);
    for (int i = 0; i < spec.max_trials; ++i) {
      json point = json::object();
      for (const SweepParameter& p : spec.parameters) point[p.name] = Draw(p, draws);
      out.push_back(std::move(point));
    }
    return out;
  }
  std::vector<json> grid = GridInListedOrder(spec);
  return spec.order == GridOrder::kShuffled ? Shuffled(std::move(grid), spec.seed) : grid;
}

json TrialSpecInput(const SweepSpec& spec, int index, const json& params) {
  json out = spec.experiment;
  out["id"] = TrialId(spec.id, index);
  for (const SweepParameter& p : spec.parameters)
    if (params.contains(p.name)) Apply(p, params[p.name], out);
  return out;
}

StatusOr<std::vector<TrialPlan>> ExpandTrials(const SweepSpec& spec, const SpecLimits& limits) {
  std::vector<TrialPlan> trials;
  std::vector<FieldError> errors;
  std::set<std::string> named;
  int index = 0;
  for (json& params : SweepPoints(spec)) {
    ++index;
    TrialPlan t{index, TrialId(spec.id.empty() ? "sweep" : spec.id, index), std::move(params), {}};
    t.spec = TrialSpecInput(spec, index, t.params);
    auto parsed = ParseSpec(t.spec, limits);
    if (!parsed.ok()) {
      for (const FieldError& f : parsed.status().fields()) {
        const SweepParameter* p = Culprit(spec, f.field);
        const std::string field = p ? "parameters." + p->name : "experiment." + f.field;
        if (!named.insert(field).second || errors.size() >= kMaxSpecFieldErrors) continue;
        errors.push_back(
            {field,
             p ? "trial " + std::to_string(index) + " sets " + p->name + " to " +
                     t.params[p->name].dump() + ": " + f.field + " " + f.reason
               : "in trial " + std::to_string(index) + " (" + t.params.dump() + "): " + f.reason});
      }
    }
    trials.push_back(std::move(t));
  }
  if (!errors.empty())
    return InvalidArgument("the sweep's trials have " + std::to_string(errors.size()) +
                               " invalid field" + (errors.size() == 1 ? "" : "s"),
                           std::move(errors));
  return trials;
}

}  // namespace tfslurm::sweeps
