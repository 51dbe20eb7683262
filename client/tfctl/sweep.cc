// tfctl sweep submit|status|list|cancel: sweeps of trials over a parameter
// space (schema/sweep-spec.md). The status table is sorted by the
// objective, best first, and marks the sweep's best trial.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <regex>

#include "client/spec_file.h"
#include "client/terminal_text.h"
#include "client/tfctl/command.h"
#include "client/tfctl/table.h"

namespace tfslurm::tfctl {
namespace {

using nlohmann::json;

struct SweepOptions {
  std::string file;
  std::string id;
  OutputFormat output = OutputFormat::kTable;
};

std::string Text(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.6g", v.get<double>());
    return buf;
  }
  return v.dump();
}

std::string Params(const json& params) {
  std::string out;
  if (!params.is_object()) return out;
  for (const auto& [name, value] : params.items())
    out += (out.empty() ? "" : " ") + name + "=" + Text(value);
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

void PrintSweep(const json& s) {
  using client::EscapeForTerminal;
  const json& objective = s.contains("objective") ? s["objective"] : json::object();
  const std::string tag = objective.is_object() ? objective.value("tag", "objective") : "objective";
  std::cout << "sweep " << EscapeForTerminal(s.value("id", "")) << "  "
            << EscapeForTerminal(s.value("state", "")) << "  ("
            << EscapeForTerminal(s.value("reason", "")) << ")\n";
  std::cout << "objective: " << EscapeForTerminal(tag) << " ("
            << (objective.is_object() ? EscapeForTerminal(objective.value("goal", "")) : "")
            << ", at " << (objective.is_object() ? EscapeForTerminal(Text(objective["at"])) : "")
            << ")   node-hours: " << Text(s.value("node_seconds", 0.0) / 3600.0);
  const json& best = s.contains("best_trial") ? s["best_trial"] : json(nullptr);
  if (best.is_object())
    std::cout << "   best: " << EscapeForTerminal(best.value("experiment_id", "")) << " ("
              << EscapeForTerminal(tag) << " " << Text(best["objective"]) << ")";
  std::cout << "\n\n";
  Table table({"", "TRIAL", "STATE", "END", tag, "STEP", "PARAMS"});
  const int best_index = best.is_object() ? best.value("index", 0) : 0;
  for (const json& t : SortedTrials(s)) {
    const std::string state = t["experiment_state"].is_string() && t.value("state", "") == "running"
                                  ? t["experiment_state"].get<std::string>()
                                  : t.value("state", "");
    table.AddRow({t.value("index", 0) == best_index ? "*" : "", t.value("experiment_id", ""), state,
                  t.value("end_reason", ""), Text(t["objective"]), Text(t["objective_step"]),
                  Params(t["params"])});
  }
  std::cout << table.Render();
}

void AddSweepIdArgument(CLI::App* app, std::string& id) {
  static const std::regex kId("[a-z0-9][a-z0-9._-]{0,57}");
  app->add_option("id", id, "sweep id")
      ->required()
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            if (std::regex_match(value, kId)) return "";
            return "'" + value +
                   "' is not a sweep id: ids are 1-58 characters of a-z 0-9 . _ -, starting "
                   "with a letter or digit";
          },
          "ID"));
}

int Show(const StatusOr<json>& answer, OutputFormat output) {
  if (!answer.ok()) return Fail(answer.status());
  if (output != OutputFormat::kTable)
    PrintStructured(*answer, output, std::cout);
  else
    PrintSweep(*answer);
  return kExitOk;
}

int RunSubmit(const GlobalOptions& global, const SweepOptions& options) {
  auto spec = client::LoadSpecFile(options.file);
  if (!spec.ok()) return Fail(spec.status());
  auto client = Connect(global);
  if (!client) return kExitError;
  return Show(client->SubmitSweep(*spec), options.output);
}

int RunStatus(const GlobalOptions& global, const SweepOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  return Show(client->GetSweep(options.id), options.output);
}

int RunCancel(const GlobalOptions& global, const SweepOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  return Show(client->CancelSweep(options.id), options.output);
}

int RunList(const GlobalOptions& global, const SweepOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  auto list = client->ListSweeps();
  if (!list.ok()) return Fail(list.status());
  if (options.output != OutputFormat::kTable) {
    PrintStructured(*list, options.output, std::cout);
    return kExitOk;
  }
  Table table({"ID", "STATE", "TRIALS", "CREATED", "REASON"});
  for (const json& s : list->value("sweeps", json::array()))
    table.AddRow({s.value("id", ""), s.value("state", ""), Text(s["trials_total"]),
                  Text(s["created_at"]), s.value("reason", "")});
  std::cout << table.Render();
  return kExitOk;
}

}  // namespace

Command AddSweepCommand(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<SweepOptions>();
  CLI::App* sweep =
      app.add_subcommand("sweep", "sweeps: many trials over a parameter space, stopped early");
  sweep->require_subcommand(1);
  CLI::App* submit = sweep->add_subcommand(
      "submit", "submit a sweep spec (YAML or JSON; schema/sweep-spec.md) and start its trials");
  submit->add_option("spec", options->file, "the sweep spec file")->required();
  AddOutputOption(submit, options->output);
  submit->footer(
      "Every trial is an experiment <sweep>-<n> of yours; the sweep is checked whole first, "
      "and nothing is stored if anything is wrong.\n\n"
      "Example:\n"
      "  tfctl sweep submit lr-sweep.yaml");
  CLI::App* status = sweep->add_subcommand(
      "status", "a sweep's trials, sorted by the objective, best first (marked *)");
  AddSweepIdArgument(status, options->id);
  AddOutputOption(status, options->output);
  status->footer("Example:\n  tfctl sweep status lr-sweep");
  CLI::App* list = sweep->add_subcommand("list", "your sweeps, newest first");
  AddOutputOption(list, options->output);
  CLI::App* cancel =
      sweep->add_subcommand("cancel", "cancel a sweep and its running trials (no more start)");
  AddSweepIdArgument(cancel, options->id);
  AddOutputOption(cancel, options->output);
  cancel->footer("Example:\n  tfctl sweep cancel lr-sweep");
  return {sweep, [&global, options, submit, status, list, cancel] {
            if (submit->parsed()) return RunSubmit(global, *options);
            if (status->parsed()) return RunStatus(global, *options);
            if (list->parsed()) return RunList(global, *options);
            if (cancel->parsed()) return RunCancel(global, *options);
            return static_cast<int>(kExitUsage);
          }};
}

}  // namespace tfslurm::tfctl
