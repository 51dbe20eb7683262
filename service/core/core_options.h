// What core is made from: its ports (core/ports/) and its configuration.
// The daemon builds both once (service/daemon/daemon.h) and hands them to
// NewCore (core.h); unit tests build them with fakes.
//
// Thread safety: plain values; the ports themselves are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "service/core/ports/accounts.h"
#include "service/core/ports/clock.h"
#include "service/core/ports/files.h"
#include "service/core/ports/slurm.h"
#include "service/core/ports/store.h"
#include "service/core/sbatch_script.h"
#include "service/core/spec.h"

namespace tfslurm {

struct CoreConfig {
  std::string output_root;  // experiments' model dirs and logs (absolute)
  // How the job scripts start the agent and where it reaches the service.
  AgentLaunch launch;
  std::vector<std::string> job_environment;  // KEY=VALUE for every job
  // Site mode: every agent proves its Unix uid (a MUNGE credential the
  // transport decoded, TaskRef::proven_uid), and only the uid the job runs
  // as may act for its tasks, whatever secret it holds.
  bool agents_prove_uid = false;
  int64_t poll_interval_ms = 2000;
  int64_t barrier_timeout_ms = 5 * 60 * 1000;  // from the job's start
  int heartbeat_interval_ms = 5000;
  int lost_after_missed_heartbeats = 4;
  // An agent whose stream is gone (the service restarted, or the connection
  // broke) reconnects with a backoff capped at 5 s (agent/session.h,
  // reconnect_max). It is not lost before it could have tried twice, however
  // short the heartbeat interval. A running task silent for longer than
  // this and lost_after_missed_heartbeats intervals is gone, and its
  // attempt fails (tfslurmd --reconnect-window-s; docs/restarts.md,
  // "Network faults").
  int64_t reconnect_window_ms = 12000;
  int shutdown_grace_ms = 10000;  // SIGTERM -> SIGKILL in the agent
  // After the grace, the service ends the step itself through Slurm.
  int64_t reap_timeout_margin_ms = 5000;
  int64_t partition_cache_ms = 30000;
  // An automatic submission (a restart, or one interrupted by a crash) that
  // fails on something transient (slurmctld, the disk) is tried again after
  // this delay, doubled per failure up to the maximum.
  int64_t submit_retry_ms = 5000;
  int64_t submit_retry_max_ms = 5 * 60 * 1000;
  // Ended experiments last changed longer ago than this are deleted from
  // the store (not their files) by a sweep at most every
  // retention_sweep_ms; 0 keeps them forever (--retain-ended-days).
  int64_t retain_ended_ms = 0;
  int64_t retention_sweep_ms = 60 * 1000;
  SpecLimits limits;
  ScalarLimits scalar_limits;
  // Ids a client of core keeps for experiments it starts itself (a sweep's
  // trials: sweeps/sweeps.h, CheckIdNotKept): asked of every submission but
  // the keeper's own (SubmitOptions::keeper) with its id and owner, and a
  // refusal is returned as is. Empty: no id is kept. Core knows nothing of
  // who keeps them or why.
  std::function<Status(const std::string& id, const std::string& owner)> kept_ids;
};

// The ports core works through (core/ports/).
struct CorePorts {
  Store& store;
  SlurmClient& slurm;
  Clock& clock;
  Randomness& random;
  Files& files;
  Accounts& accounts;
};

}  // namespace tfslurm
