// The sweeps' routes (sweeps/sweeps.h):
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
// Sweeps (thread-safe).
#pragma once

#include <httplib.h>

#include <string>

#include "service/api/auth.h"
#include "service/sweeps/sweeps.h"

namespace tfslurm::api {

void RegisterSweepRoutes(httplib::Server& server, sweeps::Sweeps& sweeps, Authenticator& auth);

// A sweep as GET /sweeps/{id} answers it (schema/openapi.yaml, Sweep).
std::string SweepViewJson(const sweeps::SweepView& view);

}  // namespace tfslurm::api
