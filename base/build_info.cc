#include "base/build_info.h"

#include "build_info_generated.h"  // TFSLURM_VERSION, TFSLURM_COMMIT (cmake/BuildInfo.cmake)

namespace tfslurm::base {

const char* TfslurmVersion() { return TFSLURM_VERSION; }
const char* TfslurmCommit() { return TFSLURM_COMMIT; }

}  // namespace tfslurm::base
