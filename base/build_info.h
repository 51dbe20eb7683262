// What this build of tfslurm is: its version and the git commit it was built
// from, for `--version` and GET /version. Shared by tfslurmd, the agent and
// tfctl.
//
// Thread safety: pure functions of constants.
#pragma once

namespace tfslurm::base {

// "0.1.0" (CMakeLists.txt's project version).
const char* TfslurmVersion();

// The commit the tree was at when built ("a54e11f3c2d1"), with "-dirty"
// when tracked files differed from it; "unknown" outside a git checkout.
const char* TfslurmCommit();

}  // namespace tfslurm::base
