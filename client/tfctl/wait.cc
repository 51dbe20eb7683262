#include "client/tfctl/wait.h"

#include <chrono>
#include <thread>

#include "client/tfctl/command.h"
#include "client/tfctl/experiment_text.h"

namespace tfslurm::tfctl {
namespace {

constexpr auto kPollInterval = std::chrono::seconds(1);
constexpr auto kUnreachableLimit = std::chrono::minutes(1);

}  // namespace

client::Result<client::Experiment> WaitUntilFinished(client::Client& client, const std::string& id,
                                                     int64_t after_event_id, std::ostream* events) {
  auto unreachable_since = std::chrono::steady_clock::time_point{};
  for (;;) {
    auto experiment = client.GetExperiment(id);
    if (!experiment.ok()) {
      // http_status 0: no answer. The service may be restarting; its state
      // survives, so keep asking for a while.
      if (experiment.error().http_status != 0) return experiment.error();
      auto now = std::chrono::steady_clock::now();
      if (unreachable_since == std::chrono::steady_clock::time_point{}) unreachable_since = now;
      if (now - unreachable_since > kUnreachableLimit) return experiment.error();
    } else {
      unreachable_since = {};
      for (const client::Event& e : experiment->events) {
        if (e.id <= after_event_id) continue;
        if (events) *events << FormatEventLine(e) << std::endl;
        after_event_id = e.id;
      }
      if (experiment->Finished()) return experiment;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

int ExitCodeFor(const client::Experiment& experiment) {
  return experiment.state == "succeeded" ? kExitOk : kExitError;
}

}  // namespace tfslurm::tfctl
