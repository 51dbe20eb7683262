// tfslurmd: the tfslurm service. Parses the command line into the daemon's
// options, checks the Slurm releases on both ends, takes the database's
// ownership lock, opens the store and libslurm, and hands them to the
// daemon's wiring (service/daemon/daemon.h: core and the two listeners,
// REST + agents), then runs until SIGTERM/SIGINT.
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

using tfslurm::daemon::DaemonOptions;

// Everything the command line says. The defaults are the daemon's and
// core's own (DaemonOptions, CoreConfig): each is written once, there.
struct CommandLine {
  DaemonOptions daemon;
  std::string listen;  // HOST:PORT, split into daemon.http_host/http_port
  bool agent_listen_given = false;
  std::string db = "tfslurm.db";
  std::string ready_file;
  std::string log_level = "info";
  bool site = false;
  bool allow_root = false;
  bool show_version = false;
  // tfslurmd token create --user NAME [--admin]
  bool create_token = false;
  std::string token_user;
  bool token_admin = false;
};

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

// Binds every option straight to its field, showing the field's default.
void DefineOptions(CLI::App& app, CommandLine& cl) {
  DaemonOptions& d = cl.daemon;
  tfslurm::CoreConfig& core = d.core;
  core.output_root = "tfslurm-output";
  cl.listen = d.http_host + ":" + std::to_string(d.http_port);
  app.add_option("--listen", cl.listen, "REST API address HOST:PORT (port 0: any free port)")
      ->capture_default_str();
  app.add_option(
      "--agent-listen", d.agent_listen,
      "agent endpoint (gRPC) HOST:PORT; default: the REST host, port 8081. Keep it fixed: "
      "running jobs reconnect to it after a restart of the service");
  app.add_option("--db", cl.db, "SQLite database file")->capture_default_str();
  app.add_option("--output-root", core.output_root,
                 "directory for experiments' model dirs and logs")
      ->capture_default_str();
  app.add_option("--agent-path", core.launch.agent_path,
                 "tfslurm-agent as the compute nodes see it; default: next to tfslurmd");
  app.add_option_function<std::string>(
         "--container-runtime",
         [&core](const std::string& name) {
           core.launch.container_runtime = name == "pyxis"    ? tfslurm::ContainerRuntime::kPyxis
                                           : name == "enroot" ? tfslurm::ContainerRuntime::kEnroot
                                           : name == "oci"    ? tfslurm::ContainerRuntime::kOci
                                           : name == "apptainer"
                                               ? tfslurm::ContainerRuntime::kApptainer
                                               : tfslurm::ContainerRuntime::kAuto;
         },
         "the runtime of specs whose container.runtime is auto (docs/containers.md); "
         "default: none, and such a spec is refused")
      ->check(CLI::IsMember({"pyxis", "enroot", "oci", "apptainer"}));
  app.add_option("--container-agent-dir", core.launch.container_agent_dir,
                 "the self-contained agent (deploy/containers/agent-bundle.sh) that pyxis and "
                 "Slurm's OCI support run inside the container, at the same path on every node; "
                 "default: agent-bundle next to tfslurmd");
  app.add_option("--advertise", d.advertise_host,
                 "host the agents use to reach the service; default: the agent listen host");
  app.add_option("--ready-file", cl.ready_file,
                 "write {\"http_port\", \"agent_port\"} here once listening");
  app.add_option("--poll-interval-ms", core.poll_interval_ms,
                 "how often Slurm is polled (one RPC per poll)")
      ->capture_default_str();
  app.add_option_function<int64_t>(
         "--barrier-timeout-s", [&core](int64_t s) { core.barrier_timeout_ms = s * 1000; },
         "time for every task to register after the job starts")
      ->default_str(std::to_string(core.barrier_timeout_ms / 1000));
  app.add_option("--heartbeat-ms", core.heartbeat_interval_ms, "agents' heartbeat interval")
      ->capture_default_str();
  app.add_option("--shutdown-grace-ms", core.shutdown_grace_ms,
                 "SIGTERM -> SIGKILL grace when reaping tasks")
      ->capture_default_str();
  app.add_option("--scalar-points-per-tag", core.scalar_limits.points_per_tag,
                 "training scalars kept per tag of an experiment; past it a tag is thinned to "
                 "half, evenly")
      ->capture_default_str()
      ->check(CLI::Range(10, 1000000));
  app.add_option("--scalar-tags", core.scalar_limits.tags,
                 "training scalar tags kept per experiment; more are not kept")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_option_function<int64_t>(
         "--retain-ended-days",
         [&core](int64_t days) { core.retain_ended_ms = days * 24 * 60 * 60 * 1000; },
         "delete from the database the experiments that ended more than this many days ago "
         "(their rows, not their files); 0 keeps them forever")
      ->default_str("0")
      ->check(CLI::Range(0, 36500));
  app.add_option("--log-level", cl.log_level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_flag("--no-auth", d.no_auth,
               "single-user mode: no tokens, every caller is the local admin; only with a loopback "
               "--listen");
  app.add_flag("--munge-auth", d.munge_auth,
               "also accept 'Authorization: MUNGE <credential>' (tfctl without a token): the "
               "credential's uid is the user (docs/security.md)");
  app.add_option("--munge-socket", d.munge_socket, "munged's socket (default: libmunge's)");
  app.add_option("--munge-max-age-s", d.munge_max_age_s,
                 "MUNGE credentials older than this are refused")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  app.add_option("--munge-admin-group", d.munge_admin_group,
                 "members of this Unix group are admins when they use MUNGE (default: nobody)");
  app.add_flag("--site", cl.site,
               "site mode (as root): each experiment's job runs as its owner's Unix account, and "
               "its directories belong to the owner (docs/site-deployment.md)");
  app.add_flag("--allow-root", cl.allow_root,
               "run as root without --site anyway: every token holder's programs then run as "
               "root (refused without it; as Jupyter's --allow-root)");
  app.add_option("--max-connections", d.max_connections,
                 "connections served at once (one thread each)")
      ->capture_default_str();
  app.add_flag("--version", cl.show_version,
               "print tfslurmd's version and commit, the libslurm release it was built with, and "
               "slurmctld's (SLURM_CONF's cluster), then exit");

  // tfslurmd token create --user NAME [--admin]: prints a new API token once.
  auto* token_cmd = app.add_subcommand("token", "manage API tokens");
  auto* create_cmd = token_cmd->add_subcommand(
      "create", "create a token; it is printed once, only its hash is kept");
  create_cmd->add_option("--user", cl.token_user, "the user the token acts as")->required();
  create_cmd->add_flag("--admin", cl.token_admin, "may see and change every user's experiments");
  create_cmd->callback([&cl] { cl.create_token = true; });
  token_cmd->require_subcommand(1);
  // `tfslurmd token create --user alice --db FILE`: --db is the parent's.
  token_cmd->fallthrough();
  create_cmd->fallthrough();
}

int CreateToken(const CommandLine& cl) {
  auto store = tfslurm::store::OpenSqliteStore(cl.db);
  if (!store.ok()) {
    fprintf(stderr, "tfslurmd: %s\n", store.status().message().c_str());
    return 1;
  }
  auto clock = tfslurm::system::NewSystemClock();
  auto random = tfslurm::system::NewSystemRandomness();
  auto token = tfslurm::Tokens(**store, *random, *clock).Create(cl.token_user, cl.token_admin);
  if (!token.ok()) {
    fprintf(stderr, "tfslurmd: %s\n", token.status().message().c_str());
    return 1;
  }
  printf("%s\n", token->c_str());
  fprintf(stderr, "token for %s%s created; it is shown only now\n", cl.token_user.c_str(),
          cl.token_admin ? " (admin)" : "");
  return 0;
}

int PrintVersion() {
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

// The options that depend on each other, checked; fills in what follows
// from them (the REST host and port, the agent listen address and path).
// Returns the exit code for a bad combination, or 0.
int CompleteOptions(CommandLine& cl) {
  DaemonOptions& d = cl.daemon;
  if (!SplitHostPort(cl.listen, &d.http_host, &d.http_port)) {
    spdlog::error("--listen must be HOST:PORT, got '{}'", cl.listen);
    return 2;
  }
  // The agent endpoint defaults to the REST host.
  if (!cl.agent_listen_given) d.agent_listen = d.http_host + ":8081";
  std::string agent_host;
  int agent_port = 0;
  if (!SplitHostPort(d.agent_listen, &agent_host, &agent_port)) {
    spdlog::error("--agent-listen must be HOST:PORT, got '{}'", d.agent_listen);
    return 2;
  }
  if (d.no_auth && d.http_host != "127.0.0.1" && d.http_host != "localhost" &&
      d.http_host != "::1" && d.http_host.rfind("127.", 0) != 0) {
    spdlog::error("--no-auth is only allowed on a loopback address; --listen is {}", cl.listen);
    return 2;
  }
  if (d.munge_auth && d.no_auth) {
    spdlog::error("--munge-auth and --no-auth exclude each other");
    return 2;
  }
  if (cl.site && d.no_auth) {
    // Every caller would be the admin, and could run jobs as anyone.
    spdlog::error("--site and --no-auth exclude each other: site mode runs jobs as the caller");
    return 2;
  }
  if (geteuid() == 0 && !cl.site && !cl.allow_root) {
    // Personal mode runs every job as tfslurmd's own account: as root, every
    // token holder's program would run as uid 0, and their model_dir be made
    // as root.
    spdlog::error(
        "tfslurmd is running as root without --site: every token holder's program would run as "
        "root (personal mode runs jobs as tfslurmd's own account). Use --site, where each "
        "experiment runs as its owner's Unix account (docs/site-deployment.md); or run tfslurmd "
        "as an ordinary user; or pass --allow-root to run jobs as root anyway");
    return 2;
  }
  if (d.core.launch.agent_path.empty())
    d.core.launch.agent_path = SelfDirectory() + "/tfslurm-agent";
  if (d.core.launch.container_agent_dir.empty())
    d.core.launch.container_agent_dir = SelfDirectory() + "/agent-bundle";
  d.core.job_environment = JobEnvironment();
  return 0;
}

// A tfslurmd whose libslurm cannot talk to this slurmctld would fail every
// poll and submission: refused now, naming both releases (exit 1). A
// slurmctld that is only down is waited for, as the polls always have.
bool CheckSlurmReleases(DaemonOptions& d) {
  d.libslurm_release = tfslurm::slurm::LibslurmRelease();
  auto releases = tfslurm::slurm::CheckSlurmReleases();
  if (releases.ok()) {
    d.slurmctld_release = releases->slurmctld;
    spdlog::info("tfslurmd {} (commit {}); libslurm {}, slurmctld {}",
                 tfslurm::base::TfslurmVersion(), tfslurm::base::TfslurmCommit(),
                 d.libslurm_release, d.slurmctld_release);
    return true;
  }
  if (releases.status().code() == tfslurm::StatusCode::kFailedPrecondition) {
    spdlog::error("{}", releases.status().message());
    return false;
  }
  spdlog::warn(
      "tfslurmd {} (commit {}); libslurm {}; slurmctld's release is not known: {}. Starting "
      "anyway: the polls retry until slurmctld answers",
      tfslurm::base::TfslurmVersion(), tfslurm::base::TfslurmCommit(), d.libslurm_release,
      releases.status().message());
  return true;
}

// The Unix accounts jobs run as: tfslurmd's own, or (--site) each owner's,
// after checking that this process can act as another account.
std::unique_ptr<tfslurm::Accounts> MakeAccounts(bool site) {
  if (!site) return tfslurm::system::NewPersonalAccounts();
  // Tried once now rather than failing every submission later.
  if (auto can = tfslurm::system::CheckCanActAs(65534, 65534); !can.ok()) {
    spdlog::error("{}", can.message());
    return nullptr;
  }
  spdlog::info("site mode: each experiment's job runs as its owner's Unix account");
  return tfslurm::system::NewSiteAccounts();
}

int RunDaemon(CommandLine& cl) {
  DaemonOptions& d = cl.daemon;
  if (!CheckSlurmReleases(d)) return 1;
  // Before anything else touches the database, a directory or a port: a second daemon
  // on this database must change nothing (store/ownership_lock.h).
  auto ownership = tfslurm::store::DatabaseOwnership::Acquire(cl.db);
  if (!ownership.ok()) {
    spdlog::error("{}", ownership.status().message());
    return 1;
  }

  // Signals are taken by sigwait below; block them in every thread (the
  // daemon's threads inherit this mask).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto store = tfslurm::store::OpenSqliteStore(cl.db);
  if (!store.ok()) {
    spdlog::error("{}", store.status().message());
    return 1;
  }
  auto slurm = tfslurm::slurm::NewLibslurmClient();
  auto clock = tfslurm::system::NewSystemClock();
  auto random = tfslurm::system::NewSystemRandomness();
  auto files = tfslurm::system::NewLocalFiles();
  auto accounts = MakeAccounts(cl.site);
  if (!accounts) return 1;
  if (d.no_auth) {
    spdlog::warn(
        "--no-auth: every caller on {} acts as the local admin; use tokens on a shared machine",
        cl.listen);
  }
  auto daemon =
      tfslurm::daemon::Daemon::Start(d, {**store, *slurm, *clock, *random, *files, *accounts});
  if (!daemon.ok()) {
    spdlog::error("{}", daemon.status().message());
    return 1;
  }
  int bound = (*daemon)->http_port();
  spdlog::info("REST API listening on http://{}:{}", d.http_host, bound);
  spdlog::info("agents connect to {} (gRPC; JSON at http://{}:{}/agent/v1/message)",
               (*daemon)->agent_address(), d.http_host, bound);
  spdlog::info("database {}, output root {}, agent {}", cl.db, (*daemon)->output_root(),
               d.core.launch.agent_path);
  if (!cl.ready_file.empty()) {
    std::ofstream(cl.ready_file)
        << nlohmann::json{{"http_port", bound}, {"agent_port", (*daemon)->agent_port()}}.dump()
        << "\n";
  }

  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {}: stopping; running jobs go on and are picked up at the next start", sig);
  (*daemon)->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tfslurmd: runs distributed TensorFlow experiments on Slurm"};
  CommandLine cl;
  DefineOptions(app, cl);
  CLI11_PARSE(app, argc, argv);
  cl.agent_listen_given = app.count("--agent-listen") > 0;
  if (cl.create_token) return CreateToken(cl);
  if (cl.show_version) return PrintVersion();
  spdlog::set_level(spdlog::level::from_str(cl.log_level));
  if (int bad = CompleteOptions(cl)) return bad;
  return RunDaemon(cl);
}
