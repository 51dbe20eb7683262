#include "client/tfctl/command.h"

#include "base/nearest_word.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <regex>
#include <thread>

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

StatusOr<nlohmann::json> DeleteWaitingForJobsToLeave(
    client::Client& client, const std::function<StatusOr<nlohmann::json>()>& call,
    const std::function<bool()>& still_there) {
  constexpr std::chrono::seconds kWait(60);
  constexpr std::chrono::milliseconds kRetry(500);
  auto deleted = call();
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  bool said = false;
  while (!deleted.ok() && deleted.status().retryable() && client.last_error_http_status() == 503 &&
         std::chrono::steady_clock::now() < deadline && still_there()) {
    if (!said) {
      std::cerr << "tfctl: " << client::EscapeForTerminal(deleted.status().message())
                << "; waiting for it (up to " << kWait.count() << " s)\n";
      said = true;
    }
    std::this_thread::sleep_for(kRetry);
    deleted = call();
  }
  return deleted;
}

int FailForId(client::Client& client, const std::string& id, const Status& error) {
  PrintError(error, std::cerr);
  if (error.code() != StatusCode::kNotFound || client.last_error_http_status() != 404)
    return kExitError;
  client::ListQuery query;
  query.limit = 1000;
  auto listed = client.ListExperiments(query);
  if (!listed.ok()) return kExitError;
  std::vector<std::string> ids;
  for (const client::Experiment& e : listed->experiments) {
    // The 404 was about something else (a task, an attempt) of this one.
    if (e.id == id) return kExitError;
    ids.push_back(e.id);
  }
  const std::string near = NearestWord(id, ids);
  if (!near.empty())
    std::cerr << "did you mean '" << client::EscapeForTerminal(near)
              << "'? (tfctl list shows your experiments)\n";
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

std::string Nearest(const std::string& word, const std::vector<std::string>& choices) {
  return NearestWord(word, choices);
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
