// SHA-256 as lowercase hex: attempt secrets and API tokens are kept only as
// their hash. Pure computation (OpenSSL's EVP digest).
//
// Thread safety: a pure function.
#pragma once

#include <string>

namespace tfslurm {

std::string Sha256Hex(const std::string& data);
// `n` bytes as lowercase hex.
std::string HexBytes(const unsigned char* data, size_t n);

}  // namespace tfslurm
