// Status and StatusOr: the one result type of every fallible call in the
// service. Expected failures (bad input, Slurm down, unknown id) travel as a
// Status; exceptions never cross a module boundary. api/ maps a StatusCode to
// an HTTP code in exactly one place (api/errors.cc).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tfslurm {

enum class StatusCode {
  kOk,
  kInvalidArgument,     // the request is wrong; fields say where
  kNotFound,            // no such experiment / task
  kAlreadyExists,       // an experiment with that id exists
  kFailedPrecondition,  // the request is valid but not in this state
  kUnavailable,         // a dependency (slurmctld, disk) failed; retryable
  kUnauthenticated,     // no or bad credentials
  kPermissionDenied,    // valid credentials, someone else's object
  kResourceExhausted,   // a limit was reached
  kInternal,            // a bug or an unexpected state
};

// One problem with one field of a request, e.g. {"resources.nodes", "must be
// at least 1, got 0"}. Paths use dots and [i] for array elements.
struct FieldError {
  std::string field;
  std::string reason;
  bool operator==(const FieldError&) const = default;
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message, std::vector<FieldError> fields = {})
      : code_(code), message_(std::move(message)), fields_(std::move(fields)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::vector<FieldError>& fields() const { return fields_; }
  // Unavailable is the only code a client should retry as is.
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

// A value or the Status explaining why there is none.
template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace tfslurm
