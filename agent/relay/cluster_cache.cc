#include "agent/relay/cluster_cache.h"

#include <algorithm>

namespace tfslurm::agent {

std::vector<std::pair<ClusterWaiter*, std::string>> ClusterCache::TakeWaits(
    const std::string* digest, std::optional<Clock::time_point> expired_before) {
  std::vector<std::pair<ClusterWaiter*, std::string>> taken;
  for (auto it = waits_.begin(); it != waits_.end();) {
    const bool take = digest ? it->second.digest == *digest
                             : expired_before && it->second.since <= *expired_before;
    if (!take) {
      ++it;
      continue;
    }
    it->first->Hold();
    taken.emplace_back(it->first, it->second.digest);
    it = waits_.erase(it);
  }
  return taken;
}

void ClusterCache::Keep(const std::string& digest, const std::string& zlib) {
  std::vector<std::pair<ClusterWaiter*, std::string>> arrived;
  {
    MutexLock lock(mu_);
    const bool kept = std::any_of(kept_.begin(), kept_.end(),
                                  [&](const auto& entry) { return entry.first == digest; });
    if (!kept) {
      kept_.emplace_back(digest, zlib);
      if (kept_.size() > kKept) kept_.pop_front();
    }
    arrived = TakeWaits(&digest, std::nullopt);
  }
  for (auto& [waiter, unused] : arrived) {
    waiter->ClusterArrived(zlib);
    waiter->Release();
  }
}

bool ClusterCache::FindOrWait(const std::string& digest, std::string* zlib, ClusterWaiter* waiter,
                              Clock::time_point now) {
  MutexLock lock(mu_);
  for (const auto& [kept_digest, kept_zlib] : kept_) {
    if (kept_digest != digest) continue;
    *zlib = kept_zlib;
    return true;
  }
  waits_[waiter] = {digest, now};
  return false;
}

void ClusterCache::Forget(ClusterWaiter* waiter) {
  MutexLock lock(mu_);
  waits_.erase(waiter);
}

int ClusterCache::ExpireWaits(Clock::time_point now, Clock::duration wait_limit) {
  std::vector<std::pair<ClusterWaiter*, std::string>> expired;
  {
    MutexLock lock(mu_);
    expired = TakeWaits(nullptr, now - wait_limit);
    if (!expired.empty()) by_digest_ = false;
  }
  for (auto& [waiter, digest] : expired) {
    waiter->ClusterNeverCame(digest);
    waiter->Release();
  }
  return static_cast<int>(expired.size());
}

}  // namespace tfslurm::agent
