// tfctl cancel: stop an experiment; its Slurm job is cancelled.
#include <iostream>
#include <memory>

#include "client/terminal_text.h"
#include "client/tfctl/command.h"

namespace tfslurm::tfctl {
namespace {

struct CancelOptions {
  std::string id;
  OutputFormat output = OutputFormat::kTable;
};

int RunCancel(const GlobalOptions& global, const CancelOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  auto cancelled = client->CancelExperiment(options.id);
  if (!cancelled.ok()) return FailForId(*client, options.id, cancelled.status());
  if (options.output != OutputFormat::kTable)
    PrintStructured(cancelled->raw, options.output, std::cout);
  else
    std::cout << "cancelled " << client::EscapeForTerminal(cancelled->id) << " (state "
              << client::EscapeForTerminal(cancelled->state) << ")\n";
  return kExitOk;
}

}  // namespace

Command AddCancelCommand(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<CancelOptions>();
  CLI::App* sub = app.add_subcommand("cancel", "cancel an experiment and its Slurm job");
  AddExperimentIdArgument(sub, options->id);
  AddOutputOption(sub, options->output);
  sub->footer(
      "The experiment's checkpoints stay; `tfctl resume ID` continues from them.\n\n"
      "Example:\n"
      "  tfctl cancel mnist-ps-01");
  return {sub, [&global, options] { return RunCancel(global, *options); }};
}

}  // namespace tfslurm::tfctl
