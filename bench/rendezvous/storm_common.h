// What the load generators share: the server as a child process driven on
// its stdin (storm.cc: the first rendezvous; in_place_storm.cc: the
// rendezvous of an attempt restarted in place, both against
// bench_rendezvous_server), what /proc says about a process, and
// nearest-rank percentiles (tcpstore_storm.cc too); and, with the floor
// (grpc_floor.cc), the writer of a ConnectNode stream's frames
// (schema/frame_batcher.h, as the relay and tfslurmd write them).
//
// Thread safety: ServerProcess belongs to the thread that drives it;
// FrameBatcher needs its owner's lock held; the free functions are safe from
// any thread.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "schema/frame_batcher.h"

namespace bench {

using tfslurm::wire::FrameBatcher;

using Clock = std::chrono::steady_clock;

inline double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Nearest-rank percentile of `v` (p in 0..100).
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

inline std::vector<int> ParseSizes(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

struct ProcStatus {
  long threads = 0, vm_rss_kb = 0, rss_anon_kb = 0, vm_hwm_kb = 0;
};

inline ProcStatus ReadProcStatus(pid_t pid) {
  ProcStatus s;
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("Threads:", 0) == 0)
      s.threads = std::atol(line.c_str() + 8);
    else if (line.rfind("VmRSS:", 0) == 0)
      s.vm_rss_kb = std::atol(line.c_str() + 6);
    else if (line.rfind("RssAnon:", 0) == 0)
      s.rss_anon_kb = std::atol(line.c_str() + 8);
    else if (line.rfind("VmHWM:", 0) == 0)
      s.vm_hwm_kb = std::atol(line.c_str() + 6);
  }
  return s;
}

// utime + stime of `pid`, in milliseconds.
inline double CpuMs(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), {});
  auto close = stat.rfind(')');
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return (utime + stime) * 1000.0 / sysconf(_SC_CLK_TCK);
}

// This process's own CPU time, in milliseconds.
inline double SelfCpuMs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

// A server (bench_rendezvous_server or the floor) as a child process: its
// stdin takes commands, its stdout answers one line each. Its first line is
// "ready agent_port=P ..." with what else it says of itself.
class ServerProcess {
 public:
  ServerProcess(const std::string& binary, const std::string& dir,
                const std::vector<std::string>& extra) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) Die("pipe");
    pid_ = fork();
    if (pid_ < 0) Die("fork");
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      std::vector<std::string> args = {binary, "--dir", dir};
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      perror(binary.c_str());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = fdopen(in[1], "w");
    from_ = fdopen(out[0], "r");
    // Skip what a wrapper (heaptrack, perf) may print first.
    for (int i = 0; i < 20 && ready_.rfind("ready ", 0) != 0; ++i) ready_ = ReadLine();
    if (sscanf(ready_.c_str(), "ready agent_port=%d", &agent_port_) != 1)
      Die("server did not start: " + ready_);
  }
  ~ServerProcess() { Quit(); }
  // Tells the server to quit and waits for it: its exit status (0 when it
  // exited normally with 0; a killed server gives 128 + the signal). Later
  // calls give the same.
  int Quit() {
    if (pid_ < 0) return exit_status_;
    Command("quit", /*answer=*/false);
    fclose(to_);
    int status = 0;
    waitpid(pid_, &status, 0);
    fclose(from_);
    pid_ = -1;
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_status_;
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  std::string Command(const std::string& line, bool answer = true) {
    fprintf(to_, "%s\n", line.c_str());
    fflush(to_);
    return answer ? ReadLine() : "";
  }
  pid_t pid() const { return pid_; }
  int agent_port() const { return agent_port_; }
  // A number the ready line gives as "name=N"; -1 when it does not.
  long long ReadyValue(const std::string& name) const {
    auto at = ready_.find(" " + name + "=");
    if (at == std::string::npos) return -1;
    return std::atoll(ready_.c_str() + at + name.size() + 2);
  }

  [[noreturn]] static void Die(const std::string& why) {
    fprintf(stderr, "%s: %s\n", program_invocation_short_name, why.c_str());
    exit(1);
  }

 private:
  std::string ReadLine() {
    char buf[4096];
    if (!fgets(buf, sizeof buf, from_)) Die("the server exited");
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }

  pid_t pid_ = -1;
  int exit_status_ = 0;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  int agent_port_ = 0;
  std::string ready_;
};

// Lets every agent's connection and stream have a descriptor, and keeps a
// closed stream's write from killing the load generator.
inline void RaiseFileLimitAndIgnoreSigpipe() {
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace bench
