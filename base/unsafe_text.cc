#include "base/unsafe_text.h"

#include <cstdio>

namespace tfslurm {

size_t DecodeUtf8(std::string_view text, size_t i, uint32_t& code_point, bool& truncated) {
  truncated = false;
  auto b = static_cast<unsigned char>(text[i]);
  size_t length;
  uint32_t c;
  if (b < 0x80) {
    code_point = b;
    return 1;
  } else if (b >= 0xC2 && b <= 0xDF) {
    length = 2;
    c = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    length = 3;
    c = b & 0x0F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    length = 4;
    c = b & 0x07;
  } else {
    return 0;
  }
  for (size_t k = 1; k < length; ++k) {
    if (i + k >= text.size()) {
      truncated = true;
      return 0;
    }
    auto next = static_cast<unsigned char>(text[i + k]);
    if ((next & 0xC0) != 0x80) return 0;
    c = (c << 6) | (next & 0x3F);
  }
  if ((length == 3 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) ||
      (length == 4 && (c < 0x10000 || c > 0x10FFFF)))
    return 0;
  code_point = c;
  return length;
}

bool IsControlCharacter(uint32_t c) { return c < 0x20 || (c >= 0x7F && c <= 0x9F); }

bool IsBidiControl(uint32_t c) {
  return c == 0x061C || c == 0x200E || c == 0x200F || (c >= 0x202A && c <= 0x202E) ||
         (c >= 0x2066 && c <= 0x2069);
}

bool IsInvisibleOrLineSeparator(uint32_t c) {
  return c == 0x00AD || c == 0x034F || c == 0x115F || c == 0x1160 || c == 0x17B4 || c == 0x17B5 ||
         (c >= 0x180B && c <= 0x180F) || (c >= 0x200B && c <= 0x200D) || c == 0x2028 ||
         c == 0x2029 || (c >= 0x2060 && c <= 0x2064) || (c >= 0x206A && c <= 0x206F) ||
         c == 0x3164 || c == 0xFEFF || c == 0xFFA0 || (c >= 0xFFF9 && c <= 0xFFFB) ||
         (c >= 0x1BCA0 && c <= 0x1BCA3) || (c >= 0xE0000 && c <= 0xE007F);
}

bool IsUnsafeCodePoint(uint32_t c) {
  return IsControlCharacter(c) || IsBidiControl(c) || IsInvisibleOrLineSeparator(c);
}

std::optional<size_t> FirstInvalidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    uint32_t c = 0;
    bool truncated = false;
    const size_t length = DecodeUtf8(text, i, c, truncated);
    if (length == 0) return i;
    i += length;
  }
  return std::nullopt;
}

std::string EscapeInvalidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t c = 0;
    bool truncated = false;
    size_t length = DecodeUtf8(text, i, c, truncated);
    if (length == 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x",
                    static_cast<unsigned>(static_cast<unsigned char>(text[i])));
      out += buf;
      ++i;
      continue;
    }
    out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

std::optional<std::string> UnsafeCharacter(std::string_view text) {
  char buf[96];
  for (size_t i = 0; i < text.size();) {
    uint32_t c = 0;
    bool truncated = false;
    size_t length = DecodeUtf8(text, i, c, truncated);
    if (length == 0) {
      std::snprintf(buf, sizeof buf, "a byte that is not UTF-8 (0x%02X) at byte %zu",
                    static_cast<unsigned>(static_cast<unsigned char>(text[i])), i);
      return buf;
    }
    if (IsUnsafeCodePoint(c)) {
      std::snprintf(buf, sizeof buf, "U+%04X, a %s, at byte %zu", static_cast<unsigned>(c),
                    IsBidiControl(c)             ? "bidi control"
                    : IsControlCharacter(c)      ? "control character"
                    : c == 0x2028 || c == 0x2029 ? "line separator"
                                                 : "character that shows nothing",
                    i);
      return buf;
    }
    i += length;
  }
  return std::nullopt;
}

}  // namespace tfslurm
