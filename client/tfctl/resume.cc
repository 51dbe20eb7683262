// tfctl resume: a new attempt of an experiment, from its latest checkpoint.
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "client/terminal_text.h"
#include "client/tfctl/command.h"
#include "client/tfctl/experiment_text.h"
#include "client/tfctl/wait.h"

namespace tfslurm::tfctl {
namespace {

constexpr auto kRetryFor = std::chrono::seconds(30);

struct ResumeOptions {
  std::string id;
  bool wait = false;
  OutputFormat output = OutputFormat::kTable;
};

int RunResume(const GlobalOptions& global, const ResumeOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  auto resumed = client->ResumeExperiment(options.id);
  // Retryable: the last attempt's Slurm job is still finishing, which takes
  // seconds right after a cancel. Only the service's answer says so (503
  // unavailable); no answer at all, Unavailable too, fails at once.
  auto service_says_retry = [&] {
    return !resumed.ok() && resumed.status().retryable() && client->last_error_http_status() != 0;
  };
  for (auto deadline = std::chrono::steady_clock::now() + kRetryFor;
       service_says_retry() && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    resumed = client->ResumeExperiment(options.id);
  }
  if (!resumed.ok()) return Fail(resumed.status());
  const client::Experiment& e = *resumed;
  bool table = options.output == OutputFormat::kTable;
  if (table) {
    std::string origin =
        ", from the start (no checkpoint in " + client::EscapeForTerminal(e.model_dir) + ")";
    if (!e.attempts.empty() && e.attempts.back().start_step)
      origin = ", from checkpoint step " + std::to_string(*e.attempts.back().start_step);
    std::cout << "resumed " << client::EscapeForTerminal(e.id) << ": attempt " << e.attempt;
    if (e.slurm_job_id) std::cout << ", Slurm job " << *e.slurm_job_id;
    std::cout << origin << "\n";
  }
  if (!options.wait) {
    if (!table) PrintStructured(e.raw, options.output, std::cout);
    return kExitOk;
  }
  int64_t seen = e.events.empty() ? 0 : e.events.back().id;
  auto finished = WaitUntilFinished(*client, e.id, seen, table ? &std::cout : nullptr);
  if (!finished.ok()) return Fail(finished.status());
  if (table)
    std::cout << FormatOutcomeLine(*finished) << "\n";
  else
    PrintStructured(finished->raw, options.output, std::cout);
  return ExitCodeFor(*finished);
}

}  // namespace

Command AddResumeCommand(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<ResumeOptions>();
  CLI::App* sub = app.add_subcommand(
      "resume",
      "run an experiment again from its latest checkpoint (a new attempt, same MODEL_DIR)");
  AddExperimentIdArgument(sub, options->id);
  sub->add_flag("--wait", options->wait,
                "follow the new attempt to the experiment's end; exit 0 if it succeeded");
  AddOutputOption(sub, options->output);
  sub->footer(
      "Examples:\n"
      "  tfctl resume mnist-ps-01\n"
      "  tfctl resume mnist-ps-01 --wait");
  return {sub, [&global, options] { return RunResume(global, *options); }};
}

}  // namespace tfslurm::tfctl
