// TFSLURM_HAPPENS_BEFORE(addr) / TFSLURM_HAPPENS_AFTER(addr): tell
// ThreadSanitizer of an ordering that a library guarantees but TSan cannot
// see, because the library is not built with TSan (Debian's gRPC, whose
// threads hand our reactors from one to the next through its own
// uninstrumented locks). Everything a thread did before HAPPENS_BEFORE(a)
// happens before what a thread does after a later HAPPENS_AFTER(a).
//
// Name only orderings the library documents, at the call that starts an
// operation (BEFORE) and at the start of its completion (AFTER): a wider
// claim hides real races, which is what the suppressions these replace did
// (tests/concurrency/tsan_suppressions.txt says more).
//
// Outside a TSan build both are nothing.
//
// Thread safety: any thread.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define TFSLURM_TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TFSLURM_TSAN_BUILD 1
#endif
#endif

#ifdef TFSLURM_TSAN_BUILD
#include <sanitizer/tsan_interface.h>
#define TFSLURM_HAPPENS_BEFORE(addr) \
  __tsan_release(const_cast<void*>(static_cast<const void*>(addr)))
#define TFSLURM_HAPPENS_AFTER(addr) \
  __tsan_acquire(const_cast<void*>(static_cast<const void*>(addr)))
#else
#define TFSLURM_HAPPENS_BEFORE(addr) static_cast<void>(addr)
#define TFSLURM_HAPPENS_AFTER(addr) static_cast<void>(addr)
#endif

namespace tfslurm {

// A gRPC reaction's scope, for TSan: the reaction runs after the operation
// that started it (the address that operation named with HAPPENS_BEFORE
// when it started; null: none to name) and before its reactor's OnDone,
// which begins with HAPPENS_AFTER(done).
class ReactionScope {
 public:
  ReactionScope(const void* operation, const void* done) : done_(done) {
    if (operation) TFSLURM_HAPPENS_AFTER(operation);
  }
  ~ReactionScope() { TFSLURM_HAPPENS_BEFORE(done_); }
  ReactionScope(const ReactionScope&) = delete;
  ReactionScope& operator=(const ReactionScope&) = delete;

 private:
  const void* done_;
};

}  // namespace tfslurm
