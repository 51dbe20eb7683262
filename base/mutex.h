// Mutex and MutexLock: std::mutex with clang's thread-safety annotations, so
// that state guarded by a lock says so (ABSL_GUARDED_BY(mu_)) and a clang
// build with -Wthread-safety (tests/run.sh) checks every access.
//
// Why not absl::Mutex, which is annotated already: Debian's abseil is built
// without ThreadSanitizer, and absl::Mutex synchronizes inside that
// uninstrumented library, so the TSan suite would see races that are not
// there. libstdc++'s std::mutex carries no annotations (libc++'s does, but
// the project builds with libstdc++). The annotation macros are abseil's.
//
// Thread safety: a Mutex is the lock; MutexLock belongs to one thread.
#pragma once

#include <absl/base/thread_annotations.h>

#include <mutex>

namespace tfslurm {

class ABSL_LOCKABLE Mutex {
 public:
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope, as std::lock_guard does.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

}  // namespace tfslurm
