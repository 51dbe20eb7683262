// What the REST port's gate (request_gate.h) reads of a request before any
// thread serves it: whether its request line and header fields have all
// arrived, within the limits, and how long a body follows. A pure scan of
// the bytes received so far, made again as more arrive.
//
// The limits hold before anything else looks at the request (httplib, the
// routes, authentication): header fields of at most `max_header_bytes` in
// all and at most `max_header_fields` of them (431); a body only with a
// Content-Length (Transfer-Encoding, chunked or not, is refused with 411, so
// that no body of unknown length is ever read), of at most `max_body_bytes`
// (413).
//
// Thread safety: a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tfslurm::api {

struct HeadLimits {
  size_t max_header_bytes = 32 * 1024;  // the request line and every field
  size_t max_header_fields = 64;
  size_t max_body_bytes = 1 << 20;
};

struct HeadScan {
  enum class Kind {
    kIncomplete,  // the header block has not ended yet, and may still
    kComplete,    // head_bytes of head, then body_bytes of body
    kRefused,     // answer `status` with `message` and close
  };
  Kind kind = Kind::kIncomplete;
  size_t head_bytes = 0;  // through the blank line that ends the fields
  size_t body_bytes = 0;  // Content-Length
  // Expect: 100-continue, and where its line is (to answer it and drop it).
  bool expects_continue = false;
  size_t expect_line_begin = 0;
  size_t expect_line_end = 0;
  int status = 0;  // 411, 413, 431 or 400
  std::string message;
};

// Scans `received`, the first bytes of a connection.
HeadScan ScanRequestHead(std::string_view received, const HeadLimits& limits);

}  // namespace tfslurm::api
