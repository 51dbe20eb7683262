#include "service/api/json_writer.h"

#include <charconv>
#include <cmath>

namespace tfslurm::api {

namespace {

// How many bytes at s[i] form a UTF-8 sequence, or the start of one
// (overlong forms, surrogates and code points above U+10FFFF are not);
// `complete` says whether the sequence is whole. An invalid lead byte is a
// prefix of 1. nlohmann replaces each such maximal prefix with one U+FFFD.
size_t Utf8Prefix(std::string_view s, size_t i, bool* complete) {
  unsigned char b = static_cast<unsigned char>(s[i]);
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;  // overlong below
    if (b == 0xED) hi = 0x9F;  // UTF-16 surrogates above
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;  // overlong below
    if (b == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    *complete = false;
    return 1;
  }
  size_t n = 1;
  for (; n <= need && i + n < s.size(); ++n) {
    unsigned char c = static_cast<unsigned char>(s[i + n]);
    if (n == 1 ? (c < lo || c > hi) : (c & 0xC0) != 0x80) break;
  }
  *complete = n == need + 1;
  return n;
}

}  // namespace

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_member_.empty()) {
    if (has_member_.back()) out_ += ',';
    has_member_.back() = true;
  }
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_ += '{';
  has_member_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  out_ += '}';
  has_member_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_ += '[';
  has_member_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  out_ += ']';
  has_member_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  String(key);
  out_ += ':';
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view value) {
  BeforeValue();
  out_ += '"';
  for (size_t i = 0; i < value.size();) {
    // Runs of printable ASCII, most of every answer, are copied at once.
    size_t run = i;
    while (run < value.size()) {
      unsigned char c = static_cast<unsigned char>(value[run]);
      if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') break;
      ++run;
    }
    out_.append(value, i, run - i);
    i = run;
    if (i == value.size()) break;
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (c >= 0x80) {
      bool complete = false;
      size_t n = Utf8Prefix(value, i, &complete);
      if (complete)
        out_.append(value, i, n);
      else
        out_ += "\xEF\xBF\xBD";  // U+FFFD
      i += n;
      continue;
    }
    switch (c) {
      case '"':
        out_ += "\\\"";
        break;
      case '\\':
        out_ += "\\\\";
        break;
      case '\n':
        out_ += "\\n";
        break;
      case '\r':
        out_ += "\\r";
        break;
      case '\t':
        out_ += "\\t";
        break;
      default:
        if (c < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out_ += "\\u00";
          out_ += kHex[c >> 4];
          out_ += kHex[c & 0xF];
        } else {
          out_ += static_cast<char>(c);
        }
    }
    ++i;
  }
  out_ += '"';
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  BeforeValue();
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  out_.append(buf, end);
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  if (!std::isfinite(value)) return Null();  // JSON has no NaN or infinity
  BeforeValue();
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  out_.append(buf, end);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::Raw(std::string_view json) {
  BeforeValue();
  out_ += json;
  return *this;
}

std::string JsonWriter::Take() {
  has_member_.clear();
  after_key_ = false;
  return std::move(out_);
}

}  // namespace tfslurm::api
