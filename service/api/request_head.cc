#include "service/api/request_head.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace tfslurm::api {
namespace {

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

HeadScan Refused(int status, std::string message) {
  HeadScan scan;
  scan.kind = HeadScan::Kind::kRefused;
  scan.status = status;
  scan.message = std::move(message);
  return scan;
}

HeadScan TooLarge(const HeadLimits& limits) {
  return Refused(431, "the request's header fields are larger than " +
                          std::to_string(limits.max_header_bytes) + " bytes");
}

// A Content-Length value: digits only, at most 18 of them.
std::optional<uint64_t> ContentLength(std::string_view value) {
  if (value.empty() || value.size() > 18) return std::nullopt;
  uint64_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

// What one header field line says that the gate needs.
struct Fields {
  std::optional<uint64_t> content_length;
  bool bad_content_length = false;
  bool transfer_encoding = false;
  bool expects_continue = false;
  size_t expect_begin = 0, expect_end = 0;
};

void ReadField(std::string_view line, size_t begin, size_t end, Fields& f) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return;  // httplib refuses it (400)
  const std::string_view name = line.substr(0, colon);
  const std::string_view value = Trimmed(line.substr(colon + 1));
  if (EqualsIgnoringCase(name, "Content-Length")) {
    auto n = ContentLength(value);
    // Two that disagree are a smuggling attempt (RFC 9110 8.6).
    if (!n || (f.content_length && *f.content_length != *n)) f.bad_content_length = true;
    f.content_length = n;
  } else if (EqualsIgnoringCase(name, "Transfer-Encoding")) {
    f.transfer_encoding = true;
  } else if (EqualsIgnoringCase(name, "Expect") && EqualsIgnoringCase(value, "100-continue")) {
    f.expects_continue = true;
    f.expect_begin = begin;
    f.expect_end = end;
  }
}

}  // namespace

HeadScan ScanRequestHead(std::string_view received, const HeadLimits& limits) {
  Fields fields;
  size_t field_count = 0;
  size_t line_begin = 0;
  for (;;) {
    const size_t newline = received.find('\n', line_begin);
    if (newline == std::string_view::npos) {
      // Not ended yet: refused as soon as it cannot end within the limit.
      if (received.size() > limits.max_header_bytes) return TooLarge(limits);
      return HeadScan{};
    }
    const size_t line_end = newline + 1;
    if (line_end > limits.max_header_bytes) return TooLarge(limits);
    std::string_view line = received.substr(line_begin, newline - line_begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() && line_begin > 0) {  // the blank line after the fields
      if (fields.bad_content_length)
        return Refused(400, "the request's Content-Length is not one number");
      if (fields.transfer_encoding)
        return Refused(411,
                       "a request body needs a Content-Length; Transfer-Encoding (chunked) "
                       "is not accepted");
      const uint64_t body = fields.content_length.value_or(0);
      if (body > limits.max_body_bytes)
        return Refused(413, "the request body is " + std::to_string(body) +
                                " bytes, more than the limit of " +
                                std::to_string(limits.max_body_bytes));
      HeadScan scan;
      scan.kind = HeadScan::Kind::kComplete;
      scan.head_bytes = line_end;
      scan.body_bytes = static_cast<size_t>(body);
      scan.expects_continue = fields.expects_continue;
      scan.expect_line_begin = fields.expect_begin;
      scan.expect_line_end = fields.expect_end;
      return scan;
    }
    if (line_begin > 0) {  // a field line; the first is the request line
      if (++field_count > limits.max_header_fields)
        return Refused(431, "the request has more than " +
                                std::to_string(limits.max_header_fields) + " header fields");
      ReadField(line, line_begin, line_end, fields);
    }
    line_begin = line_end;
  }
}

}  // namespace tfslurm::api
