// `--wait` of submit and resume: follow an experiment to its end.
#pragma once

#include <ostream>
#include <string>

#include "client/tfslurm_client.h"

namespace tfslurm::tfctl {

// Polls the experiment until it has finished, writing each new event to
// `events` (nullptr: silent), and returns its last view. Events seen before
// the call (ids up to `after_event_id`) are not repeated. Rides out a service
// restart: gives up only when the service stays unreachable for a minute.
client::Result<client::Experiment> WaitUntilFinished(client::Client& client, const std::string& id,
                                                     int64_t after_event_id, std::ostream* events);

// The exit code of `tfctl submit --wait`: kExitOk when the experiment
// succeeded, kExitError when it failed or was cancelled.
int ExitCodeFor(const client::Experiment& experiment);

}  // namespace tfslurm::tfctl
