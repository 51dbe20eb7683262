// The accounts port: the Unix account an experiment's job runs as, and so
// the identity its directories are created and read with.
//
// Personal mode: every experiment runs as tfslurmd's own account, whoever
// owns it. Site mode (tfslurmd --site, as root): an experiment runs as its
// owner's account, looked up by the owner's name. service/system/accounts.cc
// implements both on the real machine; unit tests use a fake.
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tfslurm {

struct RunAs {
  std::string user;
  uint32_t uid = 0;
  uint32_t gid = 0;              // the primary group
  std::vector<uint32_t> groups;  // every group, the primary one first
  // KEY=VALUE the account's jobs get over CoreConfig::job_environment: in
  // site mode HOME (its home directory), USER and LOGNAME, which Slurm does
  // not set for a job it is given through libslurm (the job's environment
  // is the one submitted; docs/site-deployment.md); none in personal mode,
  // where tfslurmd's own environment is the account's.
  std::vector<std::string> identity_env;
};

class Accounts {
 public:
  virtual ~Accounts() = default;
  // The account `owner`'s jobs run as. Site mode refuses (PermissionDenied)
  // an owner with no Unix account here, and uid 0: a job never runs as root.
  virtual StatusOr<RunAs> ForOwner(const std::string& owner) = 0;
};

}  // namespace tfslurm
