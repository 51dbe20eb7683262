// Bodies of GET /experiments, kept while the store's ListVersion stays. A
// dashboard open in several browsers asks the same question many
// times between two changes; the answer is a function of the query and the
// store's contents alone (no clock in it), so it is computed once per
// version.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tfslurm::api {

class ListCache {
 public:
  // The body cached for `query` at `version`, or null.
  std::shared_ptr<const std::string> Find(uint64_t version, const std::string& query);
  // Keeps `body`, computed for `query` from a store at `version` or later
  // (the version is read before the store is), so a body can be newer than
  // its version says, never older.
  void Put(uint64_t version, const std::string& query, std::string body);

  static constexpr size_t kMaxEntries = 32;

 private:
  std::mutex mu_;
  uint64_t version_ = 0;
  std::unordered_map<std::string, std::shared_ptr<const std::string>> bodies_;
};

}  // namespace tfslurm::api
