// The agent's signal handling: no handlers at all. The signals the agent
// reacts to are blocked in every thread and read from a signalfd by the main
// loop, so all the work (forwarding to the program, reaping it) happens in
// ordinary code, not in a signal handler.
//
// BlockAgentSignals must run first thing in main, before any thread exists
// (gRPC starts threads): threads inherit the mask, and a signal not blocked
// in some thread would be delivered there with its default action.
//
// Thread safety: BlockAgentSignals sets process-wide dispositions and the
// calling thread's mask, so it belongs to main before any other thread;
// OpenSignalFd may be called from any thread.
#ifndef TFSLURM_AGENT_SIGNALS_H_
#define TFSLURM_AGENT_SIGNALS_H_

#include <array>
#include <csignal>

#include "base/status.h"

namespace tfslurm::agent {

// Sent to the agent (by Slurm, srun, scancel --signal, a user), passed on to
// the program: SIGUSR1/SIGUSR2 are what `sbatch --signal` uses to ask for a
// checkpoint before the time limit.
inline constexpr std::array<int, 4> kForwardedSignals = {SIGTERM, SIGINT, SIGUSR1, SIGUSR2};

// Blocks kForwardedSignals and SIGCHLD, restores SIGCHLD's default
// disposition (an inherited SIG_IGN would make the kernel reap the program
// behind our back) and ignores SIGPIPE (a closed socket is an error return,
// not death).
void BlockAgentSignals();

// A non-blocking, close-on-exec signalfd for the signals BlockAgentSignals
// blocked.
StatusOr<int> OpenSignalFd();

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_SIGNALS_H_
