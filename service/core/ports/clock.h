// The clock and randomness ports: core reads time and draws secrets only
// through these, so its tests drive time by hand and never sleep.
// service/system/ implements them for the real machine.
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace tfslurm {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch.
  virtual int64_t NowMs() = 0;
};

// Secrets and generated ids.
class Randomness {
 public:
  virtual ~Randomness() = default;
  virtual std::string NewSecret() = 0;        // 32 random bytes, hex
  virtual std::string NewExperimentId() = 0;  // matches the id pattern
};

}  // namespace tfslurm
