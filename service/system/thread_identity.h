// ScopedThreadIdentity: the calling thread acts as another Unix account
// (effective uid and gid, and groups) until the object is destroyed. Site
// mode creates an owner's directories and reads their checkpoint state this
// way, so the kernel checks the owner's permissions, not root's: a symlink
// or hard link the owner planted reaches only what the owner could read.
//
// Linux keeps credentials per thread; glibc's setresuid(), setresgid() and
// setgroups() apply a change to every thread of the process (nptl's
// __nptl_setxid broadcast), so this calls the system calls directly, which
// change the caller's thread only. Samba's per-thread credentials
// (lib/util/setid.c, USE_LINUX_THREAD_CREDENTIALS) are the same technique.
// Needs CAP_SETUID and CAP_SETGID (root has both).
//
// Thread safety: affects the calling thread only; create and destroy it on
// the same thread, and do nothing on that thread meanwhile that should run
// as tfslurmd.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace tfslurm::system {

class ScopedThreadIdentity {
 public:
  ScopedThreadIdentity(uid_t uid, gid_t gid, const std::vector<gid_t>& groups);
  // Back to tfslurmd's own identity; aborts the process if the kernel
  // refuses, since the thread would go on serving as the user.
  ~ScopedThreadIdentity();
  ScopedThreadIdentity(const ScopedThreadIdentity&) = delete;
  ScopedThreadIdentity& operator=(const ScopedThreadIdentity&) = delete;

  // False when the switch was refused (no CAP_SETUID/CAP_SETGID); the thread
  // is then unchanged, and error() says why.
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  void Restore();
  uid_t saved_euid_;
  gid_t saved_egid_;
  std::vector<gid_t> saved_groups_;
  int switched_ = 0;  // how many of groups, gid, uid were changed
  std::string error_;
};

}  // namespace tfslurm::system
