// tfctl: the command-line client of tfslurmd.
#include <algorithm>
#include <iostream>
#include <string>

#include "base/build_info.h"
#include "client/terminal_text.h"
#include "client/tfctl/command.h"
#include "tls/openssl_through_exit.h"

namespace {

constexpr const char* kOverview =
    "tfctl: submit, watch, resume and debug distributed TensorFlow experiments on Slurm";

constexpr const char* kFooter =
    "The service is found through --url, then TFSLURM_URL, then `url = ...` in\n"
    "~/.config/tfslurm/config, then http://127.0.0.1:8080; the token likewise through\n"
    "--token, TFSLURM_TOKEN and `token = ...`, and an https:// service's CA through\n"
    "--cacert, TFSLURM_CACERT and `cacert = ...` (else the system's trust store);\n"
    "`tfctl login` writes them.\n"
    "Exit codes: 0 ok, 1 error (or, with --wait, an experiment that did not succeed), 2 usage.\n\n"
    "Examples:\n"
    "  tfctl submit experiment.yaml --wait\n"
    "  tfctl list --state running\n"
    "  tfctl status mnist-ps-01 --watch\n"
    "  tfctl logs mnist-ps-01 --task worker:1 -f\n"
    "  tfctl metrics mnist-ps-01\n"
    "  tfctl sweep submit sweep.yaml\n"
    "Run `tfctl COMMAND --help` for a command's options and examples.";

// --url and --token go on tfctl itself and on every subcommand, so that they
// may come before or after the subcommand and every --help lists them.
void AddConnectionOptions(CLI::App* app, tfslurm::client::ConnectionFlags& flags) {
  app->add_option("--url", flags.url, "tfslurmd's URL, e.g. http://127.0.0.1:8080");
  app->add_option("--token", flags.token, "API token, sent as Authorization: Bearer");
  app->add_option("--cacert", flags.cacert,
                  "CA file (PEM) an https:// service's certificate must verify against; default: "
                  "the system's trust store");
}

// The words that are neither options nor the values of --url and --token:
// the subcommand and, for one that has its own (sweep, token), the next.
std::vector<std::string> Words(const std::vector<std::string>& args) {
  std::vector<std::string> words;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--url" || a == "--token" || a == "--cacert") {
      ++i;
      continue;
    }
    if (!a.empty() && a[0] == '-') continue;
    words.push_back(a);
  }
  return words;
}

// CLI11 would take a mistyped subcommand for an extra argument and answer
// "A subcommand is required". Says which word is wrong, the nearest name
// and the names there are; false when `word` is one of `names`.
bool UnknownSubcommand(const std::string& command, const std::string& word,
                       const std::vector<std::string>& names) {
  if (std::find(names.begin(), names.end(), word) != names.end()) return false;
  std::string near = tfslurm::tfctl::Nearest(word, names);
  std::cerr << command << ": unknown subcommand '" << tfslurm::client::EscapeForTerminal(word)
            << "'" << (near.empty() ? "" : "; did you mean '" + near + "'?") << "\n"
            << "the subcommands: ";
  for (size_t i = 0; i < names.size(); ++i) std::cerr << (i ? ", " : "") << names[i];
  std::cerr << " (" << command << " --help)\n";
  return true;
}

// A subcommand (or a command's own subcommand: tfctl sweep status) that is
// mistyped or missing, said on stderr.
bool WrongSubcommand(const std::vector<std::string>& args,
                     const std::vector<tfslurm::tfctl::Command>& commands) {
  const std::vector<std::string> words = Words(args);
  if (words.empty()) return false;
  std::vector<std::string> names;
  for (const tfslurm::tfctl::Command& c : commands) names.push_back(c.app->get_name());
  if (UnknownSubcommand("tfctl", words[0], names)) return true;
  // A command's own subcommands (tfctl sweep status, tfctl token create).
  const bool help = std::find_if(args.begin(), args.end(), [](const std::string& a) {
                      return a == "--help" || a == "-h";
                    }) != args.end();
  for (const tfslurm::tfctl::Command& c : commands) {
    if (c.app->get_name() != words[0]) continue;
    std::vector<std::string> subs;
    for (const CLI::App* sub : c.app->get_subcommands([](CLI::App*) { return true; }))
      subs.push_back(sub->get_name());
    if (subs.empty() || help) break;
    const std::string command = "tfctl " + words[0];
    if (words.size() < 2) {
      std::cerr << command << ": which? ";
      for (size_t i = 0; i < subs.size(); ++i) std::cerr << (i ? ", " : "") << subs[i];
      std::cerr << " (" << command << " --help)\n";
      return true;
    }
    if (UnknownSubcommand(command, words[1], subs)) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tfslurm::tfctl;
  tfslurm::tls::KeepOpenSslThroughExit();

  // Everything after the first `--` is the experiment's command (submit's):
  // CLI11 would otherwise hand its first word to submit's spec argument.
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> command_after_dashes;
  auto dashes = std::find(args.begin(), args.end(), "--");
  bool has_dashes = dashes != args.end();
  if (has_dashes) {
    command_after_dashes.assign(dashes + 1, args.end());
    args.erase(dashes, args.end());
  }

  CLI::App app{kOverview, "tfctl"};
  app.footer(kFooter);
  app.require_subcommand(1);
  GlobalOptions global;
  AddConnectionOptions(&app, global.connection);
  std::vector<Command> commands = {
      AddSubmitCommand(app, global, command_after_dashes),
      AddStatusCommand(app, global),
      AddListCommand(app, global),
      AddEventsCommand(app, global),
      AddLogsCommand(app, global),
      AddMetricsCommand(app, global),
      AddCancelCommand(app, global),
      AddResumeCommand(app, global, command_after_dashes),
      AddDeleteCommand(app, global),
      AddTokenCommand(app, global),
      AddLoginCommand(app, global),
      AddSweepCommand(app, global),
  };
  size_t c_resume = 0;
  while (c_resume < commands.size() && commands[c_resume].app->get_name() != "resume") ++c_resume;
  for (const Command& c : commands) {
    AddConnectionOptions(c.app, global.connection);
    for (CLI::App* sub : c.app->get_subcommands([](CLI::App*) { return true; }))
      AddConnectionOptions(sub, global.connection);  // tfctl token create --url ...
  }

  app.set_version_flag("--version",
                       std::string("tfctl ") + tfslurm::base::TfslurmVersion() + " (commit " +
                           tfslurm::base::TfslurmCommit() + ")",
                       "print tfctl's version and the commit it was built from");

  if (WrongSubcommand(args, commands)) return kExitUsage;

  std::reverse(args.begin(), args.end());  // CLI11 takes the vector back to front
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  // submit and resume take the program after --; nothing else does.
  if (has_dashes && !commands.front().app->parsed() &&
      !(c_resume < commands.size() && commands[c_resume].app->parsed())) {
    std::cerr << "tfctl: only `tfctl submit` and `tfctl resume` take a command after --\n";
    return kExitUsage;
  }
  for (const Command& c : commands)
    if (c.app->parsed()) return c.run();
  return kExitUsage;
}
