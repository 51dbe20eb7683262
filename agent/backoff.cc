#include "agent/backoff.h"

#include <algorithm>

namespace tfslurm::agent {

Backoff::Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, uint64_t seed)
    : initial_(std::max(initial, std::chrono::milliseconds(1))),
      max_(std::max(max, initial_)),
      current_(initial_),
      random_(seed) {}

std::chrono::milliseconds Backoff::Next() {
  const int64_t delay = current_.count();
  std::uniform_int_distribution<int64_t> jitter(delay / 2, delay);
  current_ = std::min(current_ * 2, max_);
  return std::chrono::milliseconds(jitter(random_));
}

}  // namespace tfslurm::agent
