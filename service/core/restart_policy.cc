#include "service/core/restart_policy.h"

#include <algorithm>

#include "service/core/wording.h"

namespace tfslurm {

AfterAttempt DecideAfterAttempt(const RestartPolicy& p, EndReason reason, const std::string& why,
                                int attempt_number, int restarts) {
  if (reason == EndReason::kSucceeded) return {AfterAttempt::kSucceed, why};
  std::string attempt_n = "attempt " + std::to_string(attempt_number);
  // An unknown end may have been any of them (a success too): restarting
  // costs one attempt, which resumes from the last checkpoint and ends at
  // once if training had finished; not restarting may drop a training that
  // was preempted or hit its time limit. So it is restarted whenever the
  // policy restarts anything.
  const bool unknown = reason == EndReason::kUnknown;
  if (unknown ? p.on.empty() : !p.on.count(reason)) {
    return {AfterAttempt::kFail,
            attempt_n + " " + EndReasonName(reason) + ": " + why + " (not restarted: " +
                (unknown ? std::string("restart.on is empty")
                         : std::string(EndReasonName(reason)) + " is not in restart.on") +
                (reason == EndReason::kStartupError
                     ? ": it would fail the same way again; fix it and resume, or name "
                       "startup_error in restart.on if it can pass"
                     : "") +
                ")"};
  }
  if (restarts >= p.max_restarts) {
    return {AfterAttempt::kFail, attempt_n + " " + EndReasonName(reason) + ": " + why +
                                     " (max_restarts " + std::to_string(p.max_restarts) +
                                     " reached)"};
  }
  // Backoff doubles per restart: a crash loop must not hammer the cluster.
  int64_t delay_ms = int64_t{p.backoff_s} * 1000 << std::min(restarts, 6);
  delay_ms = std::min<int64_t>(delay_ms, 10 * 60 * 1000);
  const std::string restart = attempt_n + " " + EndReasonName(reason) + ": " + why + "; restart " +
                              std::to_string(restarts + 1) + " of " +
                              std::to_string(p.max_restarts);
  const std::string unknown_note =
      unknown ? " (an unknown end is restarted when restart.on allows any restart: the next "
                "attempt resumes from the last checkpoint)"
              : "";
  return {AfterAttempt::kRestart, restart + " in " + Seconds(delay_ms) + unknown_note,
          restart + ", at once" + unknown_note, delay_ms};
}

}  // namespace tfslurm
