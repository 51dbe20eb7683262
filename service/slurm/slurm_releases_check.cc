// CheckSlurmReleases (libslurm_client.h): this libslurm's release against
// slurmctld's, learned through libslurm or else through the site's scontrol.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "service/slurm/libslurm_client.h"
#include "service/slurm/release_window.h"

extern char** environ;

namespace tfslurm::slurm {
namespace {

constexpr int kScontrolTimeoutMs = 15000;

// The full path of the first `name` on PATH, or "".
std::string OnPath(const std::string& name) {
  const char* path = getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Runs `argv` (no shell) with stdout captured and stderr discarded, for at
// most kScontrolTimeoutMs; the process is killed past it.
StatusOr<std::string> RunCapturingStdout(const std::vector<std::string>& argv) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Unavailable(std::string("pipe: ") + strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    return Unavailable("cannot run " + argv[0] + ": " + strerror(rc));
  }
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kScontrolTimeoutMs);
  bool timed_out = false;
  char buf[4096];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out)
    return Unavailable(argv[0] + " did not finish in " + std::to_string(kScontrolTimeoutMs / 1000) +
                       " s");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Unavailable(argv[0] + " failed (exit status " + std::to_string(WEXITSTATUS(status)) +
                       ")");
  return text;
}

// slurmctld's release as `scontrol show config` prints it, from its
// "SLURM_VERSION = 26.05.3" line: the configuration slurmctld sent, whose
// version slurm_print_ctl_conf prints under that key
// (slurm_ctl_conf_2_key_pairs in src/api/config_info.c, at slurm-22-05-8-1
// and slurm-26-05-3-1 alike).
StatusOr<std::string> ReleaseFromScontrol(const std::string& scontrol) {
  auto out = RunCapturingStdout({scontrol, "show", "config"});
  if (!out.ok()) return out.status();
  std::istringstream lines(*out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("SLURM_VERSION", 0) != 0) continue;
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string value = line.substr(eq + 1);
    value.erase(0, value.find_first_not_of(' '));
    value.erase(value.find_last_not_of(" \r") + 1);
    return value;
  }
  return Unavailable(scontrol + " show config printed no SLURM_VERSION line");
}

}  // namespace

StatusOr<SlurmReleases> CheckSlurmReleases() {
  SlurmReleases both;
  both.libslurm = LibslurmRelease();
  auto asked = LoadControllerRelease();
  if (asked.ok()) {
    both.slurmctld = *asked;
    both.slurmctld_source = "slurmctld";
  } else {
    // libslurm got no answer: slurmctld is down, or of a release it cannot
    // talk to. The site's own scontrol tells which.
    std::string scontrol = OnPath("scontrol");
    auto told = scontrol.empty() ? StatusOr<std::string>(Unavailable("no scontrol on PATH"))
                                 : ReleaseFromScontrol(scontrol);
    if (!told.ok()) {
      auto lib = ParseSlurmRelease(both.libslurm);
      return Unavailable(asked.status().message() + "; " + told.status().message() +
                         ". slurmctld is down, or runs a release libslurm " + both.libslurm +
                         " cannot talk to (it talks to slurmctld " +
                         (lib ? ControllersReachableFrom(*lib) : both.libslurm) + ")");
    }
    both.slurmctld = *told;
    both.slurmctld_source = "scontrol show config (" + scontrol + ")";
  }
  auto lib = ParseSlurmRelease(both.libslurm);
  auto ctld = ParseSlurmRelease(both.slurmctld);
  if (!lib || !ctld)
    return Unavailable("cannot read the Slurm releases: libslurm '" + both.libslurm +
                       "', slurmctld '" + both.slurmctld + "' (from " + both.slurmctld_source +
                       ")");
  if (auto why = ReleaseMismatch(*lib, *ctld)) return FailedPrecondition(*why);
  if (!asked.ok())
    return Unavailable("slurmctld runs Slurm " + both.slurmctld + " (from " +
                       both.slurmctld_source + "), which libslurm " + both.libslurm +
                       " can talk to, but it did not answer: " + asked.status().message());
  return both;
}

namespace {

// What the child sends back: "ok\tLIBSLURM\tSLURMCTLD\tSOURCE" or
// "error\tCODE\tMESSAGE", tabs and newlines of the values made spaces.
std::string Flat(std::string text) {
  for (char& c : text)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return text;
}

[[noreturn]] void AnswerFromChild(int out) {
  auto both = CheckSlurmReleases();
  const std::string answer =
      both.ok() ? "ok\t" + Flat(both->libslurm) + "\t" + Flat(both->slurmctld) + "\t" +
                      Flat(both->slurmctld_source)
                : "error\t" + std::to_string(static_cast<int>(both.status().code())) + "\t" +
                      Flat(both.status().message());
  size_t done = 0;
  while (done < answer.size()) {
    ssize_t n = write(out, answer.data() + done, answer.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  _exit(0);
}

// Reads `out` and `err` to their ends (at most 60 s, then the child is killed).
void ReadBoth(int out, int err, pid_t pid, std::string& answer, std::string& said) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
  std::string* into[2] = {&answer, &said};
  int open = 2;
  char buf[4096];
  while (open > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, static_cast<int>(left)) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        if (into[i]->size() < 64 * 1024) into[i]->append(buf, static_cast<size_t>(n));
        continue;
      }
      fds[i].fd = -1;
      --open;
    }
  }
}

// libslurm's last line on stderr ("fatal: Could not establish a
// configuration source"), or "".
std::string LastLine(const std::string& text) {
  std::istringstream lines(text);
  std::string line, last;
  while (std::getline(lines, line))
    if (line.find_first_not_of(" \r") != std::string::npos) last = line;
  while (!last.empty() && last.back() == '\r') last.pop_back();
  return last.substr(0, 300);
}

}  // namespace

StatusOr<SlurmReleases> CheckSlurmReleasesInChild() {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Unavailable(std::string("pipe: ") + strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return Unavailable(std::string("pipe: ") + strerror(errno));
  }
  fflush(nullptr);  // nothing buffered is written twice
  pid_t pid = fork();
  if (pid < 0) return Unavailable(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    dup2(err[1], STDERR_FILENO);
    close(out[0]);
    close(err[0]);
    AnswerFromChild(out[1]);
  }
  close(out[1]);
  close(err[1]);
  std::string answer, said;
  ReadBoth(out[0], err[0], pid, answer, said);
  close(out[0]);
  close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  std::vector<std::string> fields;
  std::istringstream parts(answer);
  for (std::string f; std::getline(parts, f, '\t');) fields.push_back(f);
  if (fields.size() == 4 && fields[0] == "ok")
    return SlurmReleases{fields[1], fields[2], fields[3]};
  if (fields.size() == 3 && fields[0] == "error")
    return Status(static_cast<StatusCode>(std::atoi(fields[1].c_str())), fields[2]);
  const std::string words = LastLine(said);
  std::string how = WIFEXITED(status)     ? "exit status " + std::to_string(WEXITSTATUS(status))
                    : WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                          : "status " + std::to_string(status);
  if (words.find("configuration source") != std::string::npos)
    return FailedPrecondition(
        "not asked: this host has no Slurm configuration: libslurm looked for $SLURM_CONF, its "
        "default "
        "slurm.conf, /run/slurm/conf/slurm.conf (a configless slurmd's copy) and slurmctld's "
        "DNS SRV records, found none, and ended its process (" +
        how + ": \"" + words + "\"); set SLURM_CONF to the cluster's slurm.conf");
  return FailedPrecondition("not asked: libslurm ended its process before slurmctld was (" + how +
                            (words.empty() ? "" : ": \"" + words + "\"") + ")");
}

}  // namespace tfslurm::slurm
