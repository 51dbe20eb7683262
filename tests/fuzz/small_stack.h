// Runs a check on a thread with a small stack. tfslurmd parses request
// bodies of up to 1 MB on threads with 8 MB stacks, so recursion that grows
// with the input (json::dump of nested arrays, std::regex over a long
// string) overflows there only for inputs far larger than a fuzzer tries.
// The same ratio, stack to input size, on a small stack makes such recursion
// crash on the inputs the fuzzer does try.
#pragma once

#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace tfslurm::fuzz {

constexpr size_t kFuzzStackBytes = 256 * 1024;

inline std::string RunOnSmallStack(std::string (*check)(std::string_view), std::string_view bytes) {
  struct Call {
    std::string (*check)(std::string_view);
    std::string_view bytes;
    std::string result;
  } call{check, bytes, {}};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kFuzzStackBytes);
  pthread_t thread;
  auto body = [](void* p) -> void* {
    auto* c = static_cast<Call*>(p);
    c->result = c->check(c->bytes);
    return nullptr;
  };
  if (pthread_create(&thread, &attr, body, &call) != 0) {
    std::perror("pthread_create");
    std::abort();
  }
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  return call.result;
}

}  // namespace tfslurm::fuzz
