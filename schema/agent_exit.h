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

// The agent's own failures before it registers: its options or environment
// would not do (kAgentExitUsage), or the service refused it for good
// (kAgentExitRefused: in site mode, a uid it could not prove, as when the
// agent in a container cannot reach munged). Its log's last error line says
// which. A job none of whose agents registered never ran the program, so
// such an exit is the agent's, not the program's 2 or 3.
inline constexpr int kAgentExitUsage = 2;
inline constexpr int kAgentExitRefused = 3;

}  // namespace tfslurm
