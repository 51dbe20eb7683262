// Reading request parameters the same way in every handler: an experiment
// id in the path, integers and flags in the query, each refused with the
// parameter's name, the value and what is allowed.
//
// Thread safety: pure functions.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <string>

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

}  // namespace tfslurm::api
