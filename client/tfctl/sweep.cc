// tfctl sweep submit|status|list|cancel|delete: sweeps of trials over a
// parameter space (schema/sweep-spec.md). The status table is sorted by the
// objective, best first, and marks the sweep's best trial.
#include <iostream>
#include <memory>
#include <regex>

#include "client/spec_file.h"
#include "client/terminal_text.h"
#include "client/tfctl/command.h"
#include "client/tfctl/sweep_text.h"
#include "client/tfctl/table.h"

namespace tfslurm::tfctl {
namespace {

using nlohmann::json;

struct SweepOptions {
  std::string file;
  std::string id;
  bool files = false;
  OutputFormat output = OutputFormat::kTable;
};

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
    std::cout << FormatSweepStatus(*answer);
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

int RunDelete(const GlobalOptions& global, const SweepOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  auto deleted = DeleteWaitingForJobsToLeave(
      *client, [&] { return client->DeleteSweep(options.id, options.files); },
      [&] { return client->GetSweep(options.id).ok(); });
  if (!deleted.ok()) return Fail(deleted.status());
  if (options.output != OutputFormat::kTable) {
    PrintStructured(*deleted, options.output, std::cout);
    return kExitOk;
  }
  const json trials = deleted->value("experiments_deleted", json::array());
  std::cout << "deleted sweep " << client::EscapeForTerminal(options.id) << " and " << trials.size()
            << " trial experiment" << (trials.size() == 1 ? "" : "s");
  if (options.files)
    std::cout << ", with their files (" << deleted->value("entries_removed", 0) << " entries)";
  std::cout << "\n";
  for (const json& t : trials)
    if (!t.value("model_dir_kept", "").empty())
      std::cout << client::EscapeForTerminal(t.value("id", "")) << "'s model_dir "
                << client::EscapeForTerminal(t.value("model_dir_kept", ""))
                << " is outside its directory and was kept\n";
  return kExitOk;
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
    table.AddRow({s.value("id", ""), s.value("state", ""), SweepValueText(s["trials_total"]),
                  SweepValueText(s["created_at"]), s.value("reason", "")});
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
  CLI::App* remove = sweep->add_subcommand(
      "delete", "remove an ended sweep and its trials' experiments (with --files, their files)");
  AddSweepIdArgument(remove, options->id);
  remove->add_flag("--files", options->files,
                   "also remove each trial's directory in the output root (logs, and checkpoints "
                   "unless model_dir is elsewhere); symlinks in it are removed, never followed");
  AddOutputOption(remove, options->output);
  remove->footer(
      "Only an ended sweep (completed or cancelled) can be deleted; cancel a running one first.\n"
      "Each trial's experiment is deleted as `tfctl delete` would, then the sweep; right after\n"
      "the end, while a trial's Slurm job is still finishing, tfctl waits for it (up to 60 s).\n"
      "This cannot be undone.\n\n"
      "Examples:\n"
      "  tfctl sweep delete lr-sweep\n"
      "  tfctl sweep delete lr-sweep --files");
  return {sweep, [&global, options, submit, status, list, cancel, remove] {
            if (submit->parsed()) return RunSubmit(global, *options);
            if (status->parsed()) return RunStatus(global, *options);
            if (list->parsed()) return RunList(global, *options);
            if (cancel->parsed()) return RunCancel(global, *options);
            if (remove->parsed()) return RunDelete(global, *options);
            return static_cast<int>(kExitUsage);
          }};
}

}  // namespace tfslurm::tfctl
