// tfslurmd's wiring, once: the lifecycle (core's Experiments), the gRPC agent
// endpoint, the authenticator, the REST listener with its routes, the 200 ms
// ticker, and their orderly stop. service/main.cc runs it on the real store
// and libslurm; bench/rendezvous/server.cc on an in-process stand-in Slurm.
// What differs between the two comes in as DaemonPorts and DaemonOptions.
//
// Start also sets what the daemon needs of the process: SIGPIPE ignored, the
// soft RLIMIT_NOFILE raised to the hard limit (one descriptor per connection
// and per agent stream; an experiment at the task cap must fit in it:
// descriptor_budget.h), and abseil's mutex deadlock detection off (gRPC
// takes absl::Mutex locks for every message; the check was 9% of tfslurmd's
// CPU in a 4,096-agent rendezvous).
//
// Thread safety: Start may be called from any thread; the threads it starts
// (ticker, HTTP listener, gRPC) inherit that thread's signal mask, so block
// the signals a caller sigwaits for before Start. After Start, the accessors
// and Stop may be called from any thread; Stop is idempotent, and a call
// during another waits for it to finish. The ports must outlive the Daemon.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "service/api/gate_options.h"
#include "service/core/core.h"
#include "service/core/core_options.h"
#include "service/daemon/daemon_tls.h"
#include "service/metrics/prometheus_metrics.h"
#include "service/sweeps/sweeps.h"

namespace tfslurm {
class Tokens;
namespace api {
class Authenticator;
class GatedServer;
}  // namespace api
namespace agentrpc {
class AgentGrpcServer;
}
}  // namespace tfslurm

namespace tfslurm::daemon {

// How often the ticker runs Core::Tick (it sleeps this long after each
// one): the cadence of core's timers, among them a restart in place's
// deadlines (it is decided as its last agent waits: SlurmWatch::OnStandby).
// Slurm is polled at most every CoreConfig::poll_interval_ms of these.
inline constexpr int kTickIntervalMs = 200;

struct DaemonOptions {
  // Core's own options (core/core_options.h): the output root, the agent's
  // path, the jobs' environment, the intervals and timeouts, the limits.
  // The daemon fills in core.launch.service_address once the agent
  // endpoint listens.
  CoreConfig core;
  // Whether the site set core.limits.max_tasks (--max-tasks-per-experiment):
  // one that does not fit the process's file descriptors is refused at
  // Start; the default is lowered to fit, with a warning
  // (descriptor_budget.h).
  bool max_tasks_given = false;
  // The REST API; port 0 picks a free port (see Daemon::http_port).
  std::string http_host = "127.0.0.1";
  int http_port = 8080;
  // The gRPC agent endpoint, "HOST:PORT"; port 0 picks a free port.
  // (tfslurmd's command line defaults to 0.0.0.0:8081.)
  std::string agent_listen = "127.0.0.1:8081";
  // The host agents use to reach the endpoint, as job scripts name it;
  // empty: the host of agent_listen, or this host's name when that is a
  // wildcard (0.0.0.0, ::), which agents on other hosts cannot connect to.
  std::string advertise_host;
  // Every caller is the local admin; the caller checks that http_host is a
  // loopback address and says so in its log.
  bool no_auth = false;
  // --munge-auth: `Authorization: MUNGE <credential>` is accepted too, besides
  // tokens (api/munge_auth.h). Socket empty: libmunge's default. Members of
  // munge_admin_group are admins; empty: nobody is by MUNGE.
  bool munge_auth = false;
  std::string munge_socket;
  int64_t munge_max_age_s = 300;
  std::string munge_admin_group;
  // TLS on both ports when tls.cert_path is set; the caller refuses
  // plaintext off loopback (main.cc, --insecure-plaintext).
  TlsOptions tls;
  // The REST port's gate (api/request_gate.h): the limits a request is read
  // with before any thread serves it, and how many are served at once
  // (gate.max_threads, --max-connections).
  api::GateOptions gate;
  bool web_assets = true;  // GET / and /ui/ (api/web_assets.h)
  bool logs = true;        // GET /experiments/{id}/logs (api/logs_api.h)
  // Log follow responses at once, and of one user (api/logs_api.h).
  int max_log_followers = 64;
  int max_log_followers_per_user = 8;
  // Sweeps still running per owner; one more is refused (ResourceExhausted):
  // every open sweep is stepped at each poll, on the ticker's thread
  // (--max-open-sweeps-per-user).
  int max_open_sweeps_per_owner = 10;
  // The Slurm releases GET /version reports: the libslurm tfslurmd was
  // built with and slurmctld's ("" when unknown).
  std::string libslurm_release;
  std::string slurmctld_release;
};

// What the daemon runs on: core's ports, which must all outlive it.
using DaemonPorts = CorePorts;

class Daemon {
 public:
  // Makes the output root (core.output_root, with its parents, absolute and
  // normal: Daemon::output_root), starts the agent endpoint, makes core
  // knowing where the endpoint is, binds the REST port, and only once both
  // ports are bound recovers what the last run left (Core::Recover;
  // a second daemon on the same ports fails before that). Then starts the
  // ticker and the HTTP listener and returns once the listener runs.
  // Errors: FailedPrecondition "cannot create the output root ..." (before
  // anything starts), the agent endpoint's, or Unavailable "cannot listen on
  // HOST:PORT: ..." for the REST port; whatever had started is stopped
  // again.
  static StatusOr<std::unique_ptr<Daemon>> Start(const DaemonOptions& options, DaemonPorts ports);

  // Stop(), then frees everything.
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // The bound ports (the chosen ones when the options said 0).
  int http_port() const { return http_port_; }
  int agent_port() const { return agent_port_; }
  // "HOST:PORT" the job scripts give the agents.
  const std::string& agent_address() const { return agent_address_; }
  // The output root as made: absolute and normal, without a trailing '/'.
  const std::string& output_root() const { return output_root_; }
  Experiments& experiments() { return *core_; }

  // Whether both ports speak TLS.
  bool tls() const { return tls_ != nullptr; }
  // SIGHUP: reads --tls-cert and --tls-key again and serves them from the
  // next handshake on (daemon_tls.h); FailedPrecondition without TLS. On an
  // error the old identity stays. Returns the new one, described.
  StatusOr<std::string> ReloadTls();
  // The identity served, described; "" without TLS.
  std::string TlsDescription() const { return tls_ ? tls_->Describe() : ""; }

  // Stops the REST listener (waiting for the connections being served), the
  // ticker, then the agent endpoint. Running jobs go on; a next Start on the
  // same store picks them up.
  void Stop();

 private:
  Daemon() = default;

  Clock* clock_ = nullptr;
  int http_port_ = 0;
  int agent_port_ = 0;
  std::string agent_address_;
  std::string output_root_;
  // Destroyed bottom-up: the HTTP server and the authenticator before the
  // agent endpoint, all before the lifecycle they call into.
  // Outlives both servers, which take each handshake's identity from it.
  std::unique_ptr<DaemonTls> tls_;
  // Before core_, which reports to it: destroyed after it.
  std::unique_ptr<metrics::PrometheusMetrics> metrics_;
  std::unique_ptr<Core> core_;
  // After core_, which it calls: destroyed before it.
  std::unique_ptr<sweeps::Sweeps> sweeps_;
  std::unique_ptr<agentrpc::AgentGrpcServer> grpc_;
  std::unique_ptr<Tokens> tokens_;
  std::unique_ptr<api::Authenticator> auth_;
  std::unique_ptr<api::GatedServer> http_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> http_returned_{false};  // listen_after_bind has returned
  std::thread ticker_;
  std::thread http_thread_;
  std::once_flag stop_once_;
};

}  // namespace tfslurm::daemon
