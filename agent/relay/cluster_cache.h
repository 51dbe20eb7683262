// The node relay's TF clusters by digest (agent.proto,
// Register.cluster_by_digest): tfslurmd sends a cluster's bytes on one of
// the relay's streams and the digest alone on the others, in any order, so
// an Assignment that names a cluster the relay does not have yet waits here
// for it.
//
// A wait that outlasts `wait_limit` means the bytes were lost on their way
// (the stream that carried them ended first): the relay stops asking for
// clusters by digest, for good, and the waiting streams end as UNAVAILABLE,
// so their agents register again and get the bytes themselves.
//
// Thread safety: every member is safe from any thread. A waiter is called
// without the cache's lock, held (Hold) from the moment the cache takes it
// off its list until it has been called (Release).
#ifndef TFSLURM_AGENT_RELAY_CLUSTER_CACHE_H_
#define TFSLURM_AGENT_RELAY_CLUSTER_CACHE_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/mutex.h"

namespace tfslurm::agent {

class ClusterWaiter {
 public:
  virtual ~ClusterWaiter() = default;
  // The cluster it waited for, whole.
  virtual void ClusterArrived(const std::string& zlib) = 0;
  // It waited too long for `digest`.
  virtual void ClusterNeverCame(const std::string& digest) = 0;
  // Keeps the waiter alive across a call above: taken with the cache's lock
  // held, while the waiter is still on its list (so before its Forget).
  virtual void Hold() = 0;
  virtual void Release() = 0;
};

class ClusterCache {
 public:
  using Clock = std::chrono::steady_clock;

  // How many clusters it keeps (one per attempt; tfslurmd remembers as
  // many per connection, service/agentrpc/connection_clusters.h).
  static constexpr size_t kKept = 4;

  // False once a wait has outlasted its limit: Registers then go without
  // cluster_by_digest.
  bool by_digest() const { return by_digest_.load(); }

  // The bytes of `digest` arrived: kept, and handed to whoever waits.
  void Keep(const std::string& digest, const std::string& zlib) ABSL_LOCKS_EXCLUDED(mu_);

  // The bytes of `digest` when kept (true, `*zlib` set); otherwise `waiter`
  // waits for them (false) until Keep, ExpireWaits or Forget.
  bool FindOrWait(const std::string& digest, std::string* zlib, ClusterWaiter* waiter,
                  Clock::time_point now) ABSL_LOCKS_EXCLUDED(mu_);

  // `waiter` goes away: it is no longer called.
  void Forget(ClusterWaiter* waiter) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the waits that began before `now - wait_limit`. How many ended.
  int ExpireWaits(Clock::time_point now, Clock::duration wait_limit) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Takes the waits for `digest` (all of them when empty and expired
  // before `expired_before`), each held.
  std::vector<std::pair<ClusterWaiter*, std::string>> TakeWaits(
      const std::string* digest, std::optional<Clock::time_point> expired_before)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::atomic<bool> by_digest_{true};
  Mutex mu_;
  std::deque<std::pair<std::string, std::string>> kept_ ABSL_GUARDED_BY(mu_);  // digest, zlib
  struct Wait {
    std::string digest;
    Clock::time_point since;
  };
  std::unordered_map<ClusterWaiter*, Wait> waits_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_RELAY_CLUSTER_CACHE_H_
