// tfctl status: one experiment, its attempts and its task table; --watch
// redraws it until the experiment has finished.
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "client/tfctl/command.h"
#include "client/tfctl/experiment_text.h"

namespace tfslurm::tfctl {
namespace {

struct StatusOptions {
  std::string id;
  bool watch = false;
  double interval_s = 2;
  OutputFormat output = OutputFormat::kTable;
};

void Show(const client::Experiment& e, OutputFormat output) {
  if (output == OutputFormat::kTable)
    std::cout << FormatStatus(e);
  else
    PrintStructured(e.raw, output, std::cout);
}

int RunStatus(const GlobalOptions& global, const StatusOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  // In place on a terminal (clear and redraw, like watch(1)); one page
  // after another when the output goes to a file or a pipe.
  bool redraw = options.watch && options.output == OutputFormat::kTable && isatty(STDOUT_FILENO);
  for (bool first = true;; first = false) {
    auto e = client->GetExperiment(options.id);
    if (!e.ok()) return FailForId(*client, options.id, e.status());
    if (redraw)
      std::cout << "\033[H\033[2J";
    else if (!first)
      std::cout << "\n";
    Show(*e, options.output);
    std::cout.flush();
    if (!options.watch || e->Finished()) return kExitOk;
    std::this_thread::sleep_for(std::chrono::duration<double>(options.interval_s));
  }
}

}  // namespace

Command AddStatusCommand(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<StatusOptions>();
  CLI::App* sub = app.add_subcommand(
      "status", "show an experiment: state, attempts, checkpoint step and the task table");
  AddExperimentIdArgument(sub, options->id);
  sub->add_flag("-w,--watch", options->watch,
                "refresh until the experiment has finished (Ctrl-C to stop earlier)");
  sub->add_option("--interval", options->interval_s, "seconds between refreshes with --watch")
      ->check(CLI::Range(0.2, 3600.0))
      ->capture_default_str();
  AddOutputOption(sub, options->output);
  sub->footer(
      "Examples:\n"
      "  tfctl status mnist-ps-01\n"
      "  tfctl status mnist-ps-01 --watch\n"
      "  tfctl status mnist-ps-01 -o json");
  return {sub, [&global, options] { return RunStatus(global, *options); }};
}

}  // namespace tfslurm::tfctl
