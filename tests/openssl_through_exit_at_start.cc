// Linked into every test program (tests/CMakeLists.txt): what the first line
// of tfslurmd's, the agent's and tfctl's main does, for programs whose main
// is gtest's or libFuzzer's. A static initializer, so it runs before any
// test touches OpenSSL (tls/openssl_through_exit.h says why).
#include "tls/openssl_through_exit.h"

namespace {

const bool kOpenSslKeptThroughExit = [] {
  tfslurm::tls::KeepOpenSslThroughExit();
  return true;
}();

}  // namespace
