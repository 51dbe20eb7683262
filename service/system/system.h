// The ports of core/ports/ that the real machine implements: the system
// clock, the kernel's randomness (through OpenSSL) and the local file
// system. Only tfslurmd's wiring (service/daemon/) and benchmarks make them.
//
// Thread safety: every object made here is thread-safe.
#pragma once

#include <memory>

#include "service/core/ports/clock.h"
#include "service/core/ports/files.h"

namespace tfslurm::system {

std::unique_ptr<Clock> NewSystemClock();
// Aborts the process when OpenSSL cannot draw random bytes: without them,
// secrets would be guessable.
std::unique_ptr<Randomness> NewSystemRandomness();
std::unique_ptr<Files> NewLocalFiles();

}  // namespace tfslurm::system
