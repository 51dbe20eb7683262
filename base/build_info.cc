#include "base/build_info.h"

#include <filesystem>

#include "build_info_generated.h"  // TFSLURM_VERSION, TFSLURM_COMMIT (cmake/BuildInfo.cmake)

namespace tfslurm::base {

const char* TfslurmVersion() { return TFSLURM_VERSION; }
const char* TfslurmCommit() { return TFSLURM_COMMIT; }
const char* InstallLibexecDir() { return TFSLURM_LIBEXEC_DIR; }
const char* InstallAgentBundleDir() { return TFSLURM_AGENT_BUNDLE_DIR; }

std::string SelfDirectory() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : self.parent_path().string();
}

std::string BesideSelfOr(const std::string& name, const std::string& installed) {
  std::error_code ec;
  const std::filesystem::path beside = std::filesystem::path(SelfDirectory()) / name;
  return std::filesystem::exists(beside, ec) ? beside.string() : installed;
}

}  // namespace tfslurm::base
