// What this build of tfslurm is: its version and the git commit it was built
// from, for `--version` and GET /version. Shared by tfslurmd, the agent and
// tfctl.
//
// Thread safety: pure functions of constants.
#pragma once

#include <string>

namespace tfslurm::base {

// "0.1.0" (CMakeLists.txt's project version).
const char* TfslurmVersion();

// The commit the tree was at when built ("a54e11f3c2d1"), with "-dirty"
// when tracked files differed from it; "unknown" outside a git checkout.
const char* TfslurmCommit();

// Where `cmake --install` puts the programs tfslurm runs but people do not:
// tfslurm-container-launch and agent-bundle/ ("/usr/libexec/tfslurm" in the
// Debian packages, CMAKE_INSTALL_FULL_LIBEXECDIR/tfslurm). A build tree has
// them beside the agent and tfslurmd instead, which is looked at first.
const char* InstallLibexecDir();

// The helper `name` (a program or a directory): beside the running program
// when it is there (a build tree: build/bin/), else in InstallLibexecDir().
std::string HelperPath(const std::string& name);

}  // namespace tfslurm::base
