// Reading request parameters the same way in every handler: an experiment
// id in the path, integers and flags in the query, each refused with the
// parameter's name, the value and what is allowed.
//
// Thread safety: pure functions.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace tfslurm::api {

// The path segment of an experiment id, as a regex group (core/spec.cc's
// pattern for ids).
inline constexpr const char* kIdPattern = "([a-z0-9][a-z0-9._-]{0,62})";

// Query parameter `name` as a decimal integer in [min, max], or `fallback`
// when absent.
StatusOr<int64_t> IntParam(const httplib::Request& req, const char* name, int64_t fallback,
                           int64_t min, int64_t max);
// `value` cut to 64 bytes, for echoing a bad value in an error.
std::string ShortForError(const std::string& value);
// ?name, ?name=1|true|yes.
bool IsTrue(const httplib::Request& req, const char* name);
// InvalidArgument (400) naming the first query parameter whose name or value
// is not valid UTF-8 (after percent-decoding, as `?tag=%ff`): every value is
// text that may end up in JSON, whose writer refuses such bytes. Guard
// (api/auth.h) checks every authenticated route with it.
Status CheckQueryIsUtf8(const httplib::Request& req);
// The request body as JSON (an experiment or a sweep spec, ...): refused
// when empty, nested deeper than 64 levels (the parser recurses, and a body
// of a million '[' must not exhaust the stack), or not JSON, naming where.
StatusOr<nlohmann::json> ParseJsonBody(const httplib::Request& req);
// `text` with every byte that is not printable ASCII as %XX, for a log line.
std::string PercentEncodedForLog(const std::string& text);

}  // namespace tfslurm::api
