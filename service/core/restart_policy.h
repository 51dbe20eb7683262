// The restart policy: what an ended attempt means for its experiment. Pure:
// the Slurm watch (slurm_watch.cc) applies the decision.
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <string>

#include "service/core/spec.h"

namespace tfslurm {

struct AfterAttempt {
  enum Action { kSucceed, kFail, kRestart } action = kFail;
  // The experiment's reason for its new state; for kRestart, a restart in a
  // new Slurm job after delay_ms ("restart 1 of 3 in 10 s").
  std::string why;
  // kRestart: the reason when the next attempt starts at once in the same
  // job instead (restart.in_allocation), where no backoff is waited for.
  std::string why_in_place;
  // kRestart: when the next attempt is submitted, from now.
  int64_t delay_ms = 0;
};

// Attempt `attempt_number` ended for `reason` (`why` says how) after
// `restarts` automatic restarts: succeed, fail (the policy does not restart
// that reason, or max_restarts is reached), or restart after a backoff that
// doubles per restart, up to 10 minutes. An unknown end is restarted whenever
// the policy restarts anything.
AfterAttempt DecideAfterAttempt(const RestartPolicy& policy, EndReason reason,
                                const std::string& why, int attempt_number, int restarts);

}  // namespace tfslurm
