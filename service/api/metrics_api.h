// GET /metrics: Prometheus's text exposition format, and the
// API's request latency by route and status code.
//
// Who may scrape: anyone with a valid token (Guard, as every other route;
// with --no-auth, anyone who reaches the port). The metrics are aggregates
// (counts per state, latencies per route): no experiment id, owner or path
// appears in a label, so an ordinary user's token shows nothing about other
// users that `GET /experiments` would not. A scraper gets its own token
// (`tfslurmd token create --user prometheus`), not an admin's.
//
// Thread safety: register once before serving; the handlers are thread-safe.
#pragma once

#include <httplib.h>

#include "service/api/auth.h"
#include "service/core/experiments.h"
#include "service/metrics/prometheus_metrics.h"

namespace tfslurm::api {

// Installs GET /metrics, and times every request `server` answers from now
// on into `metrics` (its pre-routing handler and logger: no other code may
// set them).
void RegisterMetricsRoutes(httplib::Server& server, Experiments& experiments, Authenticator& auth,
                           metrics::PrometheusMetrics& metrics);

}  // namespace tfslurm::api
