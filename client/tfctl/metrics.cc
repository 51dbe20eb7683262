// tfctl metrics: an experiment's training scalars, the latest value of each
// tag (GET /experiments/{id}/metrics; -o json gives every kept point).
#include <algorithm>
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

// The --tag values the experiment has no scalars for, each said on stderr
// with the nearest tag it has and the list of them.
std::vector<std::string> ReportMissingTags(client::Client& client, const MetricsOptions& options,
                                           const client::TrainingMetrics& found) {
  std::vector<std::string> missing;
  for (const std::string& tag : options.tags) {
    bool have = std::any_of(found.tags.begin(), found.tags.end(),
                            [&](const client::TrainingMetrics::Tag& t) { return t.tag == tag; });
    if (!have && std::find(missing.begin(), missing.end(), tag) == missing.end())
      missing.push_back(tag);
  }
  if (missing.empty()) return missing;
  std::vector<std::string> all;
  if (auto every = client.GetTrainingMetrics(options.id, {}); every.ok())
    for (const client::TrainingMetrics::Tag& t : every->tags) all.push_back(t.tag);
  for (const std::string& tag : missing) {
    std::string near = Nearest(tag, all);
    std::cerr << "tfctl: " << options.id << " has no training scalars of tag '" << tag << "'"
              << (near.empty() ? "" : "; did you mean '" + near + "'?") << "\n";
  }
  if (all.empty()) {
    std::cerr << "tfctl: " << options.id << " has no training scalars yet (docs/scalars.md)\n";
  } else {
    std::cerr << "its tags: ";
    for (size_t i = 0; i < all.size(); ++i) std::cerr << (i ? ", " : "") << all[i];
    std::cerr << "\n";
  }
  return missing;
}

int RunMetrics(const GlobalOptions& global, const MetricsOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  auto metrics = client->GetTrainingMetrics(options.id, options.tags);
  if (!metrics.ok()) return FailForId(*client, options.id, metrics.status());
  std::vector<std::string> missing;
  if (!options.tags.empty()) {
    missing = ReportMissingTags(*client, options, *metrics);
    // Nothing of what was asked for: the reason is on stderr, not a table
    // saying there are no scalars at all.
    if (missing.size() == options.tags.size() && options.output == OutputFormat::kTable)
      return kExitError;
  }
  if (options.output != OutputFormat::kTable)
    PrintStructured(metrics->raw, options.output, std::cout);
  else
    std::cout << FormatMetrics(options.id, *metrics);
  return missing.empty() ? kExitOk : kExitError;
}

}  // namespace

Command AddMetricsCommand(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<MetricsOptions>();
  CLI::App* sub = app.add_subcommand(
      "metrics",
      "show an experiment's training scalars: each tag's latest value, steps per second");
  AddExperimentIdArgument(sub, options->id);
  sub->add_option("--tag", options->tags,
                  "only this tag (repeatable), e.g. train/epoch_loss; a tag the experiment does "
                  "not have is an error that names the nearest and lists those it has");
  AddOutputOption(sub, options->output);
  sub->footer(
      "Examples:\n"
      "  tfctl metrics mnist-ps-01\n"
      "  tfctl metrics mnist-ps-01 --tag train/epoch_loss -o json   (every kept point)");
  return {sub, [&global, options] { return RunMetrics(global, *options); }};
}

}  // namespace tfslurm::tfctl
