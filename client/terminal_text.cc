#include "client/terminal_text.h"

#include <cstdint>
#include <cstdio>

#include "base/unsafe_text.h"

namespace tfslurm::client {
namespace {

bool IsEscapedCodePoint(uint32_t c) { return IsUnsafeCodePoint(c); }

void AppendHex(std::string& out, const char* format, uint32_t value) {
  char buf[16];
  std::snprintf(buf, sizeof buf, format, static_cast<unsigned>(value));
  out += buf;
}

// Escapes text into out; returns how many bytes at the end were held
// back because the next piece of a stream may complete them.
size_t Escape(std::string_view text, LineBreaks line_breaks, bool more_follows, std::string& out) {
  bool keep = line_breaks == LineBreaks::kKeep;
  size_t i = 0;
  while (i < text.size()) {
    auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x20 || b == 0x7F) {
      if (keep && (b == '\n' || b == '\t')) {
        out += static_cast<char>(b);
      } else if (keep && b == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
        out += '\r';  // a CR LF line end moves nothing a reader would miss
      } else if (keep && b == '\r' && i + 1 == text.size() && more_follows) {
        return 1;
      } else if (b == '\n') {
        out += "\\n";
      } else if (b == '\t') {
        out += "\\t";
      } else if (b == '\r') {
        out += "\\r";
      } else {
        AppendHex(out, "\\x%02x", b);
      }
      ++i;
      continue;
    }
    uint32_t c = 0;
    bool truncated = false;
    size_t length = DecodeUtf8(text, i, c, truncated);
    if (length == 0) {
      if (truncated && more_follows) return text.size() - i;
      AppendHex(out, "\\x%02x", b);
      ++i;
      continue;
    }
    if (IsEscapedCodePoint(c))
      AppendHex(out, c > 0xFFFF ? "\\U%08x" : "\\u%04x", c);
    else
      out.append(text.substr(i, length));
    i += length;
  }
  return 0;
}

}  // namespace

std::string EscapeForTerminal(std::string_view text, LineBreaks line_breaks) {
  std::string out;
  out.reserve(text.size());
  Escape(text, line_breaks, /*more_follows=*/false, out);
  return out;
}

std::string EscapeInStructured(std::string_view document) {
  std::string out;
  out.reserve(document.size());
  size_t i = 0;
  while (i < document.size()) {
    auto b = static_cast<unsigned char>(document[i]);
    uint32_t c = 0;
    bool truncated = false;
    size_t length = b == 0x7F ? 0 : DecodeUtf8(document, i, c, truncated);
    if (b == 0x7F) {
      out += "\\u007f";
      ++i;
    } else if (length == 0) {
      // Not UTF-8: the serializers replace such bytes, so this is only a
      // guard; \ufffd keeps the document valid.
      out += "\\ufffd";
      ++i;
    } else if (c >= 0x80 && IsEscapedCodePoint(c)) {
      // C0 controls are left to the serializer, which escapes them inside
      // strings; outside strings they are the document's own line breaks.
      // Beyond U+FFFF (the tag characters): a UTF-16 surrogate pair, as JSON
      // spells it.
      if (c > 0xFFFF) {
        AppendHex(out, "\\u%04x", 0xD800 + ((c - 0x10000) >> 10));
        AppendHex(out, "\\u%04x", 0xDC00 + ((c - 0x10000) & 0x3FF));
      } else {
        AppendHex(out, "\\u%04x", c);
      }
      i += length;
    } else {
      out.append(document.substr(i, length));
      i += length;
    }
  }
  return out;
}

std::string TerminalEscaper::Feed(std::string_view piece) {
  pending_.append(piece);
  std::string out;
  size_t held = Escape(pending_, line_breaks_, /*more_follows=*/true, out);
  pending_.erase(0, pending_.size() - held);
  return out;
}

std::string TerminalEscaper::Finish() {
  std::string out;
  Escape(pending_, line_breaks_, /*more_follows=*/false, out);
  pending_.clear();
  return out;
}

std::string PrefixedLines::Feed(std::string_view piece) {
  constexpr size_t kMaxLine = 64 * 1024;
  pending_ += piece;
  std::string out;
  size_t start = 0;
  for (;;) {
    size_t end = pending_.find('\n', start);
    if (end == std::string::npos) {
      if (pending_.size() - start < kMaxLine) break;
      end = start + kMaxLine - 1;  // a part of an overlong line, as a line
      out += prefix_ + pending_.substr(start, end + 1 - start) + "\n";
    } else {
      out += prefix_ + pending_.substr(start, end + 1 - start);
    }
    start = end + 1;
  }
  pending_.erase(0, start);
  return out;
}

std::string PrefixedLines::Finish() {
  if (pending_.empty()) return "";
  std::string out = prefix_ + pending_ + "\n";
  pending_.clear();
  return out;
}

}  // namespace tfslurm::client
