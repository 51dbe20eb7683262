// tfctl resume: a new attempt of an experiment, from its latest checkpoint.
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "client/spec_flags.h"
#include "client/terminal_text.h"
#include "client/tfctl/command.h"
#include "client/tfctl/experiment_text.h"
#include "client/tfctl/wait.h"

namespace tfslurm::tfctl {
namespace {

constexpr auto kRetryFor = std::chrono::seconds(30);

struct ResumeOptions {
  std::string id;
  std::string time_limit;
  std::vector<std::string> sets;  // --set PATH=VALUE, in order
  bool wait = false;
  OutputFormat output = OutputFormat::kTable;
};

// The spec changes the flags ask for; null when none.
StatusOr<nlohmann::json> Changes(const ResumeOptions& options,
                                 const std::vector<std::string>& command) {
  nlohmann::json changes = nullptr;
  if (!options.time_limit.empty()) changes["resources"]["time_limit"] = options.time_limit;
  for (const std::string& set : options.sets)
    if (Status s = client::SetSpecField(changes, set); !s.ok()) return s;
  if (!command.empty()) changes["command"] = command;
  return changes;
}

int RunResume(const GlobalOptions& global, const ResumeOptions& options,
              const std::vector<std::string>& command) {
  auto changes = Changes(options, command);
  if (!changes.ok()) {
    std::cerr << "tfctl resume: " << changes.status().message() << "\n";
    return kExitUsage;
  }
  auto client = Connect(global);
  if (!client) return kExitError;
  auto resumed = client->ResumeExperiment(options.id, *changes);
  // Retryable: the last attempt's Slurm job is still finishing, which takes
  // seconds right after a cancel. Only the service's answer says so (503
  // unavailable); no answer at all, Unavailable too, fails at once.
  auto service_says_retry = [&] {
    return !resumed.ok() && resumed.status().retryable() && client->last_error_http_status() != 0;
  };
  for (auto deadline = std::chrono::steady_clock::now() + kRetryFor;
       service_says_retry() && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    resumed = client->ResumeExperiment(options.id, *changes);
  }
  if (!resumed.ok()) return FailForId(*client, options.id, resumed.status());
  const client::Experiment& e = *resumed;
  bool table = options.output == OutputFormat::kTable;
  if (table) {
    std::string origin =
        ", from the start (no checkpoint in " + client::EscapeForTerminal(e.model_dir) + ")";
    if (!e.attempts.empty() && e.attempts.back().start_step)
      origin = ", from checkpoint step " + std::to_string(*e.attempts.back().start_step);
    std::cout << "resumed " << client::EscapeForTerminal(e.id) << ": attempt " << e.attempt;
    if (e.slurm_job_id) std::cout << ", Slurm job " << *e.slurm_job_id;
    std::cout << origin;
    if (!e.attempts.empty() && e.attempts.back().spec_revision > 1)
      std::cout << ", spec revision " << e.attempts.back().spec_revision;
    std::cout << "\n";
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

Command AddResumeCommand(CLI::App& app, const GlobalOptions& global,
                         const std::vector<std::string>& command_after_dashes) {
  auto options = std::make_shared<ResumeOptions>();
  CLI::App* sub = app.add_subcommand(
      "resume",
      "run an experiment again from its latest checkpoint (a new attempt, same MODEL_DIR)");
  AddExperimentIdArgument(sub, options->id);
  sub->add_option("--time-limit", options->time_limit,
                  "the new attempt's time limit (resources.time_limit), in Slurm's format: "
                  "MM, HH:MM:SS, D-HH:MM:SS");
  sub->add_option("--set", options->sets,
                  "change a spec field for this and later attempts: PATH=VALUE with a dotted "
                  "path (restart.max_restarts=5, env.LR=0.1, env.LR=null unsets); repeatable")
      ->allow_extra_args(false)
      ->take_all();
  sub->add_flag("--wait", options->wait,
                "follow the new attempt to the experiment's end; exit 0 if it succeeded");
  AddOutputOption(sub, options->output);
  sub->footer(
      "Examples:\n"
      "  tfctl resume mnist-ps-01\n"
      "  tfctl resume mnist-ps-01 --wait\n"
      "  tfctl resume mnist-ps-01 --time-limit 04:00:00 --set restart.max_restarts=5\n"
      "  tfctl resume linear-01 -- python3 train.py --steps 4000\n"
      "\n"
      "The program after -- replaces the spec's command. A resume may change the command,\n"
      "env, workdir, time limit and other resources, restart, checkpoint, progress and\n"
      "network; not the cluster's shape, framework or model_dir, which the checkpoint was\n"
      "written with. The changed spec is the experiment's next spec revision.");
  return {sub, [&global, options, &command_after_dashes] {
            return RunResume(global, *options, command_after_dashes);
          }};
}

}  // namespace tfslurm::tfctl
