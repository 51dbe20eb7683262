#include "service/api/errors.h"

#include <nlohmann/json.hpp>

namespace tfslurm::api {
namespace {

const char* CodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kNotFound:
      return "not_found";
    case StatusCode::kAlreadyExists:
      return "already_exists";
    case StatusCode::kFailedPrecondition:
      return "failed_precondition";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kUnauthenticated:
      return "unauthenticated";
    case StatusCode::kPermissionDenied:
      return "permission_denied";
    case StatusCode::kResourceExhausted:
      return "resource_exhausted";
    case StatusCode::kInternal:
      return "internal";
  }
  return "internal";
}

}  // namespace

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

void ReplyError(httplib::Response& res, const Status& status) {
  nlohmann::json fields = nlohmann::json::array();
  for (const FieldError& f : status.fields())
    fields.push_back({{"field", f.field}, {"reason", f.reason}});
  nlohmann::json body = {{"error",
                          {{"code", CodeName(status.code())},
                           {"message", status.message()},
                           {"fields", fields},
                           {"retryable", status.retryable()}}}};
  res.status = HttpStatusFor(status.code());
  if (status.code() == StatusCode::kUnauthenticated) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

}  // namespace tfslurm::api
