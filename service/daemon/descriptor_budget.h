// The site's cap on an experiment's tasks (--max-tasks-per-experiment)
// against the file descriptors tfslurmd may open. Every task's agent holds
// one gRPC connection to the agent endpoint while its attempt runs, and a
// connection is a descriptor; an experiment at the cap must fit beside
// what the process needs besides its agents. The soft RLIMIT_NOFILE is
// raised to the hard one at start (daemon.cc), so the hard limit is what
// bounds it.
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace tfslurm::daemon {

// Descriptors kept for everything but agents: REST connections, the
// database and its journal, log files being followed, gRPC's own.
inline constexpr int64_t kDescriptorsBesideAgents = 1024;

struct TaskCap {
  int max_tasks = 0;
  std::string warning;  // when a default cap was lowered to fit; else ""
};

// The cap to run with, given the hard limit on descriptors. A cap the site
// set (`given`) that does not fit is refused (FailedPrecondition, saying
// how to fix it); the default one is lowered to fit, with a warning.
inline StatusOr<TaskCap> FitTaskCap(int max_tasks, bool given, int64_t hard_limit) {
  const int64_t need = max_tasks + kDescriptorsBesideAgents;
  if (hard_limit >= need) return TaskCap{max_tasks, ""};
  const int64_t fits = hard_limit - kDescriptorsBesideAgents;
  const std::string limit = "this process may open at most " + std::to_string(hard_limit) +
                            " file descriptors (its hard RLIMIT_NOFILE), and every task's agent "
                            "holds one connection, besides " +
                            std::to_string(kDescriptorsBesideAgents) + " kept for the rest";
  const std::string raise =
      "raise the hard limit (LimitNOFILE= in tfslurmd.service, or `ulimit -Hn` as root before "
      "starting it)";
  if (given || fits < 1)
    return FailedPrecondition(
        "--max-tasks-per-experiment " + std::to_string(max_tasks) + " needs " +
        std::to_string(need) + " file descriptors, but " + limit + ": " + raise +
        (fits >= 1 ? ", or give --max-tasks-per-experiment " + std::to_string(fits) + " or less"
                   : ""));
  return TaskCap{static_cast<int>(fits), "experiments are capped at " + std::to_string(fits) +
                                             " tasks, not the default " +
                                             std::to_string(max_tasks) + ": " + limit + "; " +
                                             raise + " for the default cap"};
}

}  // namespace tfslurm::daemon
