// The REST port's gate reading a stranger's request head: header floods,
// chunked bodies, lengths (http_invariants.h).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/fuzz/http_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string violation = tfslurm::fuzz::CheckRequestHeadInput(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!violation.empty()) {
    std::fprintf(stderr, "request_head: %s\n", violation.c_str());
    std::abort();
  }
  return 0;
}
