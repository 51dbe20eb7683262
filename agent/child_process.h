// Starts, signals and reaps the user's program.
//
// The program is started like a shell would start it, but without a shell:
// argv[0] is searched in the PATH of the program's environment (execvp's
// rules, ENOEXEC scripts run by /bin/sh), and a program that cannot be started
// exits 127 (not found) or 126 (found but not executable, e.g. EACCES), so the
// service sees the codes it classifies as not retryable. The reason is read
// back from the child through a close-on-exec pipe, so the agent can log it.
//
// Process group: the program runs in a process group of its own and every
// signal goes to that group. A `sh -c` wrapper or launcher script does not
// forward signals to what it started, so signalling only the direct child
// would let SIGKILL on Shutdown miss the real training process, which would
// keep its GPU and port. Slurm does not depend on our group: proctrack
// (linuxproc, cgroup) signals every process of the step whatever its group.
// Under proctrack/pgid a separate group would escape Slurm's tracking, so the
// program also gets PR_SET_PDEATHSIG(SIGKILL): it never outlives the agent.
// The signal mask and SIGPIPE's disposition, which the agent changes for
// itself, are reset to their defaults before exec.
//
// Thread safety: Start forks, so the caller must not hold locks other threads
// need; everything between fork and exec is async-signal-safe. A
// ChildProcess belongs to one thread.
#ifndef TFSLURM_AGENT_CHILD_PROCESS_H_
#define TFSLURM_AGENT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace tfslurm::agent {

struct ChildSpec {
  std::vector<std::string> argv;  // argv[0] is searched in PATH unless it holds a '/'
  std::string workdir;            // empty: the agent's working directory
  std::vector<std::string> env;   // "NAME=value" entries, the whole environment
};

// How a process ended.
struct ExitStatus {
  int exit_code = 0;         // when it exited normally
  int signal = 0;            // when a signal ended it
  bool core_dumped = false;  // the signal's default action wrote a core file (WCOREDUMP)

  // The shell's convention: the exit code, or 128 + signal.
  int ShellStatus() const { return signal != 0 ? 128 + signal : exit_code; }
  std::string Describe() const;
};

ExitStatus DecodeWaitStatus(int wait_status);

// The file execve runs for `spec`: argv[0], or the first executable file of
// that name in the program's PATH (relative names from the workdir); ""
// when there is none. It reads the file system.
std::string ResolveProgram(const ChildSpec& spec);

class ChildProcess {
 public:
  // Fails only when no process could be created (fork, pipe). A program that
  // cannot be executed still yields a ChildProcess, which exits 126/127 and
  // whose launch_error() says why.
  static StatusOr<ChildProcess> Start(const ChildSpec& spec);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() = default;  // does not kill: the caller decides

  pid_t pid() const { return pid_; }
  // Why exec failed, e.g. "cannot run 'foo': No such file or directory".
  const std::optional<std::string>& launch_error() const { return launch_error_; }
  // The same without "(exit code N)", for the exit report's detail, which
  // carries the code of its own.
  const std::optional<std::string>& launch_cause() const { return launch_cause_; }

  // Sends `sig` to the program's process group. A no-op once reaped.
  Status Signal(int sig);

  // Non-blocking: the status once the program has ended (reaps it).
  std::optional<ExitStatus> TryWait();
  // Blocks until the program ends.
  ExitStatus Wait();

  // SIGKILL to whatever is left of the program's process group once the
  // program itself has been reaped (daemons it left behind).
  void KillLeftovers();

  bool reaped() const { return status_.has_value(); }
  const std::optional<ExitStatus>& status() const { return status_; }

 private:
  ChildProcess(pid_t pid, std::optional<std::string> launch_cause, int launch_code)
      : pid_(pid), launch_cause_(std::move(launch_cause)) {
    if (launch_cause_)
      launch_error_ = *launch_cause_ + " (exit code " + std::to_string(launch_code) + ")";
  }

  pid_t pid_ = -1;
  std::optional<std::string> launch_error_;
  std::optional<std::string> launch_cause_;
  std::optional<ExitStatus> status_;
};

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_CHILD_PROCESS_H_
