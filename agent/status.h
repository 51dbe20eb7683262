// Status and StatusOr<T>: the one result type of every fallible call in the
// agent. Errors are expected outcomes here (a missing variable, an interface
// that does not exist, a service that refuses) and carry a message meant for
// the person reading the task's Slurm output file, so no exception crosses a
// module boundary.
#ifndef TFSLURM_AGENT_STATUS_H_
#define TFSLURM_AGENT_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace tfslurm::agent {

class Status {
 public:
  Status() = default;  // OK.
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !message_.has_value(); }
  // Empty for an OK status.
  const std::string& message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit on purpose.
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "StatusOr needs a value or an error");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_STATUS_H_
