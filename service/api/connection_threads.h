// A task queue for cpp-httplib that gives every connection its own thread,
// started on demand, up to a bound. httplib serves a connection on one
// thread for its whole life; with a fixed pool, a few hundred slow clients
// (slow-loris) would hold every thread and starve the rest. Threads here are
// cheap (small stacks, blocked in recv) and exit with their connection, so
// an idle service has none; past `max_threads`, connections wait for a
// thread in a queue.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

namespace tfslurm::api {

class OnDemandThreads final : public httplib::TaskQueue {
 public:
  explicit OnDemandThreads(size_t max_threads);
  ~OnDemandThreads() override;

  void enqueue(std::function<void()> fn) override;
  // Waits for running connections to finish.
  void shutdown() override;

  size_t active() const;

 private:
  void Run(std::function<void()> fn);

  const size_t max_threads_;
  mutable std::mutex mu_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> queue_;
  size_t active_ = 0;
  bool shutting_down_ = false;
};

}  // namespace tfslurm::api
