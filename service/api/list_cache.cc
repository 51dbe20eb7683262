#include "service/api/list_cache.h"

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

}  // namespace tfslurm::api
