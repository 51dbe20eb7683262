// `--wait` of submit and resume: follow an experiment to its end.
//
// Thread safety: WaitUntilFinished uses the caller's Client, which belongs to
// one thread; ExitCodeFor is a pure function.
#pragma once

#include <ostream>
#include <string>

#include "base/status.h"
#include "client/tfslurm_client.h"

namespace tfslurm::tfctl {

// Polls the experiment until it has finished, writing each new event to
// `events` (nullptr: silent), and returns its last view. Events seen before
// the call (ids up to `after_event_id`) are not repeated. Rides out a service
// restart: gives up only when the service stays unreachable for a minute.
// Any error answer of the service (even a retryable one) ends the wait.
StatusOr<client::Experiment> WaitUntilFinished(client::Client& client, const std::string& id,
                                               int64_t after_event_id, std::ostream* events);

// The exit code of `tfctl submit --wait`: kExitOk when the experiment
// succeeded, kExitError when it failed or was cancelled.
int ExitCodeFor(const client::Experiment& experiment);

}  // namespace tfslurm::tfctl
