#include "service/metrics/prometheus_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <regex>

namespace tfslurm::metrics {

using prometheus::Histogram;

struct PrometheusMetrics::Families {
  prometheus::Registry registry;
  prometheus::Family<prometheus::Gauge>& experiments =
      prometheus::BuildGauge()
          .Name("tfslurm_experiments")
          .Help("Experiments in each state, as the database has them")
          .Register(registry);
  prometheus::Gauge& agents = prometheus::BuildGauge()
                                  .Name("tfslurm_agents_connected")
                                  .Help("Agents with an open stream to this tfslurmd")
                                  .Register(registry)
                                  .Add({});
  prometheus::Family<prometheus::Gauge>& sweep_trials =
      prometheus::BuildGauge()
          .Name("tfslurm_sweep_trials_ended")
          .Help("Ended trials of every sweep, by their end_reason, as the database has them")
          .Register(registry);
  prometheus::Counter& registrations =
      prometheus::BuildCounter()
          .Name("tfslurm_registrations_total")
          .Help("First registrations of a task in an attempt (reconnections not counted)")
          .Register(registry)
          .Add({});
  prometheus::Family<prometheus::Counter>& attempts_ended =
      prometheus::BuildCounter()
          .Name("tfslurm_attempts_ended_total")
          .Help("Attempts ended, by why (the attempt's end_reason)")
          .Register(registry);
  prometheus::Family<prometheus::Counter>& restarts =
      prometheus::BuildCounter()
          .Name("tfslurm_restarts_total")
          .Help(
              "Automatic restarts, by the end_reason of the attempt that caused them and where "
              "the next attempt runs (in_place: inside the same Slurm job; new_job)")
          .Register(registry);
  prometheus::Family<prometheus::Counter>& task_restarts =
      prometheus::BuildCounter()
          .Name("tfslurm_task_restarts_total")
          .Help(
              "Programs restarted alone inside their attempt, by TF role (a worker or evaluator "
              "under parameter servers, restart.max_task_restarts)")
          .Register(registry);
  prometheus::Family<Histogram>& task_start =
      prometheus::BuildHistogram()
          .Name("tfslurm_task_start_seconds")
          .Help(
              "From srun's launch of a step to each task's agent starting, by container runtime "
              "(none without one); under pyxis and oci the image's import and the container's "
              "setup are in it")
          .Register(registry);
  prometheus::Family<prometheus::Counter>& container_starts =
      prometheus::BuildCounter()
          .Name("tfslurm_container_starts_total")
          .Help(
              "Containers started, by runtime: one per task under pyxis and oci (the agent runs "
              "in it), one per program start under enroot and apptainer")
          .Register(registry);
  Histogram& rendezvous =
      prometheus::BuildHistogram()
          .Name("tfslurm_rendezvous_seconds")
          .Help("From an attempt's job start to every task's assignment (the barrier)")
          .Register(registry)
          .Add({}, Histogram::BucketBoundaries{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
                                               120, 300});
  Histogram& reaping =
      prometheus::BuildHistogram()
          .Name("tfslurm_reaping_seconds")
          .Help("From the first Shutdown of an attempt's reaping to the last reaped exit report")
          .Register(registry)
          .Add({}, Histogram::BucketBoundaries{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120});
  Histogram& slurm_poll =
      prometheus::BuildHistogram()
          .Name("tfslurm_slurm_poll_seconds")
          .Help("One poll of slurmctld's jobs (slurm_load_jobs)")
          .Register(registry)
          .Add({}, Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                               0.5, 1, 2.5, 5, 10});
  prometheus::Counter& slurm_poll_errors = prometheus::BuildCounter()
                                               .Name("tfslurm_slurm_poll_errors_total")
                                               .Help("Polls of slurmctld that failed")
                                               .Register(registry)
                                               .Add({});
  prometheus::Family<prometheus::Counter>& deleted =
      prometheus::BuildCounter()
          .Name("tfslurm_experiments_deleted_total")
          .Help("Ended experiments deleted, by whom (user, retention) and whether their files went")
          .Register(registry);
  prometheus::Counter& deleted_files = prometheus::BuildCounter()
                                           .Name("tfslurm_deleted_files_total")
                                           .Help("Files and directories removed with deletions")
                                           .Register(registry)
                                           .Add({});
  // Added on the first TlsCertificateServed: a plaintext tfslurmd has none.
  prometheus::Family<prometheus::Gauge>& tls_expiry =
      prometheus::BuildGauge()
          .Name("tfslurm_tls_certificate_expiry_timestamp_seconds")
          .Help("When the TLS certificate both ports serve stops being valid (Unix time)")
          .Register(registry);
  prometheus::Family<Histogram>& http = prometheus::BuildHistogram()
                                            .Name("tfslurm_http_request_duration_seconds")
                                            .Help("REST API requests, by route and status code")
                                            .Register(registry);
};

PrometheusMetrics::PrometheusMetrics() : f_(std::make_unique<Families>()) {}
PrometheusMetrics::~PrometheusMetrics() = default;

void PrometheusMetrics::Registered() { f_->registrations.Increment(); }
void PrometheusMetrics::TaskStarted(const std::string& runtime, double seconds_after_launch) {
  // A warm start is a fraction of a second; a cold import of a large image
  // minutes (a CUDA image's: about 2 minutes).
  f_->task_start
      .Add({{"runtime", runtime}},
           Histogram::BucketBoundaries{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600})
      .Observe(seconds_after_launch);
}

void PrometheusMetrics::ContainerStarted(const std::string& runtime) {
  f_->container_starts.Add({{"runtime", runtime}}).Increment();
}

void PrometheusMetrics::RendezvousDone(double seconds) { f_->rendezvous.Observe(seconds); }
void PrometheusMetrics::ReapingDone(double seconds) { f_->reaping.Observe(seconds); }

void PrometheusMetrics::AttemptEnded(EndReason reason) {
  f_->attempts_ended.Add({{"end_reason", EndReasonName(reason)}}).Increment();
}

void PrometheusMetrics::Restarted(EndReason reason, RestartKind kind) {
  f_->restarts
      .Add({{"end_reason", EndReasonName(reason)},
            {"where", kind == RestartKind::kInPlace ? "in_place" : "new_job"}})
      .Increment();
}

void PrometheusMetrics::TaskRestartedAlone(const std::string& role) {
  f_->task_restarts.Add({{"role", role}}).Increment();
}

void PrometheusMetrics::ExperimentDeleted(bool by_retention, int64_t files_removed) {
  f_->deleted
      .Add({{"by", by_retention ? "retention" : "user"},
            {"files", files_removed > 0 ? "removed" : "kept"}})
      .Increment();
  f_->deleted_files.Increment(static_cast<double>(files_removed));
}

void PrometheusMetrics::SlurmPolled(double seconds, bool ok) {
  f_->slurm_poll.Observe(seconds);
  if (!ok) f_->slurm_poll_errors.Increment();
}

void PrometheusMetrics::TlsCertificateServed(int64_t not_after_s) {
  f_->tls_expiry.Add({}).Set(static_cast<double>(not_after_s));
}

void PrometheusMetrics::RequestServed(const std::string& route, int code, double seconds) {
  f_->http
      .Add({{"route", route}, {"code", std::to_string(code)}},
           Histogram::BucketBoundaries{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                       0.5, 1, 2.5, 5, 30})
      .Observe(seconds);
}

std::string PrometheusMetrics::Render(const Experiments::Gauges& gauges) {
  for (const auto& [state, n] : gauges.experiments_by_state)
    f_->experiments.Add({{"state", ExperimentStateName(state)}}).Set(static_cast<double>(n));
  f_->agents.Set(static_cast<double>(gauges.agents_connected));
  for (const auto& [reason, n] : gauges.sweep_trials_by_end_reason)
    f_->sweep_trials.Add({{"end_reason", reason.empty() ? "none" : reason}})
        .Set(static_cast<double>(n));
  return prometheus::TextSerializer().Serialize(f_->registry.Collect());
}

namespace {

// Compiled at program start, on one thread (see service/core/checkpoint_state.cc).
const std::regex kExperiment("/experiments/[^/]+");
const std::regex kExperimentSub("/experiments/[^/]+/(logs|sbatch|resume|metrics)");
const std::regex kSweep("/sweeps/[^/]+");
const std::regex kSweepSub("/sweeps/[^/]+/(cancel)");

}  // namespace

std::string RouteLabel(const std::string& method, const std::string& path) {
  if (path == "/healthz" || path == "/version" || path == "/metrics" || path == "/experiments" ||
      path == "/tokens" || path == "/agent/v1/message" || path == "/sweeps")
    return method + " " + path;
  if (std::regex_match(path, kExperiment)) return method + " /experiments/{id}";
  std::smatch m;
  if (std::regex_match(path, m, kExperimentSub)) return method + " /experiments/{id}/" + m[1].str();
  if (std::regex_match(path, kSweep)) return method + " /sweeps/{id}";
  if (std::regex_match(path, m, kSweepSub)) return method + " /sweeps/{id}/" + m[1].str();
  if (method == "GET" && (path == "/" || path.rfind("/ui/", 0) == 0)) return "GET /ui";
  return "other";
}

}  // namespace tfslurm::metrics
