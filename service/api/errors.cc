#include "service/api/errors.h"

#include <nlohmann/json.hpp>

namespace tfslurm::api {

namespace {

// kUnknown is a local code of the agent and the client: the API has no such
// error, and the service answering with it would be a bug.
const char* WireCodeName(StatusCode code) {
  return StatusCodeName(code == StatusCode::kUnknown ? StatusCode::kInternal : code);
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
    case StatusCode::kUnknown:
      return 500;
  }
  return 500;
}

std::string ErrorBody(const Status& status) {
  nlohmann::json fields = nlohmann::json::array();
  for (const FieldError& f : status.fields())
    fields.push_back({{"field", f.field}, {"reason", f.reason}});
  nlohmann::json body = {{"error",
                          {{"code", WireCodeName(status.code())},
                           {"message", status.message()},
                           {"fields", fields},
                           {"retryable", status.retryable()}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void ReplyError(httplib::Response& res, const Status& status) {
  res.status = HttpStatusFor(status.code());
  if (status.code() == StatusCode::kUnauthenticated) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(ErrorBody(status), "application/json");
}

}  // namespace tfslurm::api
