#include "service/api/list_cache.h"

#include "service/api/experiments_json.h"

namespace tfslurm::api {

std::shared_ptr<const std::string> ListCache::Find(uint64_t version, const std::string& query) {
  std::lock_guard lock(mu_);
  if (version != version_) return nullptr;
  auto it = bodies_.find(query);
  return it == bodies_.end() ? nullptr : it->second;
}

void ListCache::Put(uint64_t version, const std::string& query, std::string body) {
  std::lock_guard lock(mu_);
  if (version < version_) return;  // a slower request, from before a write
  if (version > version_ || bodies_.size() >= kMaxEntries) {
    bodies_.clear();
    version_ = version;
  }
  bodies_[query] = std::make_shared<const std::string>(std::move(body));
}

std::shared_ptr<const std::string> ListItemCache::Find(const std::string& id, uint64_t version) {
  std::lock_guard lock(mu_);
  auto it = items_.find(id);
  return it == items_.end() || it->second.version != version ? nullptr : it->second.json;
}

void ListItemCache::Put(const std::string& id, uint64_t version,
                        std::shared_ptr<const std::string> item) {
  std::lock_guard lock(mu_);
  auto it = items_.find(id);
  if (it != items_.end()) {
    if (version >= it->second.version) it->second = {version, std::move(item)};
    return;
  }
  if (items_.size() >= kMaxItems) items_.clear();
  items_.emplace(id, Item{version, std::move(item)});
}

size_t ListItemCache::size() {
  std::lock_guard lock(mu_);
  return items_.size();
}

StatusOr<std::string> MakeListBody(store::Store& store, ListItemCache& item_cache,
                                   const store::ListQuery& q) {
  std::vector<std::shared_ptr<const std::string>> items;
  auto page = store.ListPage(q, [&](const std::string& id, uint64_t version) {
    items.push_back(item_cache.Find(id, version));
    return items.back() == nullptr;
  });
  if (!page.ok()) return page.status();
  auto total = store.CountExperiments(q);
  if (!total.ok()) return total.status();
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i]) continue;
    const store::ListedExperiment& listed = (*page)[i];
    items[i] = std::make_shared<const std::string>(ExperimentSummaryJson(*listed.summary));
    item_cache.Put(listed.id, listed.version, items[i]);
  }
  return ExperimentListJson(items, *total, q.limit, q.offset);
}

}  // namespace tfslurm::api
