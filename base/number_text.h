// A double as text with `digits` significant digits, as printf's %.Ng writes
// it ("0.001", "1e-05", "3"), through std::to_chars: no locale, no stdio.
//
// Thread safety: a pure function.
#pragma once

#include <charconv>
#include <string>

namespace tfslurm {

inline std::string SignificantDigits(double v, int digits) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, digits);
  return ec == std::errc() ? std::string(buf, end) : std::string();
}

}  // namespace tfslurm
