// libFuzzer target. A TensorBoard event file's bytes, written as a sequence
// of appends and followed by ScalarWatch: TFRecord framing (ReadRecord) and
// Event decoding (DecodeEventScalars). Invariants: scalar_invariants.h.
#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "tests/fuzz/scalar_invariants.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::string violation = tfslurm::fuzz::CheckEventFileInput(bytes);
  if (!violation.empty()) {
    std::fprintf(stderr, "INVARIANT VIOLATED: %s\n", violation.c_str());
    std::abort();
  }
  return 0;
}
