// httplib's request parser and router as tfslurmd configures it, fed from
// memory: chunked bodies, header floods, bad framing (http_invariants.h).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/fuzz/http_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string violation = tfslurm::fuzz::CheckHttpRequestInput(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!violation.empty()) {
    std::fprintf(stderr, "http_request: %s\n", violation.c_str());
    std::abort();
  }
  return 0;
}
