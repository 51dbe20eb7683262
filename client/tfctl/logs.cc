// tfctl logs: a task's output (or the batch script's), from the service's
// log endpoint; -f follows it until the attempt ends.
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "client/tfctl/command.h"

namespace tfslurm::tfctl {
namespace {

struct LogsOptions {
  std::string id;
  std::string task;
  std::optional<int> attempt;
  std::optional<int> tail;
  bool follow = false;
};

bool AttemptEnded(const client::Experiment& e, int attempt) {
  for (const client::Attempt& a : e.attempts)
    if (a.number == attempt) return a.state == "ended";
  return true;
}

int RunLogs(const GlobalOptions& global, const LogsOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  client::LogQuery query{options.id,   options.task, options.attempt,
                         options.tail, std::nullopt, options.follow};
  auto print = [](std::string_view data) {
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::fflush(stdout);
  };
  if (!options.follow) {
    auto read = client->ReadLogs(query, print);
    return read.ok() ? kExitOk : Fail(read.status());
  }

  // The service ends a follow response when the attempt ends or its follow
  // window is over; go on from the last byte until the attempt has ended.
  // Pin the attempt first, so that a restart does not switch files midway.
  if (!query.attempt) {
    auto e = client->GetExperiment(options.id);
    if (!e.ok()) return Fail(e.status());
    query.attempt = e->attempt;
  }
  for (;;) {
    auto started = std::chrono::steady_clock::now();
    auto read = client->ReadLogs(query, print);
    if (!read.ok()) return Fail(read.status());
    query.offset = *read;
    query.tail.reset();
    auto e = client->GetExperiment(options.id);
    if (!e.ok()) return Fail(e.status());
    if (AttemptEnded(*e, *query.attempt)) return kExitOk;
    if (std::chrono::steady_clock::now() - started < std::chrono::seconds(1))
      std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace

Command AddLogsCommand(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<LogsOptions>();
  CLI::App* sub = app.add_subcommand("logs", "print a task's output (stdout and stderr)");
  AddExperimentIdArgument(sub, options->id);
  sub->add_option("--task", options->task,
                  "ROLE:INDEX, e.g. worker:1 or ps:0 (rank:N for PyTorch); without it, the batch "
                  "script's output "
                  "(Slurm's own messages about the job)");
  sub->add_option("--attempt", options->attempt, "attempt number; default: the current one")
      ->check(CLI::PositiveNumber);
  sub->add_option("--tail", options->tail, "only the last N lines")->check(CLI::Range(1, 1000000));
  sub->add_flag("-f,--follow", options->follow, "keep printing new output until the attempt ends");
  sub->footer(
      "Examples:\n"
      "  tfctl logs mnist-ps-01 --task chief:0 --tail 50\n"
      "  tfctl logs mnist-ps-01 --task worker:1 -f\n"
      "  tfctl logs mnist-ps-01 --attempt 1\n"
      "  tfctl logs ddp-01 --task rank:3   (a PyTorch rank)");
  return {sub, [&global, options] { return RunLogs(global, *options); }};
}

}  // namespace tfslurm::tfctl
