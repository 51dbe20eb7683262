#include "service/system/thread_identity.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

namespace tfslurm::system {
namespace {

// The raw system calls, this thread only (see the header).
int ThreadSetGroups(const std::vector<gid_t>& groups) {
  return static_cast<int>(syscall(SYS_setgroups, groups.size(), groups.data()));
}
int ThreadSetEgid(gid_t gid) {
  return static_cast<int>(
      syscall(SYS_setresgid, static_cast<gid_t>(-1), gid, static_cast<gid_t>(-1)));
}
int ThreadSetEuid(uid_t uid) {
  return static_cast<int>(
      syscall(SYS_setresuid, static_cast<uid_t>(-1), uid, static_cast<uid_t>(-1)));
}

}  // namespace

ScopedThreadIdentity::ScopedThreadIdentity(uid_t uid, gid_t gid, const std::vector<gid_t>& groups)
    : saved_euid_(geteuid()), saved_egid_(getegid()) {
  int n = getgroups(0, nullptr);
  saved_groups_.resize(n > 0 ? n : 0);
  if (n > 0 && getgroups(n, saved_groups_.data()) < 0) saved_groups_.clear();
  // Groups and gid first: once the effective uid is the user's, the thread
  // has no CAP_SETGID left to change them.
  if (ThreadSetGroups(groups) != 0) {
    error_ = std::string("setgroups: ") + strerror(errno);
    return;
  }
  switched_ = 1;
  if (ThreadSetEgid(gid) != 0) {
    error_ = std::string("setresgid(") + std::to_string(gid) + "): " + strerror(errno);
    Restore();
    return;
  }
  switched_ = 2;
  // The real and saved uids stay tfslurmd's, which is what lets Restore
  // take the effective uid back.
  if (ThreadSetEuid(uid) != 0) {
    error_ = std::string("setresuid(") + std::to_string(uid) + "): " + strerror(errno);
    Restore();
    return;
  }
  switched_ = 3;
}

ScopedThreadIdentity::~ScopedThreadIdentity() { Restore(); }

void ScopedThreadIdentity::Restore() {
  bool failed = (switched_ >= 3 && ThreadSetEuid(saved_euid_) != 0) ||
                (switched_ >= 2 && ThreadSetEgid(saved_egid_) != 0) ||
                (switched_ >= 1 && ThreadSetGroups(saved_groups_) != 0);
  if (failed) {
    spdlog::critical("cannot take back tfslurmd's identity on a thread: {}; stopping",
                     strerror(errno));
    std::abort();
  }
  switched_ = 0;
}

}  // namespace tfslurm::system
