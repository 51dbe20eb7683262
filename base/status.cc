#include "base/status.h"

#include <array>
#include <utility>

namespace tfslurm {
namespace {

constexpr std::array<std::pair<StatusCode, const char*>, 11> kNames{{
    {StatusCode::kOk, "ok"},
    {StatusCode::kInvalidArgument, "invalid_argument"},
    {StatusCode::kNotFound, "not_found"},
    {StatusCode::kAlreadyExists, "already_exists"},
    {StatusCode::kFailedPrecondition, "failed_precondition"},
    {StatusCode::kUnavailable, "unavailable"},
    {StatusCode::kUnauthenticated, "unauthenticated"},
    {StatusCode::kPermissionDenied, "permission_denied"},
    {StatusCode::kResourceExhausted, "resource_exhausted"},
    {StatusCode::kInternal, "internal"},
    {StatusCode::kUnknown, "unknown"},
}};

}  // namespace

const char* StatusCodeName(StatusCode code) {
  for (const auto& [c, name] : kNames)
    if (c == code) return name;
  return "unknown";
}

StatusCode ParseStatusCode(std::string_view name) {
  for (const auto& [c, n] : kNames)
    if (name == n) return c;
  return StatusCode::kUnknown;
}

}  // namespace tfslurm
