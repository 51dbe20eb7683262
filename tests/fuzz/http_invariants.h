// What must hold for any bytes a stranger sends to the REST port, before any
// token is looked at (issue 41). Called by the libFuzzer targets
// request_head_fuzzer.cc and http_request_fuzzer.cc, and by corpus_test.cc
// with every file of corpus/request_head and corpus/http_request in every
// build. Each returns "" when all holds, else what was violated.
#pragma once

#include <string>
#include <string_view>

namespace tfslurm::fuzz {

// bytes -> ScanRequestHead (service/api/request_head.h), the gate's scan, with
// small limits: a complete head is within the byte and field limits, ends at
// its first blank line, names no Transfer-Encoding and no body over the
// limit; every shorter prefix of it is incomplete; a refusal is one of 400,
// 411, 413, 431 and stays the same whatever follows; an incomplete scan has
// no blank line and is within the byte limit. Header floods (many fields,
// long fields) and chunked bodies are what the seeds hold.
std::string CheckRequestHeadInput(std::string_view bytes);

// bytes -> httplib's own parser and router (the vendored cpp-httplib, as
// tfslurmd configures it: at most 64 header fields, a payload limit), fed
// from memory through the gate's BufferedStream, without the gate: what
// httplib gives a handler has at most 64 header fields and a body within the
// payload limit, whatever the framing (chunked, Content-Length, none). The
// fuzzer also runs with -malloc_limit_mb: no allocation follows a length the
// request claims.
std::string CheckHttpRequestInput(std::string_view bytes);

}  // namespace tfslurm::fuzz
