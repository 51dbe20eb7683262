// tfctl events: what happened to an experiment, oldest first.
#include <iostream>
#include <memory>

#include "client/tfctl/command.h"
#include "client/tfctl/experiment_text.h"

namespace tfslurm::tfctl {
namespace {

struct EventsOptions {
  std::string id;
  OutputFormat output = OutputFormat::kTable;
};

int RunEvents(const GlobalOptions& global, const EventsOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  auto e = client->GetExperiment(options.id);
  if (!e.ok()) return FailForId(*client, options.id, e.status());
  if (options.output != OutputFormat::kTable)
    PrintStructured(e->raw.value("events", nlohmann::json::array()), options.output, std::cout);
  else
    std::cout << FormatEventTable(e->events);
  return kExitOk;
}

}  // namespace

Command AddEventsCommand(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<EventsOptions>();
  CLI::App* sub = app.add_subcommand(
      "events", "show an experiment's events: submissions, Slurm states, tasks, restarts");
  AddExperimentIdArgument(sub, options->id);
  AddOutputOption(sub, options->output);
  sub->footer(
      "Example:\n"
      "  tfctl events mnist-ps-01");
  return {sub, [&global, options] { return RunEvents(global, *options); }};
}

}  // namespace tfslurm::tfctl
