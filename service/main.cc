// tfslurmd: the tfslurm service. Parses the command line, takes the
// database's ownership lock, opens the store and libslurm, and hands them to
// the daemon's wiring (service/daemon/daemon.h: the lifecycle and the two
// listeners, REST + agents), then runs until SIGTERM/SIGINT.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/build_info.h"
#include "service/core/tokens.h"
#include "service/daemon/daemon.h"
#include "service/slurm/libslurm_client.h"
#include "service/store/ownership_lock.h"
#include "service/store/sqlite_store.h"
#include "service/system/accounts.h"
#include "service/system/system.h"

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
  CLI::App app{"tfslurmd: runs distributed TensorFlow experiments on Slurm"};
  std::string listen = "127.0.0.1:8080", agent_listen, db = "tfslurm.db",
              output_root = "tfslurm-output";
  std::string agent_path, advertise, ready_file, log_level = "info";
  bool no_auth = false;
  size_t max_connections = 2048;
  int64_t poll_ms = 2000, barrier_s = 300;
  int heartbeat_ms = 5000, grace_ms = 10000;
  tfslurm::store::ScalarLimits scalar_limits;
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
  app.add_option("--scalar-points-per-tag", scalar_limits.points_per_tag,
                 "training scalars kept per tag of an experiment; past it a tag is thinned to "
                 "half, evenly")
      ->capture_default_str()
      ->check(CLI::Range(10, 1000000));
  app.add_option("--scalar-tags", scalar_limits.tags,
                 "training scalar tags kept per experiment; more are not kept")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_flag("--no-auth", no_auth,
               "single-user mode: no tokens, every caller is the local admin; only with a loopback "
               "--listen");
  bool munge_auth = false;
  std::string munge_socket;
  int64_t munge_max_age_s = 300;
  std::string munge_admin_group;
  app.add_flag("--munge-auth", munge_auth,
               "also accept 'Authorization: MUNGE <credential>' (tfctl without a token): the "
               "credential's uid is the user (docs/security.md)");
  app.add_option("--munge-socket", munge_socket, "munged's socket (default: libmunge's)");
  app.add_option("--munge-max-age-s", munge_max_age_s,
                 "MUNGE credentials older than this are refused")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  app.add_option("--munge-admin-group", munge_admin_group,
                 "members of this Unix group are admins when they use MUNGE (default: nobody)");
  bool site = false;
  app.add_flag("--site", site,
               "site mode (as root): each experiment's job runs as its owner's Unix account, and "
               "its directories belong to the owner (docs/site-deployment.md)");
  app.add_option("--max-connections", max_connections,
                 "connections served at once (one thread each)")
      ->capture_default_str();

  bool show_version = false;
  app.add_flag("--version", show_version,
               "print tfslurmd's version and commit, the libslurm release it was built with, and "
               "slurmctld's (SLURM_CONF's cluster), then exit");

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
    auto clock = tfslurm::system::NewSystemClock();
    auto random = tfslurm::system::NewSystemRandomness();
    auto token = tfslurm::Tokens(**store, *random, *clock).Create(token_user, token_admin);
    if (!token.ok()) {
      fprintf(stderr, "tfslurmd: %s\n", token.status().message().c_str());
      return 1;
    }
    printf("%s\n", token->c_str());
    fprintf(stderr, "token for %s%s created; it is shown only now\n", token_user.c_str(),
            token_admin ? " (admin)" : "");
    return 0;
  }
  if (show_version) {
    printf("tfslurmd %s (commit %s)\n", tfslurm::base::TfslurmVersion(),
           tfslurm::base::TfslurmCommit());
    printf("libslurm %s\n", tfslurm::slurm::LibslurmRelease().c_str());
    // libslurm ends the process itself when it finds no configuration.
    fflush(stdout);
    auto releases = tfslurm::slurm::CheckSlurmReleases();
    if (releases.ok())
      printf("slurmctld %s\n", releases->slurmctld.c_str());
    else
      printf("slurmctld: %s\n", releases.status().message().c_str());
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
  // A tfslurmd whose libslurm cannot talk to this slurmctld would fail every
  // poll and submission: refuse now, naming both releases. A slurmctld that
  // is only down is waited for, as the polls always have.
  std::string libslurm_release = tfslurm::slurm::LibslurmRelease(), slurmctld_release;
  if (auto releases = tfslurm::slurm::CheckSlurmReleases(); releases.ok()) {
    slurmctld_release = releases->slurmctld;
    spdlog::info("tfslurmd {} (commit {}); libslurm {}, slurmctld {}",
                 tfslurm::base::TfslurmVersion(), tfslurm::base::TfslurmCommit(), libslurm_release,
                 slurmctld_release);
  } else if (releases.status().code() == tfslurm::StatusCode::kFailedPrecondition) {
    spdlog::error("{}", releases.status().message());
    return 1;
  } else {
    spdlog::warn(
        "tfslurmd {} (commit {}); libslurm {}; slurmctld's release is not known: {}. Starting "
        "anyway: the polls retry until slurmctld answers",
        tfslurm::base::TfslurmVersion(), tfslurm::base::TfslurmCommit(), libslurm_release,
        releases.status().message());
  }

  // Before anything else touches the database, a directory or a port: a second daemon
  // on this database must change nothing (store/ownership_lock.h).
  auto ownership = tfslurm::store::DatabaseOwnership::Acquire(db);
  if (!ownership.ok()) {
    spdlog::error("{}", ownership.status().message());
    return 1;
  }
  if (agent_path.empty()) agent_path = SelfDirectory() + "/tfslurm-agent";

  // Signals are taken by sigwait below; block them in every thread (the
  // daemon's threads inherit this mask).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto store = tfslurm::store::OpenSqliteStore(db);
  if (!store.ok()) {
    spdlog::error("{}", store.status().message());
    return 1;
  }
  auto slurm = tfslurm::slurm::NewLibslurmClient();
  auto clock = tfslurm::system::NewSystemClock();
  auto random = tfslurm::system::NewSystemRandomness();
  auto files = tfslurm::system::NewLocalFiles();

  tfslurm::daemon::DaemonOptions options;
  options.http_host = http_host;
  options.http_port = http_port;
  options.agent_listen = agent_listen;
  options.advertise_host = advertise.empty() ? agent_host : advertise;
  options.output_root = output_root;
  options.agent_path = agent_path;
  options.job_environment = JobEnvironment();
  options.poll_interval_ms = poll_ms;
  options.barrier_timeout_ms = barrier_s * 1000;
  options.heartbeat_interval_ms = heartbeat_ms;
  options.shutdown_grace_ms = grace_ms;
  options.scalar_limits = scalar_limits;
  options.no_auth = no_auth;
  options.munge_auth = munge_auth;
  options.munge_socket = munge_socket;
  options.munge_max_age_s = munge_max_age_s;
  options.munge_admin_group = munge_admin_group;
  if (munge_auth && no_auth) {
    spdlog::error("--munge-auth and --no-auth exclude each other");
    return 2;
  }
  if (site && no_auth) {
    // Every caller would be the admin, and could run jobs as anyone.
    spdlog::error("--site and --no-auth exclude each other: site mode runs jobs as the caller");
    return 2;
  }
  std::unique_ptr<tfslurm::Accounts> accounts;
  if (site) {
    // Tried once now rather than failing every submission later.
    if (auto can = tfslurm::system::CheckCanActAs(65534, 65534); !can.ok()) {
      spdlog::error("{}", can.message());
      return 1;
    }
    accounts = tfslurm::system::NewSiteAccounts();
    spdlog::info("site mode: each experiment's job runs as its owner's Unix account");
  } else {
    accounts = tfslurm::system::NewPersonalAccounts();
  }
  options.max_connections = max_connections;
  options.libslurm_release = libslurm_release;
  options.slurmctld_release = slurmctld_release;
  if (no_auth) {
    spdlog::warn(
        "--no-auth: every caller on {} acts as the local admin; use tokens on a shared machine",
        listen);
  }
  auto daemon = tfslurm::daemon::Daemon::Start(
      options, {**store, *slurm, *clock, *random, *files, *accounts});
  if (!daemon.ok()) {
    spdlog::error("{}", daemon.status().message());
    return 1;
  }
  int bound = (*daemon)->http_port();
  spdlog::info("REST API listening on http://{}:{}", http_host, bound);
  spdlog::info("agents connect to {} (gRPC; JSON at http://{}:{}/agent/v1/message)",
               (*daemon)->agent_address(), http_host, bound);
  spdlog::info("database {}, output root {}, agent {}", db, (*daemon)->output_root(), agent_path);
  if (!ready_file.empty()) {
    std::ofstream(ready_file)
        << nlohmann::json{{"http_port", bound}, {"agent_port", (*daemon)->agent_port()}}.dump()
        << "\n";
  }

  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {}: stopping; running jobs go on and are picked up at the next start", sig);
  (*daemon)->Stop();
  return 0;
}
