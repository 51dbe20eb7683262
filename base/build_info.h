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

// Where `cmake --install` puts the programs tfslurm runs but people do not,
// tfslurm-container-launch among them (CMAKE_INSTALL_FULL_LIBEXECDIR/tfslurm:
// "/usr/libexec/tfslurm" in the Debian packages). A build tree has them
// beside the agent and tfslurmd instead, which is looked at first.
const char* InstallLibexecDir();

// The installed agent bundle (deploy/containers/agent-bundle.sh), the same
// path on every node: InstallLibexecDir()/agent-bundle, or where the build
// was told (TFSLURM_AGENT_BUNDLE_DIR: the Debian packages make it in
// /var/lib/tfslurm-agent/agent-bundle).
const char* InstallAgentBundleDir();

// The running program's directory (from /proc/self/exe); "." if unknown.
std::string SelfDirectory();

// The helper `name` (a program or a directory) beside the running program
// (a build tree: build/bin/), or `installed` when it is not there.
std::string BesideSelfOr(const std::string& name, const std::string& installed);

}  // namespace tfslurm::base
