// libFuzzer target. Agent messages as JSON (the body of POST /agent/v1/message) -> AgentMessage ->
// core's structs, and core's replies -> ServiceMessage. Invariants: invariants.h.
#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "tests/fuzz/invariants.h"

// Protobuf logs every malformed input to stderr; that is not news here.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::string violation = tfslurm::fuzz::CheckAgentJsonInput(bytes);
  if (!violation.empty()) {
    std::fprintf(stderr, "INVARIANT VIOLATED: %s\n", violation.c_str());
    std::abort();
  }
  return 0;
}
