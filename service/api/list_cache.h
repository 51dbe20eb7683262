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

#include "service/core/status.h"
#include "service/store/store.h"

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

// Items of GET /experiments (ExperimentSummaryJson) by experiment id, kept
// while the store's version of that experiment stays
// (store::ListedExperiment::version). A change to one experiment makes
// every ListCache body stale; the list is then made again from that one
// experiment's new item and the kept ones, not from every row.
class ListItemCache {
 public:
  // The item kept for `id` at `version`, or null.
  std::shared_ptr<const std::string> Find(const std::string& id, uint64_t version);
  // Keeps `item`, made from the summary of `id` at `version`, unless an
  // item of a later version is kept.
  void Put(const std::string& id, uint64_t version, std::shared_ptr<const std::string> item);
  size_t size();

  // 20 pages of 1,000 (about 10 MB). Past it every item is dropped: the
  // next lists are made from their rows, as without the cache.
  static constexpr size_t kMaxItems = 20000;

 private:
  struct Item {
    uint64_t version = 0;
    std::shared_ptr<const std::string> json;
  };
  std::mutex mu_;
  std::unordered_map<std::string, Item> items_;
};

// The body of GET /experiments for `query` (ExperimentListJson), made from
// the items `items` keeps where they are current and from the store's
// summaries of the others, which it then keeps.
StatusOr<std::string> MakeListBody(store::Store& store, ListItemCache& items,
                                   const store::ListQuery& query);

}  // namespace tfslurm::api
