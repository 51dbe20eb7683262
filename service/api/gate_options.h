// The limits the REST port's gate (request_gate.h) reads requests with, in
// a header of their own so that the daemon's options can hold them without
// httplib.
//
// Thread safety: plain values.
#pragma once

#include <chrono>
#include <cstddef>

#include "service/api/request_head.h"

namespace tfslurm::api {

struct GateOptions {
  HeadLimits head;
  // The request line and header fields, from the accept (--header-timeout-s);
  // the whole request (--request-timeout-s). 408 after them.
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds request_timeout{30000};
  // Connections whose request has not all arrived; past it the one that has
  // waited longest is closed (--max-waiting-connections).
  size_t max_waiting = 10000;
  // Bytes held by requests waiting or being served; past it 503.
  size_t max_buffered_bytes = 64 << 20;
  // Requests served at once, a thread each (--max-connections).
  size_t max_threads = 2048;
  // Each write of an answer waits at most write_timeout for the client to
  // take it, and the whole answer is written within response_timeout of its
  // first byte.
  std::chrono::milliseconds write_timeout{10000};
  std::chrono::milliseconds response_timeout{60000};
};

}  // namespace tfslurm::api
