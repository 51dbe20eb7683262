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

// The Slurm release tfslurmd was compiled against, "22.05.8"
// (slurm_version.h; the loader refuses a libslurm of another release, whose
// soname differs).
std::string LibslurmRelease();

// The release slurmctld reports in its configuration (slurm_load_ctl_conf's
// version), "26.05.3". Errors: Unavailable with libslurm's error when
// slurmctld did not answer, as when it is down, or runs a release this
// libslurm cannot talk to (it then closes the connection unanswered).
StatusOr<std::string> LoadControllerRelease();

// Whether slurmctld hides each user's jobs from the others: slurm.conf's
// PrivateData includes "jobs" (slurm_conf_t.private_data has
// PRIVATE_DATA_JOBS). Without it any user's squeue shows every job's name,
// which holds the experiment's id. Unavailable when slurmctld did not answer.
StatusOr<bool> JobsArePrivate();

// Both ends, once: this libslurm's release and slurmctld's.
struct SlurmReleases {
  std::string libslurm;   // "22.05.8"
  std::string slurmctld;  // "26.05.3"
  // How slurmctld's release was learned, for the log: "slurmctld", or
  // "scontrol show config (/usr/bin/scontrol)" when libslurm could not talk
  // to it and the site's own scontrol could.
  std::string slurmctld_source;
};

// Asks slurmctld for its release through libslurm and, when that gets no
// answer, through the first scontrol on PATH (the site's own client, which
// may be of slurmctld's release where tfslurmd's libslurm is not), then
// checks the two releases can talk (release_window.h). Errors:
// FailedPrecondition naming both releases and the fix when they cannot;
// Unavailable when neither way reached slurmctld (down, or a release
// nothing here can talk to), naming what each way answered.
StatusOr<SlurmReleases> CheckSlurmReleases();

// CheckSlurmReleases in a child process, for `tfslurmd --version`, which
// must answer on a host with no Slurm configuration (a build or login host).
// There libslurm ends the process that calls it: slurm_conf_init calls
// fatal("Could not establish a configuration source") when
// _establish_config_source finds neither $SLURM_CONF, the default
// slurm.conf, /run/slurm/conf/slurm.conf (a configless slurmd's copy), nor
// slurmctld through SLURM_CONF_SERVER or DNS SRV records
// (src/common/read_config.c at slurm-26-05-3-1; at slurm-22-05-8-1 the same
// through log_var(LOG_LEVEL_FATAL, ...), which exits too, src/common/log.c).
// Errors: CheckSlurmReleases's, and FailedPrecondition with libslurm's own
// last words when it ended the child before slurmctld could be asked.
StatusOr<SlurmReleases> CheckSlurmReleasesInChild();

}  // namespace tfslurm::slurm
