#include "service/api/connection_threads.h"

#include <pthread.h>

#include <chrono>

namespace tfslurm::api {
namespace {

struct Start {
  OnDemandThreads* self;
  std::function<void()> fn;
  void (OnDemandThreads::*run)(std::function<void()>);
};

// A default thread's 8 MiB: a smaller stack (256 KiB) overflowed on the
// deep request bodies the fuzzers made. A thousand connections reserve 8 GiB
// of address space, but pages are only touched on use.
constexpr size_t kStackBytes = 8 * 1024 * 1024;

// How long a thread without work waits for more before it ends.
constexpr std::chrono::seconds kKeepIdle{2};

}  // namespace

OnDemandThreads::OnDemandThreads(size_t max_threads) : max_threads_(max_threads) {}

OnDemandThreads::~OnDemandThreads() { shutdown(); }

size_t OnDemandThreads::active() const {
  MutexLock lock(mu_);
  return active_;
}

bool OnDemandThreads::enqueue(std::function<void()> fn) {
  {
    MutexLock lock(mu_);
    if (shutting_down_) return false;
    // A thread waiting for work takes it: no thread is started per request.
    if (waiting_for_work_ > queue_.size()) {
      queue_.push_back(std::move(fn));
      work_.notify_one();
      return true;
    }
    if (active_ >= max_threads_) {
      // Kept until a thread frees up: the closure owns what it serves.
      queue_.push_back(std::move(fn));
      return true;
    }
    ++active_;
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kStackBytes);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  auto* start = new Start{this, std::move(fn), &OnDemandThreads::Run};
  pthread_t thread;
  int rc = pthread_create(
      &thread, &attr,
      [](void* arg) -> void* {
        auto* s = static_cast<Start*>(arg);
        (s->self->*(s->run))(std::move(s->fn));
        delete s;
        return nullptr;
      },
      start);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    // Out of threads: serve it here rather than drop the connection.
    Run(std::move(start->fn));
    delete start;
  }
  return true;
}

void OnDemandThreads::Run(std::function<void()> fn) {
  for (;;) {
    fn();
    MutexLock lock(mu_);
    if (queue_.empty() && !shutting_down_) {
      // Kept a while for the next piece of work (a kept-alive connection's
      // next request, say), then gone.
      ++waiting_for_work_;
      work_.wait_for(mu_, kKeepIdle, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || shutting_down_;
      });
      --waiting_for_work_;
    }
    if (queue_.empty() || shutting_down_) {
      --active_;
      if (active_ == 0) idle_.notify_all();
      return;
    }
    fn = std::move(queue_.front());
    queue_.pop_front();
  }
}

void OnDemandThreads::shutdown() {
  MutexLock lock(mu_);
  shutting_down_ = true;
  work_.notify_all();
  // condition_variable_any unlocks and relocks mu_ itself; the analysis
  // sees mu_ held throughout, as it is whenever the predicate runs.
  idle_.wait_for(mu_, std::chrono::seconds(10),
                 [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_ == 0; });
}

}  // namespace tfslurm::api
