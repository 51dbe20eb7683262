#include "agent/signals.h"

#include <pthread.h>
#include <sys/signalfd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace tfslurm::agent {
namespace {

sigset_t AgentSignalSet() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kForwardedSignals) sigaddset(&set, sig);
  sigaddset(&set, SIGCHLD);
  return set;
}

}  // namespace

void BlockAgentSignals() {
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &action, nullptr);
  action.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &action, nullptr);
  sigset_t set = AgentSignalSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

StatusOr<int> OpenSignalFd() {
  sigset_t set = AgentSignalSet();
  int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) return Error(std::string("signalfd: ") + std::strerror(errno));
  return fd;
}

}  // namespace tfslurm::agent
