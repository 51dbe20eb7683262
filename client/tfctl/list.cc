// tfctl list: experiments, open ones first, optionally only some states.
#include <algorithm>
#include <ctime>
#include <iostream>
#include <memory>

#include "client/tfctl/command.h"
#include "client/tfctl/experiment_text.h"

namespace tfslurm::tfctl {
namespace {

struct ListOptions {
  std::vector<std::string> states;
  int limit = 50;
  OutputFormat output = OutputFormat::kTable;
};

// Without a state filter, open experiments are asked for first, so that a
// long-running experiment is listed even when many newer ones have finished.
StatusOr<client::ExperimentList> OpenFirst(client::Client& client, int limit) {
  auto open = client.ListExperiments({{"running", "starting", "restarting", "queued"}, limit});
  if (!open.ok()) return open;
  client::ExperimentList list = std::move(open).value();
  int room = limit - static_cast<int>(list.experiments.size());
  auto finished = client.ListExperiments({{"succeeded", "failed", "cancelled"}, std::max(room, 1)});
  if (!finished.ok()) return finished;
  if (room > 0) {
    for (auto& e : finished->experiments) list.experiments.push_back(std::move(e));
    for (auto& e : finished->raw["experiments"]) list.raw["experiments"].push_back(std::move(e));
  }
  list.total += finished->total;
  list.raw["total"] = list.total;
  list.raw["limit"] = limit;
  return list;
}

int RunList(const GlobalOptions& global, const ListOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  auto list = options.states.empty() ? OpenFirst(*client, options.limit)
                                     : client->ListExperiments({options.states, options.limit});
  if (!list.ok()) return Fail(list.status());
  if (options.output == OutputFormat::kName) {
    std::cout << FormatExperimentIds(RunningFirst(list->experiments));
    return kExitOk;
  }
  if (options.output != OutputFormat::kTable) {
    PrintStructured(list->raw, options.output, std::cout);
    return kExitOk;
  }
  if (list->experiments.empty()) {
    std::cerr << "no experiments" << (options.states.empty() ? "" : " in these states") << "\n";
    return kExitOk;
  }
  std::cout << FormatExperimentList(RunningFirst(list->experiments), std::time(nullptr));
  if (list->total > static_cast<int64_t>(list->experiments.size()))
    std::cerr << "showing " << list->experiments.size() << " of " << list->total
              << " experiments; --limit N shows more\n";
  return kExitOk;
}

}  // namespace

Command AddListCommand(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<ListOptions>();
  CLI::App* sub = app.add_subcommand("list", "list experiments, running ones first");
  sub->add_option("--state", options->states,
                  "only these states: queued, starting, running, restarting, succeeded, failed, "
                  "cancelled (comma-separated or repeated)")
      ->delimiter(',');
  sub->add_option("--limit", options->limit, "at most this many experiments, newest first")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  AddOutputOption(sub, options->output, /*offer_name=*/true);
  sub->footer(
      "Examples:\n"
      "  tfctl list\n"
      "  tfctl list --state running,queued\n"
      "  tfctl list --state failed -o json\n"
      "  tfctl list --state failed -o name   # one id a line");
  return {sub, [&global, options] { return RunList(global, *options); }};
}

}  // namespace tfslurm::tfctl
