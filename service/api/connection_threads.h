// Threads started on demand, up to a bound, each running queued work until
// none is left, then waiting 2 s for more before it ends: the REST port's
// gate (request_gate.h) hands each complete request to one. An idle service
// has none; past `max_threads`, work waits in a queue for a thread. It is an httplib::TaskQueue
// too, for a server run without the gate.
//
// Thread safety: every method may be called from any thread; `mu_` guards
// the queue and the counts.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>

#include "base/mutex.h"

namespace tfslurm::api {

class OnDemandThreads final : public httplib::TaskQueue {
 public:
  explicit OnDemandThreads(size_t max_threads);
  ~OnDemandThreads() override;

  bool enqueue(std::function<void()> fn) override ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for running connections to finish (at most 10 s).
  void shutdown() override ABSL_LOCKS_EXCLUDED(mu_);

  size_t active() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Serves `fn`, then queued connections, on the calling thread.
  void Run(std::function<void()> fn) ABSL_LOCKS_EXCLUDED(mu_);

  const size_t max_threads_;
  mutable Mutex mu_;
  // _any: it waits on a tfslurm::Mutex.
  std::condition_variable_any idle_;  // active_ reached 0
  std::condition_variable_any work_;  // work queued, or shutting down
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  size_t active_ ABSL_GUARDED_BY(mu_) = 0;  // threads, working or waiting for work
  size_t waiting_for_work_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tfslurm::api
