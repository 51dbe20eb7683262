#include "tests/fuzz/http_invariants.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>

#include "service/api/buffered_stream.h"
#include "service/api/request_head.h"

namespace tfslurm::fuzz {
namespace {

using api::HeadLimits;
using api::HeadScan;

constexpr size_t kPayloadLimit = 64 * 1024;

bool SameScan(const HeadScan& a, const HeadScan& b) {
  return a.kind == b.kind && a.head_bytes == b.head_bytes && a.body_bytes == b.body_bytes &&
         a.status == b.status;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string CheckComplete(std::string_view bytes, const HeadScan& scan, const HeadLimits& limits) {
  if (scan.head_bytes > bytes.size() || scan.head_bytes > limits.max_header_bytes)
    return "a complete head of " + std::to_string(scan.head_bytes) + " bytes";
  if (scan.body_bytes > limits.max_body_bytes) return "a body over the limit was accepted";
  const std::string_view head = bytes.substr(0, scan.head_bytes);
  if (!head.ends_with("\n\n") && !head.ends_with("\n\r\n")) return "the head ends mid-line";
  size_t lines = std::count(head.begin(), head.end(), '\n');
  if (lines < 2 || lines - 2 > limits.max_header_fields) return "too many fields accepted";
  for (size_t at = 0; (at = head.find('\n', at)) != std::string_view::npos;) {
    ++at;
    if (Lower(head.substr(at, 18)) == "transfer-encoding:") return "Transfer-Encoding accepted";
  }
  for (size_t cut : {scan.head_bytes - 1, scan.head_bytes / 2})
    if (ScanRequestHead(bytes.substr(0, cut), limits).kind != HeadScan::Kind::kIncomplete)
      return "a prefix of a complete head is not incomplete";
  if (!SameScan(ScanRequestHead(head, limits), scan)) return "the head alone scans otherwise";
  if (scan.expects_continue &&
      (scan.expect_line_end > scan.head_bytes || scan.expect_line_begin >= scan.expect_line_end))
    return "the Expect line is outside the head";
  return "";
}

// httplib's server, with its request parser reachable: process_request is
// protected, and is what the gate's threads call.
class ParserUnderTest : public httplib::Server {
 public:
  ParserUnderTest() {
    set_payload_max_length(kPayloadLimit);
    auto check = [this](const httplib::Request& req, httplib::Response& res) {
      if (req.body.size() > kPayloadLimit)
        violation = "a body over the payload limit reached a handler";
      if (req.headers.size() > 64) violation = "more than 64 header fields reached a handler";
      res.set_content("ok", "text/plain");
    };
    Get(".*", check);
    Post(".*", check);
    Put(".*", check);
    Delete(".*", check);
  }
  void Process(std::string bytes) {
    // No socket: the answer's writes fail, as to a client that went away.
    api::GateConnection no_socket;
    api::BufferedStream stream(no_socket, std::move(bytes), std::chrono::milliseconds(0),
                               std::chrono::milliseconds(0));
    bool closed = false;
    process_request(stream, "127.0.0.1", 1, "127.0.0.1", 2, true, closed, nullptr);
  }
  std::string violation;
};

}  // namespace

std::string CheckRequestHeadInput(std::string_view bytes) {
  HeadLimits limits;
  limits.max_header_bytes = 2048;
  limits.max_header_fields = 16;
  limits.max_body_bytes = 4096;
  const HeadScan scan = ScanRequestHead(bytes, limits);
  switch (scan.kind) {
    case HeadScan::Kind::kComplete:
      return CheckComplete(bytes, scan, limits);
    case HeadScan::Kind::kRefused: {
      if (scan.status != 400 && scan.status != 411 && scan.status != 413 && scan.status != 431)
        return "refused with " + std::to_string(scan.status);
      std::string more(bytes);
      more += "X-More: 1\r\n\r\n";
      if (!SameScan(ScanRequestHead(more, limits), scan))
        return "a refusal changed with more bytes";
      return "";
    }
    case HeadScan::Kind::kIncomplete:
      if (bytes.size() > limits.max_header_bytes) return "incomplete past the byte limit";
      return "";
  }
  return "";
}

std::string CheckHttpRequestInput(std::string_view bytes) {
  ParserUnderTest server;
  server.Process(std::string(bytes));
  return server.violation;
}

}  // namespace tfslurm::fuzz
