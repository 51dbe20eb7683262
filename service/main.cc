// tfslurmd: the tfslurm service. Wires the store, Slurm, the lifecycle and
// the two listeners (REST + agents), then runs until SIGTERM/SIGINT.
#include <absl/synchronization/mutex.h>
#include <httplib.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "service/agentrpc/agent_endpoint.h"
#include "service/api/connection_threads.h"
#include "service/api/http_api.h"
#include "service/api/listen_backlog.h"
#include "service/api/logs_api.h"
#include "service/api/web_assets.h"
#include "service/core/experiments.h"
#include "service/slurm/slurm_client.h"
#include "service/store/ownership_lock.h"
#include "service/store/store.h"

namespace {

// "host:port" -> {host, port}; port must be 0..65535.
bool SplitHostPort(const std::string& s, std::string* host, int* port) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = s.substr(0, colon);
  try {
    size_t used = 0;
    *port = std::stoi(s.substr(colon + 1), &used);
    return used == s.size() - colon - 1 && *port >= 0 && *port <= 65535;
  } catch (const std::exception&) {
    return false;
  }
}

std::string SelfDirectory() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

std::vector<std::string> JobEnvironment() {
  std::vector<std::string> env;
  for (const char* name : {"PATH", "HOME", "LANG", "USER", "SLURM_CONF", "LD_LIBRARY_PATH"}) {
    if (const char* v = getenv(name)) env.push_back(std::string(name) + "=" + v);
  }
  return env;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's abseil checks every absl::Mutex acquisition for lock-order
  // cycles (a debugging aid); gRPC takes such locks for every message, and
  // the check was 9% of tfslurmd's CPU in a 4,096-agent rendezvous.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"tfslurmd: runs distributed TensorFlow experiments on Slurm"};
  std::string listen = "127.0.0.1:8080", agent_listen, db = "tfslurm.db",
              output_root = "tfslurm-output";
  std::string agent_path, advertise, ready_file, log_level = "info";
  bool no_auth = false;
  size_t max_connections = 2048;
  int64_t poll_ms = 2000, barrier_s = 300;
  int heartbeat_ms = 5000, grace_ms = 10000;
  app.add_option("--listen", listen, "REST API address HOST:PORT (port 0: any free port)")
      ->capture_default_str();
  app.add_option(
      "--agent-listen", agent_listen,
      "agent endpoint (gRPC) HOST:PORT; default: the REST host, port 8081. Keep it fixed: "
      "running jobs reconnect to it after a restart of the service");
  app.add_option("--db", db, "SQLite database file")->capture_default_str();
  app.add_option("--output-root", output_root, "directory for experiments' model dirs and logs")
      ->capture_default_str();
  app.add_option("--agent-path", agent_path,
                 "tfslurm-agent as the compute nodes see it; default: next to tfslurmd");
  app.add_option("--advertise", advertise,
                 "host the agents use to reach the service; default: the agent listen host");
  app.add_option("--ready-file", ready_file,
                 "write {\"http_port\", \"agent_port\"} here once listening");
  app.add_option("--poll-interval-ms", poll_ms, "how often Slurm is polled (one RPC per poll)")
      ->capture_default_str();
  app.add_option("--barrier-timeout-s", barrier_s,
                 "time for every task to register after the job starts")
      ->capture_default_str();
  app.add_option("--heartbeat-ms", heartbeat_ms, "agents' heartbeat interval")
      ->capture_default_str();
  app.add_option("--shutdown-grace-ms", grace_ms, "SIGTERM -> SIGKILL grace when reaping tasks")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_flag("--no-auth", no_auth,
               "single-user mode: no tokens, every caller is the local admin; only with a loopback "
               "--listen");
  app.add_option("--max-connections", max_connections,
                 "connections served at once (one thread each)")
      ->capture_default_str();

  // tfslurmd token create --user NAME [--admin]: prints a new API token once.
  auto* token_cmd = app.add_subcommand("token", "manage API tokens");
  auto* create_cmd = token_cmd->add_subcommand(
      "create", "create a token; it is printed once, only its hash is kept");
  std::string token_user;
  bool token_admin = false;
  create_cmd->add_option("--user", token_user, "the user the token acts as")->required();
  create_cmd->add_flag("--admin", token_admin, "may see and change every user's experiments");
  token_cmd->require_subcommand(1);
  // `tfslurmd token create --user alice --db FILE`: --db is the parent's.
  token_cmd->fallthrough();
  create_cmd->fallthrough();
  CLI11_PARSE(app, argc, argv);

  if (create_cmd->parsed()) {
    auto store = tfslurm::store::OpenSqliteStore(db);
    if (!store.ok()) {
      fprintf(stderr, "tfslurmd: %s\n", store.status().message().c_str());
      return 1;
    }
    auto token = tfslurm::api::CreateToken(**store, token_user, token_admin,
                                           tfslurm::NewSystemClock()->NowMs());
    if (!token.ok()) {
      fprintf(stderr, "tfslurmd: %s\n", token.status().message().c_str());
      return 1;
    }
    printf("%s\n", token->c_str());
    fprintf(stderr, "token for %s%s created; it is shown only now\n", token_user.c_str(),
            token_admin ? " (admin)" : "");
    return 0;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));

  std::string http_host, agent_host;
  int http_port = 0, agent_port = 0;
  if (!SplitHostPort(listen, &http_host, &http_port)) {
    spdlog::error("--listen must be HOST:PORT, got '{}'", listen);
    return 2;
  }
  if (agent_listen.empty()) agent_listen = http_host + ":8081";
  if (!SplitHostPort(agent_listen, &agent_host, &agent_port)) {
    spdlog::error("--agent-listen must be HOST:PORT, got '{}'", agent_listen);
    return 2;
  }
  if (no_auth && http_host != "127.0.0.1" && http_host != "localhost" && http_host != "::1" &&
      http_host.rfind("127.", 0) != 0) {
    spdlog::error("--no-auth is only allowed on a loopback address; --listen is {}", listen);
    return 2;
  }
  // Before anything else touches the database, a directory or a port: a second daemon
  // on this database must change nothing (store/ownership_lock.h).
  auto ownership = tfslurm::store::DatabaseOwnership::Acquire(db);
  if (!ownership.ok()) {
    spdlog::error("{}", ownership.status().message());
    return 1;
  }
  std::error_code ec;
  std::filesystem::create_directories(output_root, ec);
  output_root = std::filesystem::absolute(output_root).lexically_normal().string();
  if (!output_root.empty() && output_root.size() > 1 && output_root.back() == '/')
    output_root.pop_back();
  if (agent_path.empty()) agent_path = SelfDirectory() + "/tfslurm-agent";

  // Signals are taken by a dedicated thread; block them everywhere else.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // One descriptor per connection and per agent stream: the soft limit
  // (often 1024) would cap both long before memory does.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  auto store = tfslurm::store::OpenSqliteStore(db);
  if (!store.ok()) {
    spdlog::error("{}", store.status().message());
    return 1;
  }
  auto slurm = tfslurm::slurm::NewLibslurmClient();
  auto clock = tfslurm::NewSystemClock();
  auto random = tfslurm::NewSystemRandomness();

  tfslurm::LifecycleConfig config;
  config.output_root = output_root;
  config.launch.agent_path = agent_path;
  config.job_environment = JobEnvironment();
  config.poll_interval_ms = poll_ms;
  config.barrier_timeout_ms = barrier_s * 1000;
  config.heartbeat_interval_ms = heartbeat_ms;
  config.shutdown_grace_ms = grace_ms;

  // The lifecycle names the agent endpoint in every script, and the gRPC
  // service hands messages to the lifecycle: start the lifecycle, then the
  // endpoint, then tell the lifecycle where the endpoint is, all before the
  // first submission can happen.
  std::unique_ptr<tfslurm::Experiments> experiments;
  experiments = std::make_unique<tfslurm::Experiments>(**store, *slurm, *clock, *random, config);
  auto grpc_server = tfslurm::agentrpc::StartAgentGrpcServer(*experiments, agent_listen);
  if (!grpc_server.ok()) {
    spdlog::error("{}", grpc_server.status().message());
    return 1;
  }
  agent_port = (*grpc_server)->port();
  config.launch.service_address =
      (advertise.empty() ? agent_host : advertise) + ":" + std::to_string(agent_port);
  experiments->SetLaunch(config.launch);

  std::unique_ptr<tfslurm::api::Authenticator> auth;
  if (no_auth) {
    spdlog::warn(
        "--no-auth: every caller on {} acts as the local admin; use tokens on a shared machine",
        listen);
    auth = tfslurm::api::NewOpenAuthenticator();
  } else {
    auth = tfslurm::api::NewTokenAuthenticator(**store);
  }

  httplib::Server http;
  http.new_task_queue = [max_connections] {
    return new tfslurm::api::OnDemandThreads(max_connections);
  };
  // A request must arrive within the read timeout of its previous byte;
  // idle keep-alive connections are closed after 5 s.
  http.set_read_timeout(10, 0);
  http.set_write_timeout(10, 0);
  http.set_keep_alive_timeout(5);
  http.set_keep_alive_max_count(10000);
  // Answers are written as headers then body; with Nagle's algorithm the
  // body waits for the client's delayed ACK (40 ms on Linux) whenever the
  // client keeps the connection alive.
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
  tfslurm::api::RegisterExperimentRoutes(http, *experiments, *clock, *auth, {});
  tfslurm::api::RegisterLogRoutes(http, *experiments, *auth, {output_root});
  tfslurm::api::RegisterWebAssetRoutes(http);
  tfslurm::agentrpc::RegisterAgentHttpRoutes(http, *experiments);
  int bound = http_port == 0 ? http.bind_to_any_port(http_host)
                             : (http.bind_to_port(http_host, http_port) ? http_port : -1);
  if (bound <= 0) {
    int err = errno;
    spdlog::error("cannot listen on {}: {}{}", listen, strerror(err),
                  err == EADDRINUSE ? " (another tfslurmd or program listens there; `ss -ltnp` "
                                      "names it; give this one another --listen)"
                                    : "");
    return 1;
  }
  if (!tfslurm::api::RaiseListenBacklog(bound))
    spdlog::warn("cannot raise the listen backlog of port {}: bursts of clients may wait", bound);
  // Both ports are ours (a second daemon fails above, before recovering
  // anything): now pick up what the last run left.
  if (auto s = experiments->Recover(); !s.ok())
    spdlog::warn("recovery incomplete: {}", s.message());
  spdlog::info("REST API listening on http://{}:{}", http_host, bound);
  spdlog::info("agents connect to {} (gRPC; JSON at http://{}:{}/agent/v1/message)",
               config.launch.service_address, http_host, bound);
  spdlog::info("database {}, output root {}, agent {}", db, output_root, agent_path);
  if (!ready_file.empty()) {
    std::ofstream(ready_file)
        << nlohmann::json{{"http_port", bound}, {"agent_port", agent_port}}.dump() << "\n";
  }

  std::atomic<bool> stopping{false};
  std::thread ticker([&] {
    while (!stopping) {
      experiments->Tick();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  std::thread http_thread([&] { http.listen_after_bind(); });

  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {}: stopping; running jobs go on and are picked up at the next start", sig);
  stopping = true;
  http.stop();
  http_thread.join();
  ticker.join();
  (*grpc_server)->Shutdown();
  return 0;
}
