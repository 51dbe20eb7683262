// The agent's exit statuses that the service reads back from Slurm (the
// job's exit code is the highest of its tasks'), shared by agent/ and
// service/core/ so that they cannot drift.
#pragma once

namespace tfslurm {

// The agent could not verify tfslurmd's TLS certificate with the job's
// TFSLURM_CA (or the service did not speak TLS), so it did not register
// and ran no program. Its log says why, in one line containing
// kUnverifiedServiceLine; the service makes that the attempt's
// startup_error.
inline constexpr int kAgentExitUnverifiedService = 4;
inline constexpr const char* kUnverifiedServiceLine = "cannot verify the service at ";

}  // namespace tfslurm
