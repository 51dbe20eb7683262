// The libslurm implementation of the Slurm port (core/ports/slurm.h).
//
// Thread safety: thread-safe; each call is its own RPC.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "service/core/ports/slurm.h"

namespace tfslurm::slurm {

// Uses SLURM_CONF (or Slurm's default path) to find the cluster.
std::unique_ptr<SlurmClient> NewLibslurmClient();

// node[1-3],gpu01 -> node1 node2 node3 gpu01, through libslurm's hostlist.
std::vector<std::string> ExpandHostlist(const std::string& hostlist);

}  // namespace tfslurm::slurm
