// FNV-1a, 64 bits, as 16 lowercase hex digits: a short name derived from
// text, the same in every build of the agent (std::hash need not be). A
// name, not a secret (the agent links no OpenSSL).
//
// Thread safety: a pure function.
#ifndef TFSLURM_AGENT_FNV1A_H_
#define TFSLURM_AGENT_FNV1A_H_

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace tfslurm::agent {

inline std::string Fnv1a64Hex(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, hash);
  return hex;
}

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_FNV1A_H_
