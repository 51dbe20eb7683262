// Result<T>: the one result type of the client library. A call either gives
// its value or an Error that carries what the service said (its message and
// every field with its reason) or why the service could not be asked.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tfslurm::client {

// One problem with one field of a request, as the service reports it, e.g.
// {"resources.nodes", "must be from 1 to 10000, got 0"}.
struct FieldError {
  std::string field;
  std::string reason;
  bool operator==(const FieldError&) const = default;
};

struct Error {
  Error() = default;
  explicit Error(std::string message, std::vector<FieldError> fields = {})
      : message(std::move(message)), fields(std::move(fields)) {}

  std::string message;
  std::vector<FieldError> fields;
  // The HTTP status of the service's answer; 0 when there was no answer
  // (unreachable service) or the failure is local (a spec file, the config).
  int http_status = 0;
  std::string code;  // the service's error code, e.g. "invalid_argument"; empty when local
  bool retryable = false;
};

template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : value_(std::move(error)) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(value_); }
  const Error& error() const { return std::get<Error>(value_); }
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

 private:
  std::variant<T, Error> value_;
};

}  // namespace tfslurm::client
