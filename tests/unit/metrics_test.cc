#include "service/metrics/prometheus_metrics.h"

#include <gtest/gtest.h>

#include <sstream>

namespace tfslurm::metrics {
namespace {

// The sample lines of a rendering ("name{labels} value"), comments dropped.
std::string Samples(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') out += line + "\n";
  return out;
}

TEST(PrometheusMetrics, RendersTheTextFormatWithEveryFamily) {
  PrometheusMetrics m;
  m.Registered();
  m.Registered();
  m.RendezvousDone(0.3);
  m.ReapingDone(1.5);
  m.AttemptEnded(EndReason::kSucceeded);
  m.AttemptEnded(EndReason::kRetryableExit);
  m.Restarted(EndReason::kRetryableExit, RestartKind::kInPlace);
  m.Restarted(EndReason::kTimeout, RestartKind::kNewJob);
  m.TaskRestartedAlone("worker");
  m.TaskRestartedAlone("worker");
  m.SlurmPolled(0.004, true);
  m.SlurmPolled(2.0, false);
  m.RequestServed("GET /experiments/{id}", 200, 0.002);
  m.TaskStarted("pyxis", 4.2);
  m.TaskStarted("none", 0.08);
  m.ContainerStarted("pyxis");
  m.ContainerStarted("enroot");
  m.ContainerStarted("enroot");
  Experiments::Gauges g;
  g.experiments_by_state = {{ExperimentState::kRunning, 3}, {ExperimentState::kFailed, 1}};
  g.agents_connected = 12;
  std::string text = m.Render(g);
  EXPECT_NE(text.find("# TYPE tfslurm_rendezvous_seconds histogram"), std::string::npos) << text;
  std::string s = Samples(text);
  for (const char* line : {
           "tfslurm_registrations_total 2\n",
           "tfslurm_experiments{state=\"running\"} 3\n",
           "tfslurm_experiments{state=\"failed\"} 1\n",
           "tfslurm_agents_connected 12\n",
           "tfslurm_attempts_ended_total{end_reason=\"succeeded\"} 1\n",
           "tfslurm_restarts_total{end_reason=\"retryable_exit\",where=\"in_place\"} 1\n",
           "tfslurm_restarts_total{end_reason=\"timeout\",where=\"new_job\"} 1\n",
           "tfslurm_task_restarts_total{role=\"worker\"} 2\n",
           "tfslurm_rendezvous_seconds_count 1\n",
           "tfslurm_rendezvous_seconds_bucket{le=\"0.25\"} 0\n",
           "tfslurm_rendezvous_seconds_bucket{le=\"0.5\"} 1\n",
           "tfslurm_reaping_seconds_sum 1.5\n",
           "tfslurm_slurm_poll_seconds_count 2\n",
           "tfslurm_slurm_poll_errors_total 1\n",
           "tfslurm_task_start_seconds_count{runtime=\"pyxis\"} 1\n",
           "tfslurm_task_start_seconds_bucket{runtime=\"pyxis\",le=\"2\"} 0\n",
           "tfslurm_task_start_seconds_bucket{runtime=\"pyxis\",le=\"5\"} 1\n",
           "tfslurm_task_start_seconds_sum{runtime=\"none\"} 0.08\n",
           "tfslurm_container_starts_total{runtime=\"pyxis\"} 1\n",
           "tfslurm_container_starts_total{runtime=\"enroot\"} 2\n",
           "tfslurm_http_request_duration_seconds_count{code=\"200\",route=\"GET "
           "/experiments/{id}\"} 1\n",
       })
    EXPECT_NE(s.find(line), std::string::npos) << "missing: " << line << s;
}

TEST(PrometheusMetrics, TheCertificatesEndIsAGaugeOnlyWithTls) {
  PrometheusMetrics m;
  const std::string name = "tfslurm_tls_certificate_expiry_timestamp_seconds";
  EXPECT_EQ(Samples(m.Render({})).find(name), std::string::npos) << "a plaintext tfslurmd has none";
  m.TlsCertificateServed(1'734'307'200);
  m.TlsCertificateServed(1'766'016'000);  // a reload: the new one replaces it
  const std::string s = Samples(m.Render({}));
  EXPECT_NE(s.find(name + " 1766016000\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("1734307200"), std::string::npos) << s;
}

TEST(PrometheusMetrics, RoutesAreTemplatesNotPaths) {
  EXPECT_EQ(RouteLabel("GET", "/experiments"), "GET /experiments");
  EXPECT_EQ(RouteLabel("GET", "/version"), "GET /version");
  EXPECT_EQ(RouteLabel("GET", "/experiments/mnist-01"), "GET /experiments/{id}");
  EXPECT_EQ(RouteLabel("GET", "/experiments/mnist-01/metrics"), "GET /experiments/{id}/metrics");
  EXPECT_EQ(RouteLabel("POST", "/tokens"), "POST /tokens");
  EXPECT_EQ(RouteLabel("DELETE", "/experiments/mnist-01"), "DELETE /experiments/{id}");
  EXPECT_EQ(RouteLabel("GET", "/experiments/x/logs"), "GET /experiments/{id}/logs");
  EXPECT_EQ(RouteLabel("POST", "/experiments/x/resume"), "POST /experiments/{id}/resume");
  EXPECT_EQ(RouteLabel("GET", "/metrics"), "GET /metrics");
  EXPECT_EQ(RouteLabel("GET", "/ui/app.js"), "GET /ui");
  // Whatever a client makes up stays one series.
  EXPECT_EQ(RouteLabel("GET", "/experiments/x/y/z"), "other");
  EXPECT_EQ(RouteLabel("GET", "/nope-1"), "other");
  EXPECT_EQ(RouteLabel("GET", "/nope-2"), "other");
}

}  // namespace
}  // namespace tfslurm::metrics
