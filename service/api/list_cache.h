// The one cache of GET /experiments: a dashboard asks for the same list
// every second, in several browsers, and between two changes the answer is
// the same (a function of the query and the store's contents alone: no
// clock in it). ExperimentListCache keeps
//   - the bodies, by query, made at the current list version, and
//   - the items (ExperimentSummaryJson), by experiment, made at that
//     experiment's version, so that after a change the list is made again
//     from the changed experiments' summaries and the kept items of the
//     others rather than from every row;
// and learns of changes by observing core's commits (CommitObserver),
// not from the store, which caches nothing.
//
// Thread safety: every method may be called from any thread. One mutex
// guards the versions, bodies and items; it is never held while the list
// source (core, the store) is called, so Committed, called by core's
// writing thread, waits only for a map update.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "service/core/ports/store.h"

namespace tfslurm::api {

// What a list is made from: Store's ListPage and CountExperiments,
// or the same calls through core (Experiments). Narrow, so that the cache
// is tested against a store alone.
struct ListSource {
  std::function<StatusOr<std::vector<ListedExperiment>>(const ListQuery&, const NeedSummary&)>
      list_page;
  std::function<StatusOr<int64_t>(const ListQuery&)> count_experiments;
};

// A ListSource calling `from`'s ListPage and CountExperiments (a
// Store or an Experiments), which must outlive it.
template <typename T>
ListSource ListSourceOf(T& from) {
  return {[&from](const ListQuery& q, const NeedSummary& need) { return from.ListPage(q, need); },
          [&from](const ListQuery& q) { return from.CountExperiments(q); }};
}

class ExperimentListCache final : public CommitObserver {
 public:
  explicit ExperimentListCache(ListSource source);

  // The body of GET /experiments for `query` (ExperimentListJson): the one
  // kept for it at the current version, or one made now, from the items
  // kept where they are current and from the source's summaries of the
  // others, and then kept.
  StatusOr<std::string> Body(const ListQuery& query) ABSL_LOCKS_EXCLUDED(mu_);

  // CommitObserver: advances the versions of what `batch` changes of
  // what a list shows.
  void Committed(std::span<const Changes> batch, bool applied) override ABSL_LOCKS_EXCLUDED(mu_);

  // Grows with every committed change to what a list shows (what Body
  // returns): a body made at one version holds while it stays. Events
  // alone, and task rows whose role and state stay (heartbeats), leave it.
  uint64_t ListVersion() ABSL_LOCKS_EXCLUDED(mu_);
  // The ListVersion of the last change to what a list shows of experiment
  // `id`; 0 if none since the cache was made. Its item holds while it stays.
  uint64_t ItemVersion(const std::string& id) ABSL_LOCKS_EXCLUDED(mu_);
  size_t ItemsKept() ABSL_LOCKS_EXCLUDED(mu_);

  static constexpr size_t kMaxBodies = 32;
  // 20 pages of 1,000 (about 10 MB). Past it every item is dropped: the
  // next lists are made from their rows, as without the cache.
  static constexpr size_t kMaxItems = 20000;

 private:
  struct Item {
    uint64_t version = 0;
    std::shared_ptr<const std::string> json;
  };
  // Role and state of each task (by its index) of one attempt of an
  // experiment, as the commits last wrote them.
  struct SeenTasks {
    int attempt = 0;
    std::unordered_map<TaskIndex, std::pair<std::string, TaskState>> by_task;
  };

  uint64_t ItemVersionLocked(const std::string& id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `c`, committed, may change what a list shows: anything does but
  // events and task rows whose role and state seen_ already knows (the
  // heartbeats flushed at every Tick while a dashboard lists). What seen_
  // does not know counts as a change.
  bool ChangesWhatListsShow(const Changes& c) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Learns the task rows of `c`, committed.
  void See(const Changes& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new list version, which every experiment `c` names is changed at.
  void Changed(const Changes& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets what seen_ knows of every experiment `c` names.
  void Forget(const Changes& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PutItem(const std::string& id, uint64_t version, std::shared_ptr<const std::string> json)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ListSource source_;

  Mutex mu_;
  uint64_t list_version_ ABSL_GUARDED_BY(mu_) = 0;
  std::unordered_map<std::string, uint64_t> item_versions_ ABSL_GUARDED_BY(mu_);  // absent: 0
  // Tasks of open experiments, by experiment id: only their current
  // attempt's counts show in a list.
  std::unordered_map<std::string, SeenTasks> seen_ ABSL_GUARDED_BY(mu_);
  // Bodies by query key, all made at bodies_version_.
  uint64_t bodies_version_ ABSL_GUARDED_BY(mu_) = 0;
  std::unordered_map<std::string, std::shared_ptr<const std::string>> bodies_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, Item> items_ ABSL_GUARDED_BY(mu_);  // by experiment id
};

}  // namespace tfslurm::api
