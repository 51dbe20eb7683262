// Exponential backoff with jitter for reconnecting to the service.
//
// Every agent of a job loses its stream at the same moment when the service
// restarts; the jitter keeps hundreds of them from reconnecting in lockstep.
//
// Thread safety: none; one Backoff per reconnect loop.
#ifndef TFSLURM_AGENT_BACKOFF_H_
#define TFSLURM_AGENT_BACKOFF_H_

#include <chrono>
#include <cstdint>
#include <random>

namespace tfslurm::agent {

class Backoff {
 public:
  // Delays double from `initial` up to `max`; each one is drawn uniformly
  // from [delay/2, delay].
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, uint64_t seed);

  std::chrono::milliseconds Next();
  void Reset() { current_ = initial_; }

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds max_;
  std::chrono::milliseconds current_;
  std::mt19937_64 random_;
};

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_BACKOFF_H_
