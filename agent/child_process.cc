#include "agent/child_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

namespace tfslurm::agent {
namespace {

// What the child writes to the launch pipe when it cannot exec.
struct LaunchFailure {
  enum Stage : int { kChdir = 1, kExec = 2 };
  int stage = 0;
  int error = 0;
};

// The shell's codes: "not found" is 127, anything else that prevents running
// the program is 126.
int LaunchFailureExitCode(int error) { return error == ENOENT ? 127 : 126; }

// The default PATH of execvp (confstr _CS_PATH) when the environment has none.
constexpr char kDefaultPath[] = "/bin:/usr/bin";

std::string LookupPath(const std::vector<std::string>& env) {
  for (const std::string& entry : env) {
    if (entry.starts_with("PATH=")) return entry.substr(5);
  }
  return kDefaultPath;
}

// The files execvp would try, in order.
std::vector<std::string> ExecCandidates(const std::string& name, const std::string& path) {
  if (name.find('/') != std::string::npos) return {name};
  std::vector<std::string> candidates;
  size_t start = 0;
  while (true) {
    size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon == std::string::npos ? colon : colon - start);
    candidates.push_back((dir.empty() ? std::string(".") : dir) + "/" + name);  // "" is "."
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return candidates;
}

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

[[noreturn]] void ReportAndExit(int fd, LaunchFailure::Stage stage, int error) {
  LaunchFailure failure{stage, error};
  ssize_t ignored = ::write(fd, &failure, sizeof(failure));
  (void)ignored;
  ::_exit(LaunchFailureExitCode(error));
}

// Runs in the forked child: only async-signal-safe calls from here on, since
// other threads of the agent (gRPC's) may have held locks at fork time.
[[noreturn]] void ExecChild(int report_fd, pid_t agent_pid, const char* workdir,
                            const std::vector<char*>& candidates, char* const* argv,
                            char** shell_argv, char* const* envp) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != agent_pid) ::_exit(128 + SIGKILL);  // the agent died before prctl

  // The agent blocks the signals it forwards and ignores SIGPIPE; both would
  // survive exec and silently change the program's behaviour.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGPIPE, &dfl, nullptr);
  // SIGUSR1 is Slurm's warning before the time limit, and Slurm sends it to
  // every process of the step, this one included, not only to the agent
  // (proctrack_g_signal in slurmstepd's _handle_signal_container). Its
  // default action is death: a program with no handler would die of it,
  // minutes before its limit. Ignored across exec, as nohup does with
  // SIGHUP: a program that wants the warning installs a handler, which
  // replaces SIG_IGN (signal(2), sigaction(2), Python's signal.signal).
  struct sigaction ign = dfl;
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGUSR1, &ign, nullptr);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  if (workdir != nullptr && ::chdir(workdir) != 0) {
    ReportAndExit(report_fd, LaunchFailure::kChdir, errno);
  }

  // execvp's search, with execve only (execvp itself is not
  // async-signal-safe) and the program's own PATH.
  bool saw_eacces = false;
  int error = ENOENT;
  for (char* candidate : candidates) {
    if (candidate == nullptr) break;
    ::execve(candidate, argv, envp);
    int err = errno;
    if (err == EACCES) {
      saw_eacces = true;
      continue;
    }
    if (err == ENOENT || err == ENOTDIR || err == ESTALE || err == ENODEV || err == ETIMEDOUT) {
      continue;
    }
    if (err == ENOEXEC) {
      // A script without "#!": run it with the shell, as execvp does.
      shell_argv[1] = candidate;
      ::execve("/bin/sh", shell_argv, envp);
      err = errno;
    }
    error = err;
    saw_eacces = false;
    break;
  }
  ReportAndExit(report_fd, LaunchFailure::kExec, saw_eacces ? EACCES : error);
}

// The first of `candidates` that is an executable regular file, relative
// ones from `workdir`; "" when none is.
std::string FirstExecutable(const std::vector<std::string>& candidates,
                            const std::string& workdir) {
  for (const std::string& c : candidates) {
    const std::string file = c[0] == '/' || workdir.empty() ? c : workdir + "/" + c;
    struct stat st;
    if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(file.c_str(), X_OK) == 0)
      return file;
  }
  return "";
}

}  // namespace

std::string ResolveProgram(const ChildSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) return "";
  return FirstExecutable(ExecCandidates(spec.argv[0], LookupPath(spec.env)), spec.workdir);
}

std::string ExitStatus::Describe() const {
  if (signal == 0) return "exited with code " + std::to_string(exit_code);
  const char* name = ::sigabbrev_np(signal);
  return "was killed by signal " + std::to_string(signal) +
         (name != nullptr ? std::string(" (SIG") + name + ")" : std::string()) +
         (core_dumped ? ", core dumped" : "");
}

ExitStatus DecodeWaitStatus(int wait_status) {
  ExitStatus status;
  if (WIFEXITED(wait_status)) {
    status.exit_code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    status.signal = WTERMSIG(wait_status);
    status.core_dumped = WCOREDUMP(wait_status);
  }
  return status;
}

StatusOr<ChildProcess> ChildProcess::Start(const ChildSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return Error("the program's command is empty");
  }
  // Everything the child needs is allocated before fork.
  const std::string path = LookupPath(spec.env);
  const std::vector<std::string> candidates = ExecCandidates(spec.argv[0], path);
  std::vector<char*> candidate_ptrs = CStrings(candidates);
  std::vector<char*> argv = CStrings(spec.argv);
  std::vector<std::string> shell_args = {"/bin/sh", ""};
  shell_args.insert(shell_args.end(), spec.argv.begin() + 1, spec.argv.end());
  std::vector<char*> shell_argv = CStrings(shell_args);
  std::vector<char*> envp = CStrings(spec.env);
  const char* workdir = spec.workdir.empty() ? nullptr : spec.workdir.c_str();
  const pid_t agent_pid = ::getpid();

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return Error(std::string("cannot start the program: pipe: ") + std::strerror(errno));
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return Error(std::string("cannot start the program: fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    ::close(pipe_fds[0]);
    ExecChild(pipe_fds[1], agent_pid, workdir, candidate_ptrs, argv.data(), shell_argv.data(),
              envp.data());
  }
  ::close(pipe_fds[1]);
  // Also from the parent, so that the group exists as soon as fork returns:
  // a signal sent before the child ran setpgid must not miss it. EACCES once
  // the child has exec'd is expected and harmless.
  ::setpgid(pid, pid);

  // Blocks until exec succeeds (close-on-exec closes the pipe: EOF) or the
  // child reports why it failed.
  LaunchFailure failure;
  ssize_t n;
  do {
    n = ::read(pipe_fds[0], &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  ::close(pipe_fds[0]);

  std::optional<std::string> launch_cause;
  int code = 0;
  if (n == sizeof(failure)) {
    code = LaunchFailureExitCode(failure.error);
    if (failure.stage == LaunchFailure::kChdir) {
      launch_cause = "cannot change to the working directory '" + spec.workdir +
                     "': " + std::strerror(failure.error);
    } else {
      launch_cause = "cannot run '" + spec.argv[0] + "': " + std::strerror(failure.error);
      if (spec.argv[0].find('/') == std::string::npos) launch_cause->append(" (PATH=" + path + ")");
    }
  }
  return ChildProcess(pid, std::move(launch_cause), code);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_),
      launch_error_(std::move(other.launch_error_)),
      launch_cause_(std::move(other.launch_cause_)),
      status_(std::move(other.status_)) {
  other.pid_ = -1;
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  pid_ = other.pid_;
  launch_error_ = std::move(other.launch_error_);
  launch_cause_ = std::move(other.launch_cause_);
  status_ = std::move(other.status_);
  other.pid_ = -1;
  return *this;
}

Status ChildProcess::Signal(int sig) {
  if (pid_ <= 0 || status_) return Status();
  if (::kill(-pid_, sig) == 0) return Status();
  // The group may be gone while the child is a zombie not yet reaped, or the
  // program moved itself to another group: signal the process itself.
  if (::kill(pid_, sig) == 0 || errno == ESRCH) return Status();
  return Error("kill(" + std::to_string(pid_) + ", " + std::to_string(sig) +
               "): " + std::strerror(errno));
}

std::optional<ExitStatus> ChildProcess::TryWait() {
  if (status_) return status_;
  if (pid_ <= 0) return std::nullopt;
  int wait_status = 0;
  pid_t r = ::waitpid(pid_, &wait_status, WNOHANG);
  if (r == pid_) status_ = DecodeWaitStatus(wait_status);
  return status_;
}

ExitStatus ChildProcess::Wait() {
  while (!status_) {
    int wait_status = 0;
    pid_t r = ::waitpid(pid_, &wait_status, 0);
    if (r == pid_) {
      status_ = DecodeWaitStatus(wait_status);
    } else if (r < 0 && errno != EINTR) {
      status_ = ExitStatus{.exit_code = 127};  // not our child: a broken invariant
    }
  }
  return *status_;
}

void ChildProcess::KillLeftovers() {
  // Only after the leader was reaped. Its pid cannot be reused while the
  // group still has members, so this cannot hit an unrelated group.
  if (status_ && pid_ > 0) ::kill(-pid_, SIGKILL);
}

}  // namespace tfslurm::agent
