// The sweeps' routes (core/sweep_runner.h):
//   POST /sweeps                  a sweep spec (schema/sweep-spec.md): 201 with the sweep
//   GET  /sweeps                  the caller's sweeps (an admin's: everyone's), newest first
//   GET  /sweeps/{id}             the sweep, its trials, their objectives and the best
//   POST /sweeps/{id}/cancel      cancels the sweep and its running trials
//   POST /sweeps/{id}/delete      removes an ended sweep and its trials' experiments
//                                 (?files=true: their directories too)
// A sweep belongs to its owner: another user's is a 404, with the same
// answer as for an id that does not exist (as an experiment's, auth.h).
//
// Thread safety: register once, before serving; the handlers share only
// Experiments (thread-safe) and the clock.
#pragma once

#include <httplib.h>

#include <string>

#include "service/api/auth.h"
#include "service/core/experiments.h"

namespace tfslurm::api {

void RegisterSweepRoutes(httplib::Server& server, Experiments& experiments, Authenticator& auth);

// A sweep as GET /sweeps/{id} answers it (schema/openapi.yaml, Sweep).
std::string SweepViewJson(const SweepView& view);

}  // namespace tfslurm::api
