// GET /experiments/{id}/metrics: an experiment's training scalars, as its
// reporting task's agent read them from TensorBoard event files and the
// JSON-lines file (docs/scalars.md).
//   ?tag=T (repeatable)  only these tags
// The answer (schema/openapi.yaml, ExperimentMetrics): the limits, each tag
// with its latest point, the series in columns (step, value, wall_time,
// attempt: uPlot's own layout, and compact), steps per second over time
// (core/scalars.h) and the TensorBoard command for MODEL_DIR.
//
// The caller must own the experiment or be an admin (auth.h), as for
// GET /experiments/{id}. Not to be confused with GET /metrics, the
// service's own Prometheus metrics (metrics_api.h).
//
// Thread safety: register once, before serving; the handler shares only
// Experiments (thread-safe) and read-only limits.
#pragma once

#include <httplib.h>

#include "service/api/auth.h"
#include "service/core/experiments.h"

namespace tfslurm::api {

void RegisterScalarRoutes(httplib::Server& server, Experiments& experiments, Authenticator& auth,
                          const ScalarLimits& limits);

}  // namespace tfslurm::api
