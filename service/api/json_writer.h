// A streaming JSON writer for the API's answers about experiments. Building
// an nlohmann::json tree first and dumping it cost ten times the writing for
// a list of 1,000 experiments (bench/RESULTS.md, API latency), because every
// key and value is a separate allocation.
//
// Thread safety: not thread-safe; one writer per answer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tfslurm::api {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);

  // Escaped as RFC 8259 asks; bytes that are not UTF-8 become U+FFFD, as
  // nlohmann's error_handler_t::replace does, so the answer always parses.
  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // A value that is already JSON text (a stored, canonical spec).
  JsonWriter& Raw(std::string_view json);

  template <typename T>
  JsonWriter& Field(std::string_view key, const T& value) {
    Key(key);
    if constexpr (std::is_same_v<T, bool>)
      return Bool(value);
    else if constexpr (std::is_integral_v<T>)
      return Int(value);
    else
      return String(value);
  }

  void Reserve(size_t bytes) { out_.reserve(bytes); }

  // null when absent.
  template <typename T>
  JsonWriter& Field(std::string_view key, const std::optional<T>& value) {
    Key(key);
    return value ? Int(*value) : Null();
  }

  // The text written so far; the writer is empty afterwards.
  std::string Take();

 private:
  void BeforeValue();

  std::string out_;
  // Per open container: has it a member yet (a comma goes before the next)?
  std::vector<bool> has_member_;
  bool after_key_ = false;
};

}  // namespace tfslurm::api
