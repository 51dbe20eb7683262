#include "client/tfctl/command.h"

#include <algorithm>
#include <iostream>
#include <regex>

#include "client/terminal_text.h"

namespace tfslurm::tfctl {

void PrintError(const Status& error, std::ostream& out) {
  // The service's messages quote what was sent or stored (ids, paths, tags),
  // and a message from a misbehaving server is text too: escaped.
  using client::EscapeForTerminal;
  out << "tfctl: " << EscapeForTerminal(error.message(), client::LineBreaks::kKeep) << "\n";
  for (const FieldError& f : error.fields())
    out << "  " << (f.field.empty() ? "(the spec)" : EscapeForTerminal(f.field)) << ": "
        << EscapeForTerminal(f.reason) << "\n";
  if (error.code() == StatusCode::kUnauthenticated)
    out << "tfctl sends the token given with --token, in TFSLURM_TOKEN or as `token = ...` in "
           "~/.config/tfslurm/config\n";
}

int Fail(const Status& error) {
  PrintError(error, std::cerr);
  return kExitError;
}

std::optional<client::Client> Connect(const GlobalOptions& options) {
  client::EnvLookup env = client::ProcessEnvironment();
  auto connection =
      client::ResolveConnection(options.connection, env, client::DefaultConfigPath(env));
  if (!connection.ok()) {
    Fail(connection.status());
    return std::nullopt;
  }
  return client::Client(std::move(connection).value());
}

namespace {

// Optimal string alignment distance: insertions, deletions, substitutions
// and swaps of adjacent characters ("stauts" is one from "status").
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string Nearest(const std::string& word, const std::vector<std::string>& choices) {
  if (word.empty()) return "";
  // Near enough: at most a third of the word wrong, and never more than 3.
  const size_t allowed = std::min<size_t>(3, std::max<size_t>(1, word.size() / 3));
  std::string best;
  size_t best_distance = allowed + 1;
  for (const std::string& choice : choices) {
    size_t distance = EditDistance(word, choice);
    const std::string last = choice.substr(choice.rfind('/') + 1);
    if (last != choice) distance = std::min(distance, EditDistance(word, last));
    if (distance > allowed && word.size() >= 3 && choice.find(word) != std::string::npos)
      distance = allowed;
    if (distance < best_distance) {
      best = choice;
      best_distance = distance;
    }
  }
  return best;
}

void AddExperimentIdArgument(CLI::App* app, std::string& id) {
  static const std::regex kId("[a-z0-9][a-z0-9._-]{0,62}");
  app->add_option("id", id, "experiment id")
      ->required()
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            if (std::regex_match(value, kId)) return "";
            return "'" + value +
                   "' is not an experiment id: ids are 1-63 characters of a-z 0-9 . _ -, "
                   "starting with a letter or digit";
          },
          "ID"));
}

void AddOutputOption(CLI::App* app, OutputFormat& format, bool offer_name) {
  std::map<std::string, OutputFormat> formats = {{"table", OutputFormat::kTable},
                                                 {"json", OutputFormat::kJson},
                                                 {"yaml", OutputFormat::kYaml}};
  if (offer_name) formats["name"] = OutputFormat::kName;
  app->add_option("-o,--output", format,
                  offer_name ? "output format: table (default), json, yaml, or name (one id a line)"
                             : "output format: table (default), json or yaml")
      ->transform(CLI::CheckedTransformer(formats))
      ->option_text(offer_name ? "table|json|yaml|name" : "table|json|yaml");
}

}  // namespace tfslurm::tfctl
