#include "client/tfctl/sweep_text.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "client/terminal_text.h"
#include "client/tfctl/table.h"

namespace tfslurm::tfctl {

using nlohmann::json;

std::string SweepValueText(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.6g", v.get<double>());
    return buf;
  }
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

std::string Params(const json& params) {
  std::string out;
  if (!params.is_object()) return out;
  for (const auto& [name, value] : params.items())
    out += (out.empty() ? "" : " ") + name + "=" + SweepValueText(value);
  return out;
}

// The trials sorted by the objective (best first; none last, by index).
std::vector<json> SortedTrials(const json& sweep) {
  std::vector<json> trials;
  if (sweep.contains("trials") && sweep["trials"].is_array())
    trials.assign(sweep["trials"].begin(), sweep["trials"].end());
  const bool max = sweep.contains("objective") && sweep["objective"].is_object() &&
                   sweep["objective"].value("goal", "min") == "max";
  std::stable_sort(trials.begin(), trials.end(), [max](const json& a, const json& b) {
    const json& x = a["objective"];
    const json& y = b["objective"];
    if (x.is_number() != y.is_number()) return x.is_number();
    if (!x.is_number()) return a.value("index", 0) < b.value("index", 0);
    return max ? x.get<double>() > y.get<double>() : x.get<double>() < y.get<double>();
  });
  return trials;
}

}  // namespace

std::string FormatSweepStatus(const json& s) {
  using client::EscapeForTerminal;
  std::ostringstream out;
  const json& objective = s.contains("objective") ? s["objective"] : json::object();
  const std::string tag = objective.is_object() ? objective.value("tag", "objective") : "objective";
  out << "sweep " << EscapeForTerminal(s.value("id", "")) << "  "
      << EscapeForTerminal(s.value("state", "")) << "  ("
      << EscapeForTerminal(s.value("reason", "")) << ")\n";
  out << "objective: " << EscapeForTerminal(tag) << " ("
      << (objective.is_object() ? EscapeForTerminal(objective.value("goal", "")) : "") << ", at "
      << (objective.is_object() ? EscapeForTerminal(SweepValueText(objective["at"])) : "")
      << ")   node-hours: " << SweepValueText(s.value("node_seconds", 0.0) / 3600.0);
  const json& best = s.contains("best_trial") ? s["best_trial"] : json(nullptr);
  if (best.is_object())
    out << "   best: " << EscapeForTerminal(best.value("experiment_id", "")) << " ("
        << EscapeForTerminal(tag) << " " << SweepValueText(best["objective"]) << ")";
  out << "\n\n";
  // STEP is where the objective's value was taken (a stopped trial's rung),
  // LAST STEP where the trial got to: a stopped trial's programs take a
  // moment to stop, and its checkpoint and logs show that step.
  Table table({"", "TRIAL", "STATE", "END", tag, "STEP", "LAST STEP", "PARAMS"});
  const int best_index = best.is_object() ? best.value("index", 0) : 0;
  for (const json& t : SortedTrials(s)) {
    const json experiment_state = t.value("experiment_state", json(nullptr));
    std::string state = experiment_state.is_string() && t.value("state", "") == "running"
                            ? experiment_state.get<std::string>()
                            : t.value("state", "");
    // Its row stays when its experiment is deleted: its parameters and
    // objective are the sweep's results.
    if (state == "ended" && experiment_state.is_null()) state = "deleted";
    table.AddRow({t.value("index", 0) == best_index ? "*" : "", t.value("experiment_id", ""), state,
                  t.value("end_reason", ""), SweepValueText(t["objective"]),
                  SweepValueText(t["objective_step"]),
                  SweepValueText(t.value("last_step", json(nullptr))), Params(t["params"])});
  }
  out << table.Render();
  return out.str();
}

}  // namespace tfslurm::tfctl
