// Status and StatusOr: the one result type of every fallible call in the
// service, the agent and the client. Expected failures (bad input, Slurm
// down, an unknown id, a service that refuses) travel as a Status;
// exceptions never cross a module boundary.
//
// The codes are the API's error codes (schema/openapi.yaml, Error.code):
// StatusCodeName gives the wire name, ParseStatusCode reads it back, and the
// service maps a code to an HTTP status in exactly one place
// (service/api/errors.cc).
//
// Thread safety: values; a const Status may be read from any thread.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tfslurm {

enum class StatusCode {
  kOk,
  kInvalidArgument,     // the request is wrong; fields say where
  kNotFound,            // no such experiment / task
  kAlreadyExists,       // an experiment with that id exists
  kFailedPrecondition,  // the request is valid but not in this state
  kUnavailable,         // a dependency (slurmctld, disk, the service) failed; retryable
  kUnauthenticated,     // no or bad credentials
  kPermissionDenied,    // valid credentials, someone else's object
  kResourceExhausted,   // a limit was reached
  kInternal,            // a bug or an unexpected state
  kUnknown,             // an error with no better code (a local failure, an unknown wire code)
};

// "invalid_argument", ... as the API spells them.
const char* StatusCodeName(StatusCode code);
// The code named `name`; kUnknown for a name this build does not know.
StatusCode ParseStatusCode(std::string_view name);

// One problem with one field of a request, e.g. {"resources.nodes", "must be
// at least 1, got 0"}. Paths use dots and [i] for array elements.
struct FieldError {
  std::string field;
  std::string reason;
  bool operator==(const FieldError&) const = default;
};

// [[nodiscard]]: a call that can fail is answered; dropping its Status is a
// compile warning (a failure nobody sees), and where a caller means to
// drop it, it says why and casts to void.
class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message, std::vector<FieldError> fields = {})
      : code_(code), message_(std::move(message)), fields_(std::move(fields)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  // Empty for an OK status.
  const std::string& message() const { return message_; }
  const std::vector<FieldError>& fields() const { return fields_; }
  // Unavailable is the only code a caller should retry as is.
  bool retryable() const { return code_ == StatusCode::kUnavailable; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::vector<FieldError> fields_;
};

inline Status InvalidArgument(std::string message, std::vector<FieldError> fields = {}) {
  return {StatusCode::kInvalidArgument, std::move(message), std::move(fields)};
}
inline Status NotFound(std::string message) { return {StatusCode::kNotFound, std::move(message)}; }
inline Status FailedPrecondition(std::string message) {
  return {StatusCode::kFailedPrecondition, std::move(message)};
}
inline Status Unavailable(std::string message) {
  return {StatusCode::kUnavailable, std::move(message)};
}
inline Status Internal(std::string message) { return {StatusCode::kInternal, std::move(message)}; }
// A failure with no better code: the agent's local errors (a missing
// variable, an interface that does not exist), the client's (a spec file).
inline Status Error(std::string message) { return {StatusCode::kUnknown, std::move(message)}; }

// A value or the Status explaining why there is none. Made from a Status, it
// must be an error: an OK status without a value is a bug, caught here.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "StatusOr needs a value or an error");
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "StatusOr made from an OK status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace tfslurm
