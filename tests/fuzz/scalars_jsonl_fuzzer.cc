// libFuzzer target. A JSON-lines scalars file's bytes, line by line
// (ParseScalarsLine) and written as a sequence of appends followed by
// ScalarWatch. Invariants: scalar_invariants.h. Runs on a small stack: see
// small_stack.h.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "tests/fuzz/scalar_invariants.h"
#include "tests/fuzz/small_stack.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::string violation =
      tfslurm::fuzz::RunOnSmallStack(tfslurm::fuzz::CheckScalarsJsonlInput, bytes);
  if (!violation.empty()) {
    std::fprintf(stderr, "INVARIANT VIOLATED: %s\n", violation.c_str());
    std::abort();
  }
  return 0;
}
