// Which processes of the program catch a signal, as the kernel shows it in
// /proc/PID/status (SigCgt: the signals with a handler installed). The agent
// asks before passing on SIGUSR1, Slurm's warning before the time limit: a
// program with no handler for it would only die of it (its default action),
// losing the last minutes before the limit, and the attempt would end as a
// program killed by a signal instead of at its time limit.
//
// The program runs in a process group of its own (child_process.h), so its
// processes are those whose process group is the program's pid: a launcher
// (`sh -c`, a wrapper script) that does not catch the signal may run a
// training process that does.
//
// Thread safety: pure functions, and reads of /proc.
#ifndef TFSLURM_AGENT_SIGNAL_CATCHERS_H_
#define TFSLURM_AGENT_SIGNAL_CATCHERS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::agent {

// The SigCgt mask of a /proc/PID/status text (bit N-1 is signal N); nullopt
// when the text has no such line.
std::optional<uint64_t> ParseCaughtSignals(std::string_view proc_status);

// The process group of a /proc/PID/stat text (its fifth field, after the
// command name in parentheses, which may itself hold spaces and ')').
std::optional<pid_t> ParseProcessGroup(std::string_view proc_stat);

struct SignalCatchers {
  std::vector<pid_t> members;   // the group's processes found in /proc
  std::vector<pid_t> catching;  // those of them with a handler for the signal
};

// The processes of process group `pgid` under `proc_root` (/proc) and which
// of them catch `sig`. A process that ends during the walk is left out.
SignalCatchers FindSignalCatchers(pid_t pgid, int sig, const std::string& proc_root = "/proc");

// Slurm's warning before the time limit (SIGUSR1), as the agent passes it on:
// only to a program some process of which catches it. One that does not is
// not harmed by Slurm's own copy (it started with SIGUSR1 ignored,
// child_process.h) and trains on to the limit; the warning is held, and
// given to the program once it catches it, so that one which came while the
// program still imported its framework is not lost.
class TimeLimitWarning {
 public:
  // SIGUSR1 reached the agent. True: pass it on now (some process of group
  // `pgid` catches it, or /proc shows none of the group, so nothing can be
  // told). False: hold it; the log says why and what to do.
  bool PassOnNow(pid_t pgid, const std::string& proc_root = "/proc");
  // At the agent's heartbeats: true once when a held warning is to be
  // passed on, the program catching it now.
  bool HeldOneIsDue(pid_t pgid, const std::string& proc_root = "/proc");

 private:
  bool held_ = false;
};

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_SIGNAL_CATCHERS_H_
