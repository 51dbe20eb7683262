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

StatusOr<client::Experiment> WaitUntilFinished(client::Client& client, const std::string& id,
                                               int64_t after_event_id, std::ostream* events) {
  auto unreachable_since = std::chrono::steady_clock::time_point{};
  for (;;) {
    auto experiment = client.GetExperiment(id);
    if (!experiment.ok()) {
      // No error answer (last_error_http_status() 0): no answer at all, or
      // one that was not an experiment. The service may be restarting; its
      // state survives, so keep asking for a while. An error answer, even a
      // retryable 503, ends the wait at once.
      if (client.last_error_http_status() != 0) return experiment.status();
      auto now = std::chrono::steady_clock::now();
      if (unreachable_since == std::chrono::steady_clock::time_point{}) unreachable_since = now;
      if (now - unreachable_since > kUnreachableLimit) return experiment.status();
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
