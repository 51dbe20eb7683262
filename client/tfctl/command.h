// What every tfctl subcommand shares: exit codes, the global options, the
// connection to the service, and how errors are shown. Each subcommand lives
// in its own file (submit.cc, status.cc, ...) and registers itself with one
// Add...Command function.
//
// Thread safety: for tfctl's one thread: these functions and the commands
// write to std::cout and std::cerr.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "client/tfctl/output.h"
#include "client/tfslurm_client.h"

namespace tfslurm::tfctl {

enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,  // the service refused, failed or could not be reached; an experiment failed
  kExitUsage = 2,  // bad command line
};

struct GlobalOptions {
  client::ConnectionFlags connection;
};

// A registered subcommand and what runs when it was chosen.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

// "tfctl: MESSAGE" and one indented "FIELD: REASON" line per field; for
// kUnauthenticated (every 401 answer) also where the token comes from.
void PrintError(const Status& error, std::ostream& out);
// Prints the error to stderr; returns kExitError.
int Fail(const Status& error);

// A client for the service named by the flags, the environment or the
// config file; nullopt after printing why there is none.
std::optional<client::Client> Connect(const GlobalOptions& options);

// The choice `word` was most likely meant to be, for "did you mean": the
// nearest by edit distance (a swap of neighbours counts as one edit), or the
// one that holds `word`, or whose last '/' part is near it (a tag
// "train/loss" for "los"); "" when none is near enough to suggest.
std::string Nearest(const std::string& word, const std::vector<std::string>& choices);

// Fail for a call about experiment `id`: after a 404, the caller's own
// experiment nearest to `id` is suggested ("did you mean ...?"), found in
// the list the service shows the caller (only their own).
int FailForId(client::Client& client, const std::string& id, const Status& error);

// A DELETE of an experiment or a sweep (`call`), retried while the service
// answers 503 because the thing has ended but its Slurm jobs are still
// leaving (the service keeps it until they have, so that no record goes
// while a task may still write). tfctl waits that out, up to a minute, rather
// than make the user retry by hand: the jobs leave within a poll or two of
// slurmctld, or the service is in trouble and says so. A 503 after which the
// thing is gone (`still_there` false: deleted, but some of its files could
// not be removed) is not retried: its message is the answer.
StatusOr<nlohmann::json> DeleteWaitingForJobsToLeave(
    client::Client& client, const std::function<StatusOr<nlohmann::json>()>& call,
    const std::function<bool()>& still_there);

// The positional ID, checked against the service's id pattern so that a
// mistyped id is a usage error, not a request.
void AddExperimentIdArgument(CLI::App* app, std::string& id);
// -o/--output table|json|yaml, and name too when offer_name is set.
void AddOutputOption(CLI::App* app, OutputFormat& format, bool offer_name = false);

Command AddSubmitCommand(CLI::App& app, const GlobalOptions& global,
                         const std::vector<std::string>& command_after_dashes);
Command AddStatusCommand(CLI::App& app, const GlobalOptions& global);
Command AddListCommand(CLI::App& app, const GlobalOptions& global);
Command AddResumeCommand(CLI::App& app, const GlobalOptions& global,
                         const std::vector<std::string>& command_after_dashes);
Command AddCancelCommand(CLI::App& app, const GlobalOptions& global);
Command AddDeleteCommand(CLI::App& app, const GlobalOptions& global);
Command AddEventsCommand(CLI::App& app, const GlobalOptions& global);
Command AddLogsCommand(CLI::App& app, const GlobalOptions& global);
Command AddMetricsCommand(CLI::App& app, const GlobalOptions& global);
Command AddTokenCommand(CLI::App& app, const GlobalOptions& global);
Command AddLoginCommand(CLI::App& app, const GlobalOptions& global);
Command AddSweepCommand(CLI::App& app, const GlobalOptions& global);

}  // namespace tfslurm::tfctl
