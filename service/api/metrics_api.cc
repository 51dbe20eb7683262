#include "service/api/metrics_api.h"

#include <chrono>

#include "service/api/errors.h"

namespace tfslurm::api {
namespace {

using Clock = std::chrono::steady_clock;

// httplib answers a request on one thread from routing to logging, so the
// start of the request being answered on this thread is a thread_local.
thread_local Clock::time_point request_started;

}  // namespace

void RegisterMetricsRoutes(httplib::Server& server, Experiments& experiments, Authenticator& auth,
                           metrics::PrometheusMetrics& metrics) {
  server.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
    request_started = Clock::now();
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server.set_logger([&metrics](const httplib::Request& req, const httplib::Response& res) {
    double seconds = std::chrono::duration<double>(Clock::now() - request_started).count();
    metrics.RequestServed(metrics::RouteLabel(req.method, req.path), res.status, seconds);
  });
  server.Get("/metrics",
             Guard(auth, [&experiments, &metrics](const httplib::Request&, httplib::Response& res,
                                                  const Principal&) {
               auto gauges = experiments.ReadGauges();
               if (!gauges.ok()) return ReplyError(res, gauges.status());
               res.status = 200;
               res.set_content(metrics.Render(*gauges), "text/plain; version=0.0.4; charset=utf-8");
             }));
}

}  // namespace tfslurm::api
