// tfctl metrics: an experiment's training scalars, the latest value of each
// tag (GET /experiments/{id}/metrics; -o json gives every kept point).
#include <cstdio>
#include <iostream>
#include <memory>

#include "client/terminal_text.h"
#include "client/tfctl/command.h"
#include "client/tfctl/table.h"

namespace tfslurm::tfctl {
namespace {

struct MetricsOptions {
  std::string id;
  std::vector<std::string> tags;
  OutputFormat output = OutputFormat::kTable;
};

// Six significant digits, as TensorBoard's scalar tooltips show them.
std::string Number(double value) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.6g", value);
  return buf;
}

std::string FormatMetrics(const std::string& id, const client::TrainingMetrics& m) {
  std::string out;
  if (m.tags.empty()) {
    out = "No training scalars yet for " + client::EscapeForTerminal(id) +
          ". tfslurm reads TensorBoard event files under MODEL_DIR, and lines of "
          "$TFSLURM_SCALARS_FILE, from the chief (or worker 0, or rank 0) while it runs (see "
          "docs/scalars.md).\n";
  } else {
    Table table({"TAG", "STEP", "VALUE", "ATTEMPT", "POINTS"});
    for (const client::TrainingMetrics::Tag& t : m.tags) {
      table.AddRow({t.tag, t.step ? std::to_string(*t.step) : "-",
                    t.value ? Number(*t.value) : (t.step ? "NaN/inf" : "-"),
                    t.attempt ? std::to_string(*t.attempt) : "-",
                    t.points == t.reported
                        ? std::to_string(t.points)
                        : std::to_string(t.points) + " kept of " + std::to_string(t.reported)});
    }
    out = table.Render();
  }
  if (m.steps_per_second)
    out += "\nSteps per second: " + Number(*m.steps_per_second) + " (latest, from " +
           client::EscapeForTerminal(m.steps_per_second_tag) + ")\n";
  if (!m.tensorboard_command.empty())
    out += (m.steps_per_second ? "" : "\n") + std::string("TensorBoard: ") +
           client::EscapeForTerminal(m.tensorboard_command) + "\n";
  return out;
}

int RunMetrics(const GlobalOptions& global, const MetricsOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  auto metrics = client->GetTrainingMetrics(options.id, options.tags);
  if (!metrics.ok()) return Fail(metrics.status());
  if (options.output != OutputFormat::kTable)
    PrintStructured(metrics->raw, options.output, std::cout);
  else
    std::cout << FormatMetrics(options.id, *metrics);
  return kExitOk;
}

}  // namespace

Command AddMetricsCommand(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<MetricsOptions>();
  CLI::App* sub = app.add_subcommand(
      "metrics",
      "show an experiment's training scalars: each tag's latest value, steps per second");
  AddExperimentIdArgument(sub, options->id);
  sub->add_option("--tag", options->tags, "only this tag (repeatable), e.g. train/epoch_loss");
  AddOutputOption(sub, options->output);
  sub->footer(
      "Examples:\n"
      "  tfctl metrics mnist-ps-01\n"
      "  tfctl metrics mnist-ps-01 --tag train/epoch_loss -o json   (every kept point)");
  return {sub, [&global, options] { return RunMetrics(global, *options); }};
}

}  // namespace tfslurm::tfctl
