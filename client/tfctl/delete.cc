// tfctl delete: remove an ended experiment from the service, and with
// --files its directory in the output root.
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "client/terminal_text.h"
#include "client/tfctl/command.h"

namespace tfslurm::tfctl {
namespace {

// Right after an experiment ends, the service keeps it until it has seen
// its Slurm job leave (so that no record goes while a task may still write),
// and answers a delete with a 503 to retry in a few seconds. tfctl waits
// that out rather than make the user retry by hand: the job leaves within a
// poll or two of slurmctld, or the service is in trouble and says so. A 503
// after which the experiment is gone (deleted, but some of its files could
// not be removed) is not retried: its message is the answer.
constexpr std::chrono::seconds kFinishingWait(60);
constexpr std::chrono::milliseconds kFinishingRetry(500);

struct DeleteOptions {
  std::string id;
  bool files = false;
  OutputFormat output = OutputFormat::kTable;
};

int RunDelete(const GlobalOptions& global, const DeleteOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  auto deleted = client->DeleteExperiment(options.id, options.files);
  const auto deadline = std::chrono::steady_clock::now() + kFinishingWait;
  bool said = false;
  auto finishing = [&] {
    if (deleted.ok() || !deleted.status().retryable() || client->last_error_http_status() != 503)
      return false;
    return client->GetExperiment(options.id).ok();
  };
  while (std::chrono::steady_clock::now() < deadline && finishing()) {
    if (!said) {
      std::cerr << "tfctl: " << client::EscapeForTerminal(deleted.status().message())
                << "; waiting for it (up to " << kFinishingWait.count() << " s)\n";
      said = true;
    }
    std::this_thread::sleep_for(kFinishingRetry);
    deleted = client->DeleteExperiment(options.id, options.files);
  }
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
