#include "service/daemon/daemon.h"

#include <absl/synchronization/mutex.h>
#include <httplib.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "service/agentrpc/agent_endpoint.h"
#include "service/api/auth.h"
#include "service/api/http_api.h"
#include "service/api/list_cache.h"
#include "service/api/listen_backlog.h"
#include "service/api/logs_api.h"
#include "service/api/metrics_api.h"
#include "service/api/munge_auth.h"
#include "service/api/request_gate.h"
#include "service/api/scalars_api.h"
#include "service/api/sweeps_api.h"
#include "service/api/tokens_api.h"
#include "service/api/web_assets.h"
#include "service/core/tokens.h"
#include "service/daemon/descriptor_budget.h"

namespace tfslurm::daemon {
namespace {

void SetUpProcess() {
  // Debian's abseil checks every absl::Mutex acquisition for lock-order
  // cycles (a debugging aid); gRPC takes such locks for every message, and
  // the check was 9% of tfslurmd's CPU in a 4,096-agent rendezvous.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  signal(SIGPIPE, SIG_IGN);
  // One descriptor per connection and per agent stream: the soft limit
  // (often 1024) would cap both long before memory does.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
}

// The output root: experiment directories are made without their parents
// (in site mode as the experiment's owner, who could not make the root), so
// the root must exist before the first submission; and it is written into
// every experiment's model_dir, so it is made absolute and normal once.
// Here rather than in main.cc, so that every wiring (the benchmark's server
// too) gets a working root.
StatusOr<std::string> MakeOutputRoot(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return FailedPrecondition("cannot create the output root " + path + ": " + ec.message());
  std::string root = std::filesystem::absolute(path).lexically_normal().string();
  if (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

void ConfigureHttpServer(httplib::Server& http, const api::GateOptions& gate) {
  // The gate (api/request_gate.h) has read each request whole before httplib
  // parses it; this is what httplib checks again on its own.
  http.set_payload_max_length(gate.head.max_body_bytes);
  // What answers to a kept-alive connection say: it may wait at the gate
  // for its next request as long as for a new one's header fields, and
  // take this many requests (then it is closed).
  http.set_keep_alive_timeout(
      std::chrono::duration_cast<std::chrono::seconds>(gate.header_timeout).count());
  http.set_keep_alive_max_count(1000);
  // Answers are written as headers then body; with Nagle's algorithm the
  // body waits for the client's delayed ACK (40 ms on Linux).
  http.set_tcp_nodelay(true);
  // httplib's default socket options set SO_REUSEPORT (httplib.h,
  // default_socket_options), which lets a second tfslurmd bind the same port
  // and take half of the connections. SO_REUSEADDR alone still allows a
  // restart while old connections sit in TIME_WAIT, and makes a second
  // daemon's bind fail with EADDRINUSE.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

// Bearer tokens (or everyone, with --no-auth), and MUNGE credentials in
// front of them with --munge-auth.
StatusOr<std::unique_ptr<api::Authenticator>> NewAuthenticator(const DaemonOptions& options,
                                                               Tokens& tokens, Clock& clock) {
  std::unique_ptr<api::Authenticator> auth =
      options.no_auth ? api::NewOpenAuthenticator() : api::NewTokenAuthenticator(tokens);
  if (!options.munge_auth || options.no_auth) return auth;
  Clock* c = &clock;
  auto munge = api::NewMungeAuthenticator(
      {options.munge_socket, options.munge_max_age_s, options.munge_admin_group}, std::move(auth),
      api::LibmungeDecoder(options.munge_socket), api::SystemUserLookup(),
      [c] { return c->NowMs() / 1000; });
  if (!munge.ok()) return munge.status();
  return std::move(munge).value();
}

// Binds the REST listener; the port bound.
StatusOr<int> Bind(httplib::Server& http, const DaemonOptions& options) {
  const std::string listen = options.http_host + ":" + std::to_string(options.http_port);
  int bound =
      options.http_port == 0
          ? http.bind_to_any_port(options.http_host)
          : (http.bind_to_port(options.http_host, options.http_port) ? options.http_port : -1);
  if (bound <= 0) {
    int err = errno;
    return Unavailable("cannot listen on " + listen + ": " + strerror(err) +
                       (err == EADDRINUSE ? " (another tfslurmd or program listens there; `ss "
                                            "-ltnp` names it; give this one another --listen)"
                                          : ""));
  }
  if (!api::RaiseListenBacklog(bound))
    spdlog::warn("cannot raise the listen backlog of port {}: bursts of clients may wait", bound);
  return bound;
}

// The host agents are told to reach the endpoint at: --advertise, else the
// listen host, except a wildcard (0.0.0.0, ::), which an agent on another
// host cannot connect to (on one host it happens to mean loopback): then
// this host's name, which a cluster's nodes resolve as they resolve each
// other's (network.address: hostname makes the same assumption).
std::string AdvertisedHost(const DaemonOptions& options) {
  if (!options.advertise_host.empty()) return options.advertise_host;
  std::string host = options.agent_listen.substr(0, options.agent_listen.rfind(':'));
  if (host != "0.0.0.0" && host != "::" && host != "[::]" && host != "*" && !host.empty())
    return host;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return host;
  spdlog::info(
      "the agent endpoint listens on all addresses ({}): agents are told this host's name, {} "
      "(--advertise HOST tells them another)",
      options.agent_listen, name);
  return name;
}

// What the REST routes are served from.
struct RouteParts {
  Core& core;
  sweeps::Sweeps& sweeps;
  Tokens& tokens;
  api::Authenticator& auth;
  metrics::PrometheusMetrics& metrics;
  Clock& clock;
  // Site mode: each JSON agent message proves its uid; null: personal mode.
  std::shared_ptr<agentrpc::UidProof> uid_proof;
};

// Every REST route, and the agents' JSON route.
void RegisterRoutes(httplib::Server& http, const DaemonOptions& options, const CoreConfig& config,
                    const RouteParts& parts, std::shared_ptr<api::ExperimentListCache> list_cache) {
  api::ApiOptions api_options;
  api_options.max_body_bytes = options.gate.head.max_body_bytes;
  api_options.libslurm_release = options.libslurm_release;
  api_options.slurmctld_release = options.slurmctld_release;
  api::RegisterExperimentRoutes(http, parts.core, parts.clock, parts.auth, list_cache, api_options);
  api::RegisterMetricsRoutes(http, parts.core, parts.auth, parts.metrics);
  if (options.logs) {
    api::LogOptions logs;
    logs.output_root = config.output_root;
    logs.max_followers = options.max_log_followers;
    logs.max_followers_per_user = options.max_log_followers_per_user;
    api::RegisterLogRoutes(http, parts.core, parts.auth, logs);
  }
  api::RegisterScalarRoutes(http, parts.core, parts.auth, config.scalar_limits);
  api::RegisterSweepRoutes(http, parts.sweeps, parts.auth);
  api::RegisterTokenRoutes(http, parts.tokens, parts.auth);
  if (options.web_assets) api::RegisterWebAssetRoutes(http);
  agentrpc::RegisterAgentHttpRoutes(http, parts.core, parts.uid_proof);
}

// With --tls-cert: the identity both ports serve, checked for the host
// agents dial (`agent_host`); the jobs' environment then carries the CA the
// agents verify the service with (agent/README.md). Null: plaintext.
StatusOr<std::unique_ptr<DaemonTls>> LoadTls(const DaemonOptions& options,
                                             const std::string& agent_host, Clock& clock,
                                             CoreConfig& config) {
  if (options.tls.cert_path.empty()) return std::unique_ptr<DaemonTls>();
  auto tls = DaemonTls::Load(options.tls, agent_host, clock.NowMs() / 1000);
  if (!tls.ok()) return tls.status();
  config.job_environment.push_back("TFSLURM_CA=" + (*tls)->JobTrust());
  return tls;
}

// The agent port's key and certificate files (gRPC's file watcher reads
// them); nullopt: plaintext.
std::optional<agentrpc::AgentTls> AgentTlsOf(DaemonTls* tls) {
  if (!tls) return std::nullopt;
  return agentrpc::AgentTls{tls->agents().key_path(), tls->agents().cert_path()};
}

// Site mode: agents prove their uid through munged (agentrpc/uid_proof.h);
// null in personal mode, where the attempt's secret alone speaks.
std::shared_ptr<agentrpc::UidProof> UidProofFor(const DaemonOptions& options,
                                                const CoreConfig& config, Clock& clock) {
  if (!config.agents_prove_uid) return nullptr;
  return agentrpc::MungeUidProof(
      api::LibmungeDecoder(options.munge_socket), [&clock] { return clock.NowMs() / 1000; },
      options.munge_max_age_s);
}

// With TLS the gate does each handshake too (api/request_gate.h); every
// handshake takes the identity current then (tls/serving_identity.h).
std::function<void(SSL_CTX*)> RestTls(DaemonTls* tls) {
  if (!tls) return nullptr;
  return [identity = &tls->rest()](SSL_CTX* ctx) { identity->Configure(ctx); };
}

}  // namespace

// The task cap that fits this process's descriptors (descriptor_budget.h).
static StatusOr<int> TaskCapForDescriptors(const DaemonOptions& options) {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_max == RLIM_INFINITY)
    return options.core.limits.max_tasks;
  auto cap = FitTaskCap(options.core.limits.max_tasks, options.max_tasks_given,
                        static_cast<int64_t>(files.rlim_max));
  if (!cap.ok()) return cap.status();
  if (!cap->warning.empty()) spdlog::warn("{}", cap->warning);
  return cap->max_tasks;
}

// The core's configuration as this process can serve it: the task cap its
// descriptors allow, and the output root made.
static Status FitToProcess(const DaemonOptions& options, CoreConfig& config) {
  auto max_tasks = TaskCapForDescriptors(options);
  if (!max_tasks.ok()) return max_tasks.status();
  config.limits.max_tasks = *max_tasks;
  auto root = MakeOutputRoot(config.output_root);
  if (!root.ok()) return root.status();
  config.output_root = *root;
  return Status::Ok();
}

StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const DaemonOptions& options, DaemonPorts ports) {
  SetUpProcess();
  // On an error below, the destructor stops whatever has started.
  std::unique_ptr<Daemon> d(new Daemon());
  d->clock_ = &ports.clock;

  CoreConfig config = options.core;
  if (auto fit = FitToProcess(options, config); !fit.ok()) return fit;
  d->output_root_ = config.output_root;

  const std::string agent_host = AdvertisedHost(options);
  auto tls = LoadTls(options, agent_host, ports.clock, config);
  if (!tls.ok()) return tls.status();
  d->tls_ = std::move(*tls);
  const std::optional<agentrpc::AgentTls> agent_tls = AgentTlsOf(d->tls_.get());

  // Core names the agent endpoint in every script, and the endpoint hands
  // messages to core: the endpoint listens first, core is made knowing its
  // address, then the endpoint serves it, all before the first submission
  // can happen (agents of running jobs that reconnect meanwhile are asked to
  // retry).
  std::shared_ptr<agentrpc::UidProof> uid_proof = UidProofFor(options, config, ports.clock);
  auto grpc_server = agentrpc::StartAgentGrpcServer(options.agent_listen,
                                                    agent_tls ? &*agent_tls : nullptr, uid_proof);
  if (!grpc_server.ok()) return grpc_server.status();
  d->grpc_ = std::move(grpc_server).value();
  d->agent_port_ = d->grpc_->port();
  d->agent_address_ = agent_host + ":" + std::to_string(d->agent_port_);
  config.launch.service_address = d->agent_address_;
  d->metrics_ = std::make_unique<metrics::PrometheusMetrics>();
  // The one cache of lists, told of every write core makes.
  auto list_cache = std::make_shared<api::ExperimentListCache>(api::ListSourceOf(ports.store));
  // A sweep's trial ids are kept for its trials (sweeps/sweeps.h).
  config.kept_ids = [&store = ports.store](const std::string& id, const std::string& owner) {
    return sweeps::CheckIdNotKept(store, id, owner);
  };
  d->core_ = NewCore(ports, config, d->metrics_.get(), {list_cache});
  d->grpc_->Serve(*d->core_);
  d->sweeps_ = sweeps::NewSweeps(
      *d->core_, ports.store, ports.clock, ports.random,
      {config.limits, config.poll_interval_ms, options.max_open_sweeps_per_owner});

  d->tokens_ = std::make_unique<Tokens>(ports.store, ports.random, ports.clock);
  auto auth = NewAuthenticator(options, *d->tokens_, ports.clock);
  if (!auth.ok()) return auth.status();
  d->auth_ = std::move(auth).value();

  d->http_ = std::make_unique<api::GatedServer>(options.gate, RestTls(d->tls_.get()));
  httplib::Server& http = *d->http_;
  ConfigureHttpServer(http, options.gate);
  RegisterRoutes(
      http, options, config,
      {*d->core_, *d->sweeps_, *d->tokens_, *d->auth_, *d->metrics_, ports.clock, uid_proof},
      list_cache);
  auto bound = Bind(http, options);
  if (!bound.ok()) return bound.status();
  d->http_port_ = *bound;
  // Both ports are ours (a second daemon fails above, before recovering
  // anything): now pick up what the last run left.
  if (auto s = d->core_->Recover(); !s.ok()) spdlog::warn("recovery incomplete: {}", s.message());

  Daemon* self = d.get();
  d->ticker_ = std::thread([self] {
    while (!self->stopping_) {
      self->core_->Tick();
      self->sweeps_->Tick();
      std::this_thread::sleep_for(std::chrono::milliseconds(kTickIntervalMs));
    }
  });
  d->http_thread_ = std::thread([self] {
    self->http_->listen_after_bind();
    self->http_returned_ = true;
  });
  // httplib's stop() does nothing until listen_after_bind has begun: wait
  // for it, so that a Stop right after Start cannot miss the listener.
  while (!http.is_running() && !d->http_returned_)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return d;
}

Daemon::~Daemon() { Stop(); }

StatusOr<std::string> Daemon::ReloadTls() {
  if (!tls_) return FailedPrecondition("tfslurmd serves without TLS: there is nothing to reload");
  return tls_->Reload(clock_->NowMs() / 1000);
}

void Daemon::Stop() {
  std::call_once(stop_once_, [this] {
    stopping_ = true;
    if (http_thread_.joinable()) {
      http_->stop();
      http_thread_.join();
    }
    if (http_) http_->Shutdown();
    if (ticker_.joinable()) ticker_.join();
    if (grpc_) grpc_->Shutdown();
  });
}

}  // namespace tfslurm::daemon
