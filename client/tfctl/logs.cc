// tfctl logs: a task's output (or the batch script's), from the service's
// log endpoint; -f follows it until the attempt ends. Without --task it
// chooses the task whose log explains the most (the one that failed) and
// says which on stderr, so that it never prints nothing without a word.
//
// On a terminal the output is escaped (client/terminal_text.h), keeping line
// breaks and tabs: a program's output is written by whoever submitted it, and
// is often read by someone else (an admin, a colleague), so an OSC, a screen
// clear or a bare CR in it must not act on the reader's terminal. This is
// journalctl's default. Into a pipe or a file the bytes go as they are, for
// grep and for tools that do their own escaping (less). --raw gives the bytes
// on a terminal too, for someone who wants their own program's colours.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>

#include "client/terminal_text.h"
#include "client/tfctl/command.h"

namespace tfslurm::tfctl {
namespace {

struct LogsOptions {
  std::string id;
  std::string task;
  std::optional<int> attempt;
  std::optional<int> tail;
  bool follow = false;
  bool raw = false;
};

// --task's value for the batch script's output (Slurm's messages about the job).
constexpr const char* kBatch = "batch";

std::string TaskKey(const client::Task& t) { return t.role + ":" + std::to_string(t.index); }

// Without --task: the first task that failed, else the chief, else worker 0,
// else the first task; the batch script's output ("") when there is no task
// yet or the attempt asked for is not the current one (whose tasks are the
// only ones the service lists). Says on stderr which it is.
std::string ChooseTask(const client::Experiment& e, std::optional<int> attempt) {
  const char* other = "; another: --task ROLE:INDEX, the batch script's output: --task batch\n";
  if (e.tasks.empty() || (attempt && *attempt != e.attempt)) {
    std::cerr << "tfctl: the batch script's output of attempt " << attempt.value_or(e.attempt)
              << (e.tasks.empty() ? " (no task has started)" : "")
              << "; a task's: --task ROLE:INDEX\n";
    return "";
  }
  for (const client::Task& t : e.tasks) {
    if (t.state != "failed") continue;
    std::cerr << "tfctl: the log of " << TaskKey(t) << ", which failed ("
              << (t.signal ? "signal " + std::to_string(*t.signal)
                           : "exit code " + std::to_string(t.exit_code.value_or(-1)))
              << ")" << other;
    return TaskKey(t);
  }
  const client::Task* chosen = &e.tasks.front();
  for (const char* preferred : {"chief:0", "worker:0"}) {
    auto it = std::find_if(e.tasks.begin(), e.tasks.end(),
                           [&](const client::Task& t) { return TaskKey(t) == preferred; });
    if (it != e.tasks.end()) {
      chosen = &*it;
      break;
    }
  }
  std::cerr << "tfctl: the log of " << TaskKey(*chosen) << " (no task failed)" << other;
  return TaskKey(*chosen);
}

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
  if (options.task == kBatch) {
    query.task.clear();
  } else if (options.task.empty()) {
    auto e = client->GetExperiment(options.id);
    if (!e.ok()) return FailForId(*client, options.id, e.status());
    query.task = ChooseTask(*e, options.attempt);
  }
  bool escape = !options.raw && isatty(STDOUT_FILENO);
  client::TerminalEscaper escaper(client::LineBreaks::kKeep);
  int64_t printed = 0;
  auto write = [](std::string_view data) {
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::fflush(stdout);
  };
  auto print = [&](std::string_view data) {
    printed += static_cast<int64_t>(data.size());
    if (escape)
      write(escaper.Feed(data));
    else
      write(data);
  };
  auto done = [&](int exit_code) {
    if (escape) write(escaper.Finish());
    return exit_code;
  };
  if (!options.follow) {
    auto read = client->ReadLogs(query, print);
    if (!read.ok()) return done(Fail(read.status()));
    if (printed == 0)
      std::cerr << "tfctl: the log of " << (query.task.empty() ? "the batch script" : query.task)
                << " is empty so far\n";
    return done(kExitOk);
  }

  // The service ends a follow response when the attempt ends or its follow
  // window is over; go on from the last byte until the attempt has ended.
  // Pin the attempt first, so that a restart does not switch files midway.
  if (!query.attempt) {
    auto e = client->GetExperiment(options.id);
    if (!e.ok()) return done(Fail(e.status()));
    query.attempt = e->attempt;
  }
  for (;;) {
    auto started = std::chrono::steady_clock::now();
    auto read = client->ReadLogs(query, print);
    if (!read.ok()) return done(Fail(read.status()));
    query.offset = *read;
    query.tail.reset();
    auto e = client->GetExperiment(options.id);
    if (!e.ok()) return done(Fail(e.status()));
    if (AttemptEnded(*e, *query.attempt)) return done(kExitOk);
    if (std::chrono::steady_clock::now() - started < std::chrono::seconds(1))
      std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace

Command AddLogsCommand(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<LogsOptions>();
  CLI::App* sub = app.add_subcommand("logs", "print a task's output (stdout and stderr)");
  AddExperimentIdArgument(sub, options->id);
  sub->add_option(
      "--task", options->task,
      "ROLE:INDEX, e.g. worker:1 or ps:0 (rank:N for PyTorch and JAX), or `batch` for the "
      "batch script's output (Slurm's own messages about the job); without it, the "
      "task that failed, else the chief or worker 0 (stderr says which)");
  sub->add_option("--attempt", options->attempt, "attempt number; default: the current one")
      ->check(CLI::PositiveNumber);
  sub->add_option("--tail", options->tail, "only the last N lines")->check(CLI::Range(1, 1000000));
  sub->add_flag("-f,--follow", options->follow, "keep printing new output until the attempt ends");
  sub->add_flag("--raw", options->raw,
                "write the output's bytes as they are; by default control characters (escape "
                "sequences, CR, ...) and bidi controls are shown escaped, as \\x1b or \\u202e, "
                "when the output is a terminal");
  sub->footer(
      "Examples:\n"
      "  tfctl logs mnist-ps-01            (the failed task's, or the chief's or worker 0's)\n"
      "  tfctl logs mnist-ps-01 --task chief:0 --tail 50\n"
      "  tfctl logs mnist-ps-01 --task worker:1 -f\n"
      "  tfctl logs mnist-ps-01 --attempt 1\n"
      "  tfctl logs ddp-01 --task rank:3   (a PyTorch rank)\n"
      "  tfctl logs mnist-ps-01 --task chief:0 --raw   (colours and all)");
  return {sub, [&global, options] { return RunLogs(global, *options); }};
}

}  // namespace tfslurm::tfctl
