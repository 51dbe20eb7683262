// tfctl submit: send an experiment spec (a file, flags, or both) to the
// service; --dry-run shows the sbatch script instead, --wait follows the
// experiment to its end.
#include <filesystem>
#include <iostream>
#include <memory>
#include <system_error>

#include "client/spec_file.h"
#include "client/spec_flags.h"
#include "client/terminal_text.h"
#include "client/tfctl/command.h"
#include "client/tfctl/experiment_text.h"
#include "client/tfctl/wait.h"

namespace tfslurm::tfctl {
namespace {

struct SubmitOptions {
  std::string spec_file;
  client::SpecFlags flags;
  bool dry_run = false;
  bool wait = false;
  OutputFormat output = OutputFormat::kTable;
};

int RunSubmit(const GlobalOptions& global, SubmitOptions options,
              const std::vector<std::string>& command) {
  nlohmann::json spec;
  if (!options.spec_file.empty()) {
    auto loaded = client::LoadSpecFile(options.spec_file);
    if (!loaded.ok()) return Fail(loaded.status());
    spec = std::move(loaded).value();
  }
  options.flags.command = command;
  // Relative to where tfctl runs, like every other path on its command line;
  // the service needs it absolute.
  std::error_code ec;
  std::filesystem::path here = std::filesystem::current_path(ec);
  if (!ec) options.flags.default_workdir = here.string();
  if (options.flags.workdir && !std::filesystem::path(*options.flags.workdir).is_absolute()) {
    if (ec)
      return Fail(InvalidArgument("cannot make --workdir absolute: " + ec.message(),
                                  {{"workdir", "give an absolute path"}}));
    options.flags.workdir = (here / *options.flags.workdir).lexically_normal().string();
  }
  auto composed = client::ComposeSpec(std::move(spec), options.flags);
  if (!composed.ok()) return Fail(composed.status());

  auto client = Connect(global);
  if (!client) return kExitError;

  if (options.dry_run) {
    auto dry = client->SubmitDryRun(*composed);
    if (!dry.ok()) return Fail(dry.status());
    if (options.output != OutputFormat::kTable) {
      PrintStructured(dry->raw, options.output, std::cout);
      return kExitOk;
    }
    // The script alone on stdout, so `> job.sbatch` gives a usable file.
    std::cerr << "experiment " << client::EscapeForTerminal(dry->id) << ", Slurm job name "
              << dry->job_name << "\n"
              << "memory: " << dry->mem_per_task_mb << " MB per task, " << dry->mem_per_cpu_mb
              << " MB per CPU (" << dry->mem_explanation << ")\n"
              << "nothing was submitted (--dry-run); the sbatch script follows on stdout\n";
    std::cout << dry->sbatch;
    return kExitOk;
  }

  auto submitted = client->Submit(*composed);
  if (!submitted.ok()) return Fail(submitted.status());
  const client::Experiment& e = *submitted;
  if (options.output != OutputFormat::kTable && !options.wait) {
    PrintStructured(e.raw, options.output, std::cout);
    return kExitOk;
  }
  if (options.output == OutputFormat::kTable) {
    std::cout << "submitted " << client::EscapeForTerminal(e.id) << ": attempt " << e.attempt;
    if (e.slurm_job_id) std::cout << ", Slurm job " << *e.slurm_job_id;
    std::cout << ", " << e.mem_per_task_mb << " MB per task\n";
    if (!options.wait)
      std::cout << "follow it with: tfctl status " << client::EscapeForTerminal(e.id)
                << " --watch, or tfctl logs " << client::EscapeForTerminal(e.id)
                << (e.raw.value("/spec/framework"_json_pointer, "tensorflow") != "tensorflow"
                        ? " --task rank:N -f\n"
                        : " --task ROLE:INDEX -f\n");
  }
  if (!options.wait) return kExitOk;

  bool table = options.output == OutputFormat::kTable;
  auto finished = WaitUntilFinished(*client, e.id, 0, table ? &std::cout : nullptr);
  if (!finished.ok()) return Fail(finished.status());
  if (table)
    std::cout << FormatOutcomeLine(*finished) << "\n";
  else
    PrintStructured(finished->raw, options.output, std::cout);
  return ExitCodeFor(*finished);
}

}  // namespace

Command AddSubmitCommand(CLI::App& app, const GlobalOptions& global,
                         const std::vector<std::string>& command_after_dashes) {
  auto options = std::make_shared<SubmitOptions>();
  CLI::App* sub =
      app.add_subcommand("submit", "submit an experiment from a spec file and/or flags");
  sub->add_option("spec", options->spec_file, "experiment spec, YAML or JSON (.json)")
      ->check(CLI::Validator(
          [](std::string& path) -> std::string {
            std::error_code ec;
            auto status = std::filesystem::status(path, ec);
            if (std::filesystem::is_directory(status))
              return "'" + path +
                     "' is a directory, not a spec file; to run the program in it, give "
                     "--workdir " +
                     path + " (the default is the current directory)";
            if (!std::filesystem::exists(status))
              return "no spec file '" + path +
                     "'; the program to run goes after --, e.g. tfctl submit --workers 2 -- "
                     "python3 train.py";
            return "";
          },
          "SPEC"));
  auto& f = options->flags;
  sub->add_option("--id", f.id, "experiment id (EXPERIMENT_ID); generated when absent");
  sub->add_option("--ps", f.ps, "number of parameter servers (cluster.ps)");
  sub->add_option("--workers", f.workers, "number of workers (cluster.worker)");
  sub->add_option("--nodes", f.nodes, "number of nodes (resources.nodes)");
  sub->add_option("--tasks-per-node", f.tasks_per_node,
                  "tasks per node (resources.tasks_per_node)");
  sub->add_option("--partition", f.partition, "Slurm partition (resources.partition)");
  sub->add_option("--time-limit,--time", f.time_limit,
                  "time limit, e.g. 02:00:00 (resources.time_limit)");
  sub->add_option("--env", f.env,
                  "NAME=VALUE, an environment variable of the program (env); repeat for more");
  sub->add_option("--workdir", f.workdir,
                  "the program's working directory (workdir); default: the spec's, else the "
                  "current directory, as sbatch");
  sub->add_flag("--dry-run", options->dry_run,
                "print the sbatch script and the memory per task; submit nothing");
  sub->add_flag("--wait", options->wait,
                "follow the experiment to its end; exit 0 if it succeeded, 1 otherwise");
  AddOutputOption(sub, options->output);
  sub->footer(
      "The program to run goes after --; it overrides the spec's command. It runs in\n"
      "--workdir, else the spec's workdir, else the directory tfctl was run from (as sbatch),\n"
      "so `tfctl submit ... -- python3 train.py` runs the train.py next to you.\n"
      "Without a spec file the flags make the spec. When neither nodes nor tasks per node\n"
      "are given, every task gets its own node.\n\n"
      "Examples:\n"
      "  tfctl submit experiment.yaml\n"
      "  tfctl submit experiment.yaml --workers 8 --time 04:00:00 --dry-run\n"
      "  tfctl submit --id hello --workers 2 --wait -- /bin/sh -c 'echo hello from $TFSLURM_ROLE'\n"
      "  cd myproject && tfctl submit --id mine-1 --workers 2 --wait -- python3 train.py");
  return {sub, [&global, options, &command_after_dashes] {
            return RunSubmit(global, *options, command_after_dashes);
          }};
}

}  // namespace tfslurm::tfctl
