// What the node's relay tracks across its agents' streams: how many are
// open, and since when it has been idle (node_relay.h: it ends when idle).
//
// Thread safety: every member is safe from any thread.
#ifndef TFSLURM_AGENT_RELAY_ACTIVITY_H_
#define TFSLURM_AGENT_RELAY_ACTIVITY_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>

#include "agent/relay/node_relay.h"
#include "base/mutex.h"

namespace tfslurm::agent {

class Activity {
 public:
  using Clock = std::chrono::steady_clock;
  void Opened() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    ++open_;
    ever_ = true;
    cv_.notify_all();
  }
  void Closed() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    --open_;
    idle_since_ = Clock::now();
    cv_.notify_all();
  }
  int open() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    return open_;
  }
  // True once idle as `options` says, or when Stop is called; false when
  // `at_most` has passed first.
  bool WaitUntilIdle(const NodeRelayOptions& options, Clock::duration at_most)
      ABSL_LOCKS_EXCLUDED(mu_) {
    const Clock::time_point give_up = Clock::now() + at_most;
    MutexLock lock(mu_);
    while (!stopped_) {
      const Clock::time_point now = Clock::now();
      const std::chrono::milliseconds limit =
          ever_ ? options.idle_exit : options.first_stream_timeout;
      if (open_ == 0 && now - idle_since_ >= limit) return true;
      if (now >= give_up) return false;
      const Clock::duration idle_left = open_ == 0 ? limit - (now - idle_since_) : limit;
      cv_.wait_for(mu_, std::min<Clock::duration>(idle_left, give_up - now));
    }
    return true;
  }
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    stopped_ = true;
    cv_.notify_all();
  }
  // True once every stream's pipe is gone, false when `at_most` passed first.
  bool WaitForNoStreams(Clock::duration at_most) ABSL_LOCKS_EXCLUDED(mu_) {
    const Clock::time_point give_up = Clock::now() + at_most;
    MutexLock lock(mu_);
    while (open_ > 0)
      if (cv_.wait_until(mu_, give_up) == std::cv_status::timeout) return open_ == 0;
    return true;
  }

 private:
  mutable Mutex mu_;
  std::condition_variable_any cv_;
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  bool ever_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  Clock::time_point idle_since_ ABSL_GUARDED_BY(mu_) = Clock::now();
};

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_RELAY_ACTIVITY_H_
