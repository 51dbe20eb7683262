// Metrics for Prometheus: core's counts (ports/metrics.h), the
// API's request latency, and the gauges read at each scrape, rendered in
// Prometheus's text exposition format by prometheus-cpp (Debian's
// prometheus-cpp-dev: its counters, histograms and serializer are the
// reference implementation of the format, so tfslurm writes none of it).
//
// Metric names (docs/metrics.md has their meaning):
//   tfslurm_experiments{state}                        gauge
//   tfslurm_agents_connected                          gauge
//   tfslurm_registrations_total                       counter
//   tfslurm_task_start_seconds{runtime}               histogram
//   tfslurm_container_starts_total{runtime}           counter
//   tfslurm_attempts_ended_total{end_reason}          counter
//   tfslurm_restarts_total{end_reason,where}          counter
//   tfslurm_task_restarts_total{role}                 counter
//   tfslurm_rendezvous_seconds                        histogram
//   tfslurm_reaping_seconds                           histogram
//   tfslurm_slurm_poll_seconds                        histogram
//   tfslurm_slurm_poll_errors_total                   counter
//   tfslurm_experiments_deleted_total{by,files}       counter
//   tfslurm_deleted_files_total                       counter
//   tfslurm_http_request_duration_seconds{route,code} histogram
//   tfslurm_tls_certificate_expiry_timestamp_seconds  gauge (with TLS only)
//
// Thread safety: every method may be called from any thread at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "service/core/experiments.h"
#include "service/core/ports/metrics.h"

namespace tfslurm::metrics {

class PrometheusMetrics final : public Metrics {
 public:
  PrometheusMetrics();
  ~PrometheusMetrics() override;

  void Registered() override;
  void TaskStarted(const std::string& runtime, double seconds_after_launch) override;
  void ContainerStarted(const std::string& runtime) override;
  void RendezvousDone(double seconds) override;
  void ReapingDone(double seconds) override;
  void AttemptEnded(EndReason reason) override;
  void Restarted(EndReason reason, RestartKind kind) override;
  void TaskRestartedAlone(const std::string& role) override;
  void ExperimentDeleted(bool by_retention, int64_t files_removed) override;
  void SlurmPolled(double seconds, bool ok) override;

  // The TLS certificate served from now on ends at `not_after_s` (Unix
  // seconds): a site alerts on it nearing time().
  void TlsCertificateServed(int64_t not_after_s);

  // One HTTP request answered: its route (RouteLabel) and status code.
  void RequestServed(const std::string& route, int code, double seconds);

  // Everything, in the text exposition format (version 0.0.4), with the
  // gauges set from `gauges`.
  std::string Render(const Experiments::Gauges& gauges);

 private:
  struct Families;
  std::unique_ptr<Families> f_;
};

// The route a request path belongs to, for the route label: the API's own
// templates ("/experiments/{id}/logs"), never the raw path, so experiment
// ids do not multiply the series; "other" for anything else.
std::string RouteLabel(const std::string& method, const std::string& path);

}  // namespace tfslurm::metrics
