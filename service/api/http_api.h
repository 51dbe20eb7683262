// The REST API: HTTP handlers only. Every route but /healthz authenticates
// (auth.h) and checks ownership. Each handler parses the request, calls
// core/, and maps the result (errors through errors.h). Routes:
//   GET    /healthz
//   GET    /version                     (tfslurm's build, libslurm's and slurmctld's releases)
//   POST   /experiments                 (?dry_run=true: validate and render only)
//   GET    /experiments                 (?state=running,queued&limit=&offset=)
//   GET    /experiments/{id}
//   GET    /experiments/{id}/sbatch     (?attempt=N)
//   DELETE /experiments/{id}             (cancels)
//   POST   /experiments/{id}/resume      (body {"changes": {...}}: spec changes)
//   POST   /experiments/{id}/delete      (?files=true: its directory too; ended ones only)
// The sweeps' routes are in sweeps_api.h, the logs' in logs_api.h, the
// training scalars' in scalars_api.h.
//
// Thread safety: register the routes once, before serving; httplib then runs
// the handlers on many threads at once, and what they share (Experiments, the
// clock, the authenticator, the list cache) is thread-safe.
#pragma once

#include <httplib.h>

#include <memory>
#include <string>

#include "service/api/auth.h"
#include "service/api/list_cache.h"
#include "service/core/experiments.h"

namespace tfslurm::api {

struct ApiOptions {
  size_t max_body_bytes = 1 << 20;
  // GET /version's Slurm releases: the libslurm tfslurmd was built with and
  // slurmctld's, as learned at start ("" when slurmctld did not answer).
  std::string libslurm_release;
  std::string slurmctld_release;
};

// Installs the routes, JSON error pages for unknown routes and a JSON 500
// for exceptions on `server`.
// `list_cache` answers GET /experiments; core must tell it of every write
// (it is one of NewCore's observers).
void RegisterExperimentRoutes(httplib::Server& server, Experiments& experiments, Clock& clock,
                              Authenticator& auth, std::shared_ptr<ExperimentListCache> list_cache,
                              const ApiOptions& options);

}  // namespace tfslurm::api
