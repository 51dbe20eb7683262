// tfctl delete: remove an ended experiment from the service, and with
// --files its directory in the output root.
#include <iostream>
#include <memory>

#include "client/terminal_text.h"
#include "client/tfctl/command.h"

namespace tfslurm::tfctl {
namespace {

struct DeleteOptions {
  std::string id;
  bool files = false;
  OutputFormat output = OutputFormat::kTable;
};

int RunDelete(const GlobalOptions& global, const DeleteOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  auto deleted = DeleteWaitingForJobsToLeave(
      *client, [&] { return client->DeleteExperiment(options.id, options.files); },
      [&] { return client->GetExperiment(options.id).ok(); });
  if (!deleted.ok()) return FailForId(*client, options.id, deleted.status());
  if (options.output != OutputFormat::kTable) {
    PrintStructured(*deleted, options.output, std::cout);
    return kExitOk;
  }
  const std::string from = deleted->value("files_removed_from", "");
  const std::string kept = deleted->value("model_dir_kept", "");
  std::cout << "deleted " << client::EscapeForTerminal(options.id);
  if (!from.empty())
    std::cout << " and its files (" << client::EscapeForTerminal(from) << ", "
              << deleted->value("entries_removed", 0) << " entries)";
  else if (options.files)
    std::cout << " (it had no directory in the output root)";
  std::cout << "\n";
  if (!kept.empty())
    std::cout << "its model_dir " << client::EscapeForTerminal(kept)
              << " is outside the experiment's directory and was kept\n";
  return kExitOk;
}

}  // namespace

Command AddDeleteCommand(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<DeleteOptions>();
  CLI::App* sub = app.add_subcommand(
      "delete", "remove an ended experiment from the service (and with --files, its files)");
  AddExperimentIdArgument(sub, options->id);
  sub->add_flag("--files", options->files,
                "also remove its directory in the output root (logs, and checkpoints unless "
                "model_dir is elsewhere); symlinks in it are removed, never followed");
  AddOutputOption(sub, options->output);
  sub->footer(
      "Only an ended experiment (succeeded, failed, cancelled) can be deleted; cancel a running\n"
      "one first. Right after the end, while its Slurm job is still finishing, tfctl waits for\n"
      "it (up to 60 s). Its id is free again. This cannot be undone.\n\n"
      "Examples:\n"
      "  tfctl delete mnist-ps-01\n"
      "  tfctl delete mnist-ps-01 --files");
  return {sub, [&global, options] { return RunDelete(global, *options); }};
}

}  // namespace tfslurm::tfctl
