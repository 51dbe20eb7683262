// tfctl logs: a task's output (or the batch script's), from the service's
// log endpoint; -f follows it until the attempt ends. Without --task it
// shows the log that explains the most: the task that failed, else every
// task's, each line after its task ("worker:1 | ", whole lines only, so that
// tasks never mix within a line; with -f, as they come). It says which on
// stderr, so that it never prints nothing without a word.
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
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

// ChooseTask's answer for "every task's log".
constexpr const char* kEveryTask = "*";

// Without --task: the first task that failed, else every task (kEveryTask);
// the batch script's output ("") when there is no task yet or the attempt
// asked for is not the current one (whose tasks are the only ones the
// service lists). Says on stderr which it is.
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
  std::cerr << "tfctl: every task's log, each line after its task (no task failed); one "
               "task's: --task ROLE:INDEX, the batch script's output: --task batch\n";
  return kEveryTask;
}

bool AttemptEnded(const client::Experiment& e, int attempt) {
  for (const client::Attempt& a : e.attempts)
    if (a.number == attempt) return a.state == "ended";
  return true;
}

// Every task's log of the current attempt, each line after its task. Without
// -f one task after another; with -f in rounds, whole lines as they come,
// until the attempt ends.
int RunEveryTask(client::Client& client, const client::Experiment& e, const LogsOptions& options,
                 bool escape) {
  struct Stream {
    Stream(client::LogQuery q, std::string prefix)
        : query(std::move(q)), lines(std::move(prefix)) {}
    client::LogQuery query;
    client::TerminalEscaper escaper{client::LineBreaks::kKeep};
    client::PrefixedLines lines;
  };
  std::vector<std::unique_ptr<Stream>> streams;
  size_t width = 0;
  for (const client::Task& t : e.tasks) width = std::max(width, TaskKey(t).size());
  for (const client::Task& t : e.tasks) {
    std::string key = TaskKey(t);
    std::string prefix = key + std::string(width - key.size(), ' ') + " | ";
    streams.push_back(std::make_unique<Stream>(
        client::LogQuery{options.id, key, e.attempt, options.tail, std::nullopt, false}, prefix));
  }
  auto write = [](const std::string& data) {
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::fflush(stdout);
  };
  int64_t printed = 0;
  auto read_once = [&](Stream& s) -> Status {
    auto read = client.ReadLogs(s.query, [&](std::string_view data) {
      printed += static_cast<int64_t>(data.size());
      write(s.lines.Feed(escape ? s.escaper.Feed(data) : std::string(data)));
    });
    if (!read.ok()) return read.status();
    s.query.offset = *read;
    s.query.tail.reset();
    return Status::Ok();
  };
  auto finish = [&](Stream& s) {
    write(s.lines.Feed(escape ? s.escaper.Finish() : "") + s.lines.Finish());
  };
  for (;;) {
    auto started = std::chrono::steady_clock::now();
    for (auto& s : streams) {
      if (Status st = read_once(*s); !st.ok()) return Fail(st);
      if (!options.follow) finish(*s);
    }
    if (!options.follow) break;
    auto now = client.GetExperiment(options.id);
    if (!now.ok()) return Fail(now.status());
    if (AttemptEnded(*now, e.attempt)) {
      for (auto& s : streams) {
        if (Status st = read_once(*s); !st.ok()) return Fail(st);
        finish(*s);
      }
      break;
    }
    if (std::chrono::steady_clock::now() - started < std::chrono::seconds(1))
      std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (printed == 0) std::cerr << "tfctl: every task's log is empty so far\n";
  return kExitOk;
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
    if (query.task == kEveryTask)
      return RunEveryTask(*client, *e, options, !options.raw && isatty(STDOUT_FILENO));
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
      "  tfctl logs mnist-ps-01            (the failed task's, or every task's)\n"
      "  tfctl logs mnist-ps-01 --task chief:0 --tail 50\n"
      "  tfctl logs mnist-ps-01 --task worker:1 -f\n"
      "  tfctl logs mnist-ps-01 --attempt 1\n"
      "  tfctl logs ddp-01 --task rank:3   (a PyTorch rank)\n"
      "  tfctl logs mnist-ps-01 --task chief:0 --raw   (colours and all)");
  return {sub, [&global, options] { return RunLogs(global, *options); }};
}

}  // namespace tfslurm::tfctl
