#include "service/sweeps/sweep_spec.h"

#include <cmath>
#include <optional>
#include <regex>

#include "base/number_text.h"
#include "service/core/spec_checker.h"

namespace tfslurm::sweeps {
namespace {

using nlohmann::json;
using namespace spec_internal;  // NOLINT: the spec parser's checker, shared on purpose

const std::regex kSweepIdPattern("[a-z0-9][a-z0-9._-]{0,57}");
const std::regex kFieldSegmentPattern("[a-z_][a-z0-9_]{0,63}");
constexpr int kMaxValuesPerParameter = 1000;

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

// What the name of a parameter says it sets; false (with a FieldError) when
// it names nothing a trial may set.
bool ParseTarget(Checker& c, const std::string& name, SweepParameter& p) {
  const std::string path = "parameters." + name;
  if (std::optional<std::string> unsafe = UnsafeCharacter(name); unsafe || name.size() > 256) {
    c.Fail(path, "must be a parameter name of at most 256 bytes, " + std::string(kSafeTextRule) +
                     (unsafe ? "; it has " + *unsafe : ""));
    return false;
  }
  if (name.rfind("env.", 0) == 0) {
    p.target = ParameterTarget::kEnv;
    p.key = name.substr(4);
    if (!std::regex_match(p.key, kEnvNamePattern)) {
      c.Fail(path, "env.NAME needs a variable name matching [A-Za-z_][A-Za-z0-9_]*, got " +
                       Quoted(p.key));
      return false;
    }
    return true;
  }
  if (name.rfind("arg.", 0) == 0) {
    p.target = ParameterTarget::kArg;
    p.key = name.substr(4);
    if (p.key.empty() || p.key[0] != '-' || p.key.find('=') != std::string::npos ||
        p.key.find(' ') != std::string::npos) {
      c.Fail(path,
             "arg.FLAG needs a command-line flag starting with '-' without '=' or spaces (e.g. "
             "arg.--learning_rate, which gives the argument --learning_rate=VALUE), got " +
                 Quoted(p.key));
      return false;
    }
    return true;
  }
  p.target = ParameterTarget::kField;
  p.key = name;
  size_t start = 0;
  int segments = 0;
  while (true) {
    size_t dot = name.find('.', start);
    std::string segment = name.substr(start, dot == std::string::npos ? dot : dot - start);
    if (!std::regex_match(segment, kFieldSegmentPattern) || ++segments > 4) {
      c.Fail(path,
             "must be env.NAME (an environment variable), arg.FLAG (a command-line flag) or the "
             "path of an experiment spec field such as resources.nodes, got " +
                 Quoted(name));
      return false;
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  const std::string first = name.substr(0, name.find('.'));
  const char* refused = first == "id"          ? "is set per trial (<sweep>-<n>)"
                        : first == "model_dir" ? "is each trial's own directory"
                        : first == "command"   ? "is not swept whole; use arg.FLAG for a flag"
                        : first == "env"       ? "is not swept whole; use env.NAME"
                        : first == "framework" ? "must be the same for every trial"
                                               : nullptr;
  if (refused) {
    c.Fail(path, Quoted(first) + " " + refused);
    return false;
  }
  return true;
}

// `count` of a range: 2 to 1000 points.
void ParseCount(Checker& c, const json& v, const std::string& path, SweepParameter& p) {
  if (!v.contains("count")) return;
  if (auto n = c.Int(v["count"], path + ".count", 2, kMaxValuesPerParameter))
    p.count = static_cast<int>(*n);
}

void ParseRange(Checker& c, const json& v, const std::string& path, SweepParameter& p, bool log) {
  const std::string key = log ? "log_range" : "range";
  const json& r = v[key];
  const std::string field = path + "." + key;
  if (!r.is_array() || r.size() != 2 || !r[0].is_number() || !r[1].is_number()) {
    c.Fail(field, "must be [low, high], two numbers, got " + Show(r));
    return;
  }
  p.kind = log ? SweepParameter::Kind::kLogRange : SweepParameter::Kind::kRange;
  p.low = r[0].get<double>();
  p.high = r[1].get<double>();
  p.integer = r[0].is_number_integer() && r[1].is_number_integer();
  if (!std::isfinite(p.low) || !std::isfinite(p.high) || !(p.low < p.high))
    c.Fail(field, "must have low < high, got " + Show(r));
  else if (log && p.low <= 0)
    c.Fail(field, "must be above 0 at both ends (a log scale), got " + Show(r));
  ParseCount(c, v, path, p);
}

void ParseParameter(Checker& c, const std::string& name, const json& v, SweepParameter& p) {
  const std::string path = "parameters." + name;
  p.name = name;
  if (!c.IsObject(v, path)) return;
  c.OnlyKeys(v, path, {"values", "range", "log_range", "count"});
  const int given = v.contains("values") + v.contains("range") + v.contains("log_range");
  if (given != 1) {
    c.Fail(path,
           "needs exactly one of values (a list), range [low, high] or log_range [low, high]" +
               std::string(given ? ", got " + std::to_string(given) : ""));
    return;
  }
  if (v.contains("range")) return ParseRange(c, v, path, p, false);
  if (v.contains("log_range")) return ParseRange(c, v, path, p, true);
  const json& values = v["values"];
  if (!values.is_array() || values.empty() ||
      values.size() > static_cast<size_t>(kMaxValuesPerParameter)) {
    c.Fail(path + ".values",
           "must be a list of 1 to 1000 numbers, strings or booleans, got " + Show(values));
    return;
  }
  if (v.contains("count"))
    c.Fail(path + ".count", "applies to range and log_range only; values lists every point");
  for (size_t i = 0; i < values.size(); ++i) {
    const json& one = values[i];
    const std::string at = path + ".values[" + std::to_string(i) + "]";
    if (one.is_string()) {
      if (c.String(one, at)) p.values.push_back(one);
    } else if (one.is_number() || one.is_boolean()) {
      if (one.is_number_float() && !std::isfinite(one.get<double>()))
        c.Fail(at, "must be a finite number, got " + Show(one));
      else
        p.values.push_back(one);
    } else {
      c.Fail(at, "must be a number, a string or a boolean, got " + TypeAndValue(one));
    }
  }
}

// Returns search.order as given, if it was.
std::optional<GridOrder> ParseSearch(Checker& c, const json& input, SweepSpec& spec) {
  std::optional<GridOrder> order;
  if (!input.contains("search")) return order;
  const json& s = input["search"];
  if (!c.IsObject(s, "search")) return order;
  c.OnlyKeys(s, "search", {"type", "order", "seed"});
  if (s.contains("type"))
    if (auto t = c.OneOf(s["type"], "search.type", {"grid", "random"}))
      spec.search = *t == "grid" ? SearchKind::kGrid : SearchKind::kRandom;
  if (s.contains("order")) {
    if (spec.search != SearchKind::kGrid)
      c.Fail("search.order", "applies to search type grid only (a random search draws its own)");
    else if (auto o = c.OneOf(s["order"], "search.order", {"listed", "shuffled"}))
      order = *o == "listed" ? GridOrder::kListed : GridOrder::kShuffled;
  }
  if (s.contains("seed")) {
    // A listed grid's seed is refused once the order's default is known.
    if (auto n = c.Int(s["seed"], "search.seed", 0, (int64_t{1} << 53)))
      spec.seed = static_cast<uint64_t>(*n);
  }
  return order;
}

void ParseObjective(Checker& c, const json& input, SweepSpec& spec) {
  if (!input.contains("objective")) {
    c.Fail("objective",
           "is required: the training scalar to compare trials by, e.g. {\"tag\": \"loss\", "
           "\"goal\": \"min\"}");
    return;
  }
  const json& o = input["objective"];
  if (!c.IsObject(o, "objective")) return;
  c.OnlyKeys(o, "objective", {"tag", "goal", "at"});
  if (!o.contains("tag")) {
    c.Fail("objective.tag", "is required: a training scalar's tag, e.g. \"loss\"");
  } else if (auto tag = c.String(o["tag"], "objective.tag", 256)) {
    if (tag->empty())
      c.Fail("objective.tag", "must not be empty");
    else if (std::optional<std::string> unsafe = UnsafeCharacter(*tag))
      c.Fail("objective.tag", "must be " + std::string(kSafeTextRule) + "; it has " + *unsafe);
    else
      spec.objective.tag = *tag;
  }
  if (!o.contains("goal"))
    c.Fail("objective.goal", "is required: min or max");
  else if (auto g = c.OneOf(o["goal"], "objective.goal", {"min", "max"}))
    spec.objective.goal = *g == "min" ? ObjectiveGoal::kMin : ObjectiveGoal::kMax;
  if (!o.contains("at")) return;
  const json& at = o["at"];
  if (at.is_string() && at.get<std::string>() == "end") return;
  if (!at.is_number_integer() || at.get<int64_t>() < 1)
    c.Fail("objective.at", "must be \"end\" (the last value) or a step from 1, got " + Show(at));
  else
    spec.objective.at_step = at.get<int64_t>();
}

void ParseEarlyStopping(Checker& c, const json& input, SweepSpec& spec) {
  if (!input.contains("early_stopping")) return;
  const json& e = input["early_stopping"];
  if (!c.IsObject(e, "early_stopping")) return;
  c.OnlyKeys(e, "early_stopping", {"rule", "rungs", "reduction_factor", "min_trials"});
  EarlyStopping& out = spec.early_stopping;
  if (!e.contains("rule")) {
    c.Fail("early_stopping.rule", "is required: asha, median or none");
    return;
  }
  auto rule = c.OneOf(e["rule"], "early_stopping.rule", {"none", "asha", "median"});
  if (!rule) return;
  out.rule = *rule == "asha"     ? StoppingRule::kAsha
             : *rule == "median" ? StoppingRule::kMedian
                                 : StoppingRule::kNone;
  for (const char* key : {"rungs", "reduction_factor", "min_trials"}) {
    const bool applies =
        out.rule != StoppingRule::kNone &&
        (std::string(key) != "reduction_factor" || out.rule == StoppingRule::kAsha) &&
        (std::string(key) != "min_trials" || out.rule == StoppingRule::kMedian);
    if (e.contains(key) && !applies)
      c.Fail(std::string("early_stopping.") + key, "does not apply to rule " + *rule);
  }
  if (out.rule == StoppingRule::kNone) return;
  if (!e.contains("rungs")) {
    c.Fail("early_stopping.rungs", "is required for rule " + *rule +
                                       ": the steps where it decides, increasing, e.g. [100, 300]");
  } else {
    const json& rungs = e["rungs"];
    if (!rungs.is_array() || rungs.empty() || rungs.size() > static_cast<size_t>(kMaxRungs)) {
      c.Fail("early_stopping.rungs",
             "must be a list of 1 to " + std::to_string(kMaxRungs) + " steps, got " + Show(rungs));
    } else {
      for (size_t i = 0; i < rungs.size(); ++i) {
        const std::string at = "early_stopping.rungs[" + std::to_string(i) + "]";
        auto step = c.Int(rungs[i], at, 1, int64_t{1} << 53);
        if (!step) continue;
        if (!out.rungs.empty() && *step <= out.rungs.back())
          c.Fail(at, "must be above the rung before it (" + std::to_string(out.rungs.back()) +
                         "), got " + std::to_string(*step));
        else
          out.rungs.push_back(*step);
      }
    }
  }
  if (e.contains("reduction_factor"))
    if (auto n = c.Int(e["reduction_factor"], "early_stopping.reduction_factor", 2, 100))
      out.reduction_factor = static_cast<int>(*n);
  if (e.contains("min_trials"))
    if (auto n = c.Int(e["min_trials"], "early_stopping.min_trials", 1, kMaxTrials))
      out.min_trials = static_cast<int>(*n);
}

// The base experiment: a valid spec but for what each trial sets itself.
void ParseExperiment(Checker& c, const json& input, const SpecLimits& limits, SweepSpec& spec) {
  if (!input.contains("experiment")) {
    c.Fail("experiment", "is required: the experiment spec every trial starts from");
    return;
  }
  const json& e = input["experiment"];
  if (!c.IsObject(e, "experiment")) return;
  spec.experiment = e;
  json probe = e;
  if (e.contains("id")) {
    c.Fail("experiment.id", "is set per trial (<sweep>-<n>); remove it");
    probe.erase("id");
  }
  if (e.contains("model_dir") && !(e["model_dir"].is_string() && e["model_dir"] == "auto")) {
    c.Fail("experiment.model_dir",
           "must be \"auto\" or absent: each trial has a directory of its own, got " +
               Show(e["model_dir"]));
    probe.erase("model_dir");
  }
  auto parsed = ParseSpec(probe, limits);
  if (parsed.ok()) return;
  for (const FieldError& f : parsed.status().fields())
    c.Fail(f.field.empty() ? "experiment" : "experiment." + f.field, f.reason);
}

// Points of a grid over every parameter, or nullopt past kMaxTrials.
std::optional<int64_t> GridSize(const std::vector<SweepParameter>& parameters) {
  int64_t n = 1;
  for (const SweepParameter& p : parameters) {
    n *= static_cast<int64_t>(p.GridPoints().size());
    if (n > kMaxTrials) return std::nullopt;
  }
  return n;
}

void CheckTrials(Checker& c, const json& input, SweepSpec& spec) {
  if (spec.search == SearchKind::kGrid) {
    for (const SweepParameter& p : spec.parameters)
      if (p.kind != SweepParameter::Kind::kValues && p.count == 0)
        c.Fail("parameters." + p.name + ".count",
               "is required for a grid search: the number of points from low to high (2 to 1000)");
    if (!c.errors.empty()) return;
    std::optional<int64_t> points = GridSize(spec.parameters);
    if (!points) {
      c.Fail("parameters", "make a grid of more than " + std::to_string(kMaxTrials) +
                               " points; use fewer values, or search type random");
      return;
    }
    if (spec.max_trials > 0 && spec.max_trials < *points)
      c.Fail("max_trials", "is " + std::to_string(spec.max_trials) + " but the grid has " +
                               std::to_string(*points) +
                               " points; remove max_trials, or search type random to draw " +
                               std::to_string(spec.max_trials));
    spec.max_trials = static_cast<int>(*points);
  } else if (!input.contains("max_trials")) {
    c.Fail("max_trials", "is required for a random search: the number of trials (1 to " +
                             std::to_string(kMaxTrials) + ")");
  }
}

// Every problem found, in one InvalidArgument (as spec.cc's Refusal).
Status Refusal(Checker& c) {
  size_t n = c.errors.size() + c.more;
  if (c.more > 0) c.errors.push_back({"", "and " + std::to_string(c.more) + " more errors"});
  return InvalidArgument(
      "the sweep spec has " + std::to_string(n) + " invalid field" + (n == 1 ? "" : "s"),
      std::move(c.errors));
}

}  // namespace

std::vector<json> SweepParameter::GridPoints() const {
  if (kind == Kind::kValues) return values;
  std::vector<json> out;
  for (int i = 0; i < count; ++i) {
    const double t = count == 1 ? 0 : static_cast<double>(i) / (count - 1);
    const double v = kind == Kind::kRange
                         ? low + t * (high - low)
                         : std::exp(std::log(low) + t * (std::log(high) - std::log(low)));
    if (integer)
      out.push_back(static_cast<int64_t>(std::llround(v)));
    else
      out.push_back(std::stod(SignificantDigits(v, 12)));
  }
  return out;
}

StatusOr<SweepSpec> ParseSweepSpec(const json& input, const SpecLimits& limits) {
  if (!input.is_object())
    return InvalidArgument("the sweep spec must be a JSON object",
                           {{"", "must be an object, got " + TypeName(input)}});
  Checker c;
  SweepSpec spec;
  c.OnlyKeys(input, "",
             {"id", "experiment", "parameters", "search", "max_trials", "max_concurrent",
              "objective", "early_stopping", "max_node_hours"});
  if (input.contains("id")) {
    if (auto s = c.String(input["id"], "id", 256)) {
      if (std::regex_match(*s, kSweepIdPattern))
        spec.id = *s;
      else
        c.Fail("id", "must match [a-z0-9][a-z0-9._-]{0,57} (lower case, digits, . _ -; at most " +
                         std::to_string(kMaxSweepIdLength) +
                         ", leaving room for each trial's -<n>), got " + Show(input["id"]));
    }
  }
  ParseExperiment(c, input, limits, spec);
  if (!input.contains("parameters")) {
    c.Fail("parameters",
           "is required: what the trials vary, e.g. {\"env.LR\": {\"log_range\": [0.0001, 0.1], "
           "\"count\": 4}}");
  } else if (c.IsObject(input["parameters"], "parameters")) {
    const json& params = input["parameters"];
    if (params.empty() || params.size() > static_cast<size_t>(kMaxSweepParameters))
      c.Fail("parameters", "must have 1 to " + std::to_string(kMaxSweepParameters) +
                               " parameters, got " + std::to_string(params.size()));
    for (const auto& [name, v] : params.items()) {
      SweepParameter p;
      if (!ParseTarget(c, name, p)) continue;
      ParseParameter(c, name, v, p);
      spec.parameters.push_back(std::move(p));
    }
  }
  const std::optional<GridOrder> order = ParseSearch(c, input, spec);
  if (input.contains("max_trials"))
    if (auto n = c.Int(input["max_trials"], "max_trials", 1, kMaxTrials))
      spec.max_trials = static_cast<int>(*n);
  if (input.contains("max_concurrent"))
    if (auto n = c.Int(input["max_concurrent"], "max_concurrent", 1, kMaxConcurrentTrials))
      spec.max_concurrent = static_cast<int>(*n);
  ParseObjective(c, input, spec);
  ParseEarlyStopping(c, input, spec);
  if (spec.search == SearchKind::kGrid) {
    spec.order =
        order.value_or(spec.early_stopping.rule == StoppingRule::kNone ? GridOrder::kListed
                                                                       : GridOrder::kShuffled);
    if (spec.order == GridOrder::kListed && input.contains("search") &&
        input["search"].is_object() && input["search"].contains("seed"))
      c.Fail("search.seed",
             "applies to search type random, or a grid of order shuffled (the default with "
             "early stopping)");
  }
  if (input.contains("max_node_hours")) {
    const json& h = input["max_node_hours"];
    if (!h.is_number() || !(h.get<double>() > 0) || h.get<double>() > 1e6)
      c.Fail("max_node_hours",
             "must be a number of node-hours above 0, at most 1000000, got " + Show(h));
    else
      spec.max_node_hours = h.get<double>();
  }
  if (spec.objective.at_step && !spec.early_stopping.rungs.empty() &&
      spec.early_stopping.rungs.back() > *spec.objective.at_step)
    c.Fail("early_stopping.rungs",
           "go up to step " + std::to_string(spec.early_stopping.rungs.back()) +
               ", past objective.at (" + std::to_string(*spec.objective.at_step) +
               "): a rung must come before the step the objective is read at");
  if (c.errors.empty()) CheckTrials(c, input, spec);
  if (!c.errors.empty()) return Refusal(c);
  return spec;
}

bool IsValidSweepId(const std::string& id) { return std::regex_match(id, kSweepIdPattern); }

const char* StoppingRuleName(StoppingRule rule) {
  switch (rule) {
    case StoppingRule::kAsha:
      return "asha";
    case StoppingRule::kMedian:
      return "median";
    case StoppingRule::kNone:
      break;
  }
  return "none";
}

const char* ObjectiveGoalName(ObjectiveGoal goal) {
  return goal == ObjectiveGoal::kMin ? "min" : "max";
}

json SweepSpec::ToJson() const {
  json j;
  if (!id.empty()) j["id"] = id;
  j["experiment"] = experiment;
  json params = json::object();
  for (const SweepParameter& p : parameters) {
    json one;
    if (p.kind == SweepParameter::Kind::kValues) {
      one["values"] = p.values;
    } else {
      json ends = p.integer
                      ? json::array({static_cast<int64_t>(p.low), static_cast<int64_t>(p.high)})
                      : json::array({p.low, p.high});
      one[p.kind == SweepParameter::Kind::kRange ? "range" : "log_range"] = ends;
      if (p.count > 0) one["count"] = p.count;
    }
    params[p.name] = one;
  }
  j["parameters"] = params;
  j["search"] = {{"type", search == SearchKind::kGrid ? "grid" : "random"}};
  if (search == SearchKind::kGrid)
    j["search"]["order"] = order == GridOrder::kListed ? "listed" : "shuffled";
  if (search == SearchKind::kRandom || order == GridOrder::kShuffled) j["search"]["seed"] = seed;
  j["max_trials"] = max_trials;
  j["max_concurrent"] = max_concurrent;
  j["objective"] = {{"tag", objective.tag},
                    {"goal", ObjectiveGoalName(objective.goal)},
                    {"at", objective.at_step ? json(*objective.at_step) : json("end")}};
  json es = {{"rule", StoppingRuleName(early_stopping.rule)}};
  if (early_stopping.rule != StoppingRule::kNone) es["rungs"] = early_stopping.rungs;
  if (early_stopping.rule == StoppingRule::kAsha)
    es["reduction_factor"] = early_stopping.reduction_factor;
  if (early_stopping.rule == StoppingRule::kMedian) es["min_trials"] = early_stopping.min_trials;
  j["early_stopping"] = es;
  if (max_node_hours) j["max_node_hours"] = *max_node_hours;
  return j;
}

}  // namespace tfslurm::sweeps
