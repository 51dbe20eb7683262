// tfslurmd: the tfslurm service. Parses the command line into the daemon's
// options, checks the Slurm releases on both ends, takes the database's
// ownership lock, opens the store and libslurm, and hands them to the
// daemon's wiring (service/daemon/daemon.h: core and the two listeners,
// REST + agents), then runs until SIGTERM/SIGINT.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
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
#include "service/tls_command.h"

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
  // Site mode: the PATH every job gets (not tfslurmd's, which is root's).
  std::string job_path = "/usr/local/bin:/usr/bin:/bin";
  // Site mode without slurm.conf's PrivateData=jobs: refused unless given.
  bool allow_visible_jobs = false;
  bool allow_root = false;
  bool show_version = false;
  // tfslurmd token create --user NAME [--admin]
  bool create_token = false;
  std::string token_user;
  bool token_admin = false;
  tfslurm::TlsCommandLine tls;
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

// What every job's environment starts from (Slurm gives a job submitted
// through libslurm exactly the environment submitted, plus its SLURM_*
// variables: docs/site-deployment.md). Personal mode: tfslurmd's own, the
// jobs' account being tfslurmd's. Site mode: nothing of root's but its
// Slurm configuration and language; a fixed PATH, and no LD_LIBRARY_PATH, so
// that no directory of root's environment reaches another user's job; the
// owner's HOME, USER and LOGNAME come with the account (RunAs::identity_env).
std::vector<std::string> JobEnvironment(bool site, const std::string& job_path) {
  std::vector<std::string> env;
  const std::vector<const char*> names =
      site ? std::vector<const char*>{"LANG", "SLURM_CONF"}
           : std::vector<const char*>{"PATH",    "HOME",       "LANG",           "USER",
                                      "LOGNAME", "SLURM_CONF", "LD_LIBRARY_PATH"};
  for (const char* name : names)
    if (const char* v = getenv(name)) env.push_back(std::string(name) + "=" + v);
  if (site) env.push_back("PATH=" + job_path);
  return env;
}

// Where tfslurmd listens, keeps its files and finds the agent, and how
// often it polls and times out (each option bound to its field, showing
// its default).
void DefineServiceOptions(CLI::App& app, CommandLine& cl) {
  DaemonOptions& d = cl.daemon;
  tfslurm::CoreConfig& core = d.core;
  core.output_root = "tfslurm-output";
  cl.listen = d.http_host + ":" + std::to_string(d.http_port);
  app.add_option("--listen", cl.listen, "REST API address HOST:PORT (port 0: any free port)")
      ->capture_default_str();
  app.add_option(
      "--agent-listen", d.agent_listen,
      "agent endpoint (gRPC) HOST:PORT; default: every address, port 8081 (the agents run on "
      "the compute nodes), told to them as this host's name (--advertise). Keep it fixed: "
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
                 "host the agents use to reach the service; default: the agent listen host, or "
                 "this host's name when that is 0.0.0.0 or ::");
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
  app.add_option_function<int64_t>(
         "--reconnect-window-s", [&core](int64_t s) { core.reconnect_window_ms = s * 1000; },
         "how long a running task may go unheard (its agent silent or out of reach) before it is "
         "gone and its attempt restarts; at least 4 heartbeat intervals (docs/restarts.md, "
         "\"Network faults\")")
      ->default_str(std::to_string(core.reconnect_window_ms / 1000))
      ->check(CLI::Range(1, 3600));
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
}

// Who may call tfslurmd and as which account jobs run.
void DefineAccessOptions(CLI::App& app, CommandLine& cl) {
  DaemonOptions& d = cl.daemon;
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
  app.add_option("--job-path", cl.job_path,
                 "site mode: the PATH of every job (it must find srun on the compute nodes); "
                 "tfslurmd's own PATH is root's and is not passed on")
      ->capture_default_str();
  app.add_flag("--allow-visible-jobs", cl.allow_visible_jobs,
               "site mode: start although slurm.conf lacks PrivateData=jobs, so that every user's "
               "squeue shows every experiment's id in its job name (refused without it)");
  app.add_flag("--allow-root", cl.allow_root,
               "run as root without --site anyway: every token holder's programs then run as "
               "root (refused without it; as Jupyter's --allow-root)");
  app.add_option("--max-connections", d.gate.max_threads,
                 "requests served at once (one thread each); a request waits for none until it "
                 "has arrived whole")
      ->capture_default_str();
  app.add_option("--max-waiting-connections", d.gate.max_waiting,
                 "connections whose request has not all arrived; past it the oldest is closed")
      ->capture_default_str()
      ->check(CLI::Range(16, 10000000));
  app.add_option_function<int64_t>(
         "--header-timeout-s", [&d](int64_t s) { d.gate.header_timeout = std::chrono::seconds(s); },
         "a request's line and header fields must arrive within this of the connection (408)")
      ->default_str("10")
      ->check(CLI::Range(1, 3600));
  app.add_option_function<int64_t>(
         "--request-timeout-s",
         [&d](int64_t s) { d.gate.request_timeout = std::chrono::seconds(s); },
         "a whole request, its body included, must arrive within this of the connection (408)")
      ->default_str("30")
      ->check(CLI::Range(1, 3600));
  app.add_option("--log-followers", d.max_log_followers,
                 "log follow responses (tfctl logs -f) at once; more get 429")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--log-followers-per-user", d.max_log_followers_per_user,
                 "log follow responses of one user at once; more get 429")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--max-tasks-per-experiment", d.core.limits.max_tasks,
                 "the most tasks (ranks) one experiment may have; a larger spec is refused. "
                 "Every task's agent holds a connection, so it must fit the process's file "
                 "descriptors with 1024 to spare (docs/site-deployment.md, \"How large an "
                 "experiment may be\")")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-open-sweeps-per-user", d.max_open_sweeps_per_owner,
                 "sweeps of one user running at once; another is refused (429)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_flag("--version", cl.show_version,
               "print tfslurmd's version and commit, the libslurm release it was built with, and "
               "slurmctld's (SLURM_CONF's cluster), then exit");
}

// Binds every option straight to its field, showing the field's default.
void DefineOptions(CLI::App& app, CommandLine& cl) {
  DefineServiceOptions(app, cl);
  DefineAccessOptions(app, cl);
  tfslurm::DefineTlsOptions(app, cl.daemon.tls, cl.tls);
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
  fflush(stdout);
  // In a child process: libslurm ends the process that calls it where it
  // finds no Slurm configuration (a build or login host), and what is known
  // here is worth printing there too.
  auto releases = tfslurm::slurm::CheckSlurmReleasesInChild();
  if (releases.ok())
    printf("slurmctld %s\n", releases->slurmctld.c_str());
  else
    printf("slurmctld: %s\n", releases.status().message().c_str());
  return 0;
}

// --job-path: absolute directories only (an empty or relative entry would
// search the job's working directory). False after logging why.
bool CheckJobPath(const CommandLine& cl) {
  bool srun_found = false;
  for (size_t start = 0; start <= cl.job_path.size();) {
    size_t end = std::min(cl.job_path.find(':', start), cl.job_path.size());
    if (end == start || cl.job_path[start] != '/') {
      spdlog::error("--job-path must be absolute directories separated by ':', got '{}'",
                    cl.job_path);
      return false;
    }
    const std::string srun = cl.job_path.substr(start, end - start) + "/srun";
    srun_found = srun_found || access(srun.c_str(), X_OK) == 0;
    start = end + 1;
  }
  // The compute nodes may lay Slurm out otherwise than this host, so only a
  // warning; but where they are alike, every job would fail at its srun.
  if (cl.site && !srun_found)
    spdlog::warn(
        "site mode: no srun in --job-path {} on this host; every job fails unless the compute "
        "nodes have srun there (give --job-path the directory of srun on the compute nodes)",
        cl.job_path);
  return true;
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
  // The agents run on the compute nodes, which reach no loopback address
  // of this host: the endpoint listens on every address unless told
  // otherwise, whatever the REST API does (loopback, for --no-auth).
  if (!cl.agent_listen_given) d.agent_listen = "0.0.0.0:8081";
  std::string agent_host;
  int agent_port = 0;
  if (!SplitHostPort(d.agent_listen, &agent_host, &agent_port)) {
    spdlog::error("--agent-listen must be HOST:PORT, got '{}'", d.agent_listen);
    return 2;
  }
  if (d.no_auth && !tfslurm::IsLoopbackHost(d.http_host)) {
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
  if (d.gate.request_timeout < d.gate.header_timeout) {
    spdlog::error("--request-timeout-s ({}) must be at least --header-timeout-s ({})",
                  d.gate.request_timeout.count() / 1000, d.gate.header_timeout.count() / 1000);
    return 2;
  }
  if (!CheckJobPath(cl)) return 2;
  if (d.core.launch.agent_path.empty())
    d.core.launch.agent_path = SelfDirectory() + "/tfslurm-agent";
  if (d.core.launch.container_agent_dir.empty())
    d.core.launch.container_agent_dir = SelfDirectory() + "/agent-bundle";
  d.core.job_environment = JobEnvironment(cl.site, cl.job_path);
  if (int bad = tfslurm::CheckTransportSecurity(d, cl.tls)) return bad;
  if (cl.site) {
    // Each agent proves its uid with a MUNGE credential when it registers
    // (docs/security.md, "Agents: the attempt secret").
    d.core.agents_prove_uid = true;
    d.core.job_environment.push_back("TFSLURM_PROVE_UID=munge");
    // The nodes' munged where tfslurmd's is not at libmunge's default (one
    // socket on a shared file system, as on the local test cluster).
    const char* socket = getenv("TFSLURM_MUNGE_SOCKET");
    if (!d.munge_socket.empty()) socket = d.munge_socket.c_str();
    if (socket) d.core.job_environment.push_back(std::string("TFSLURM_MUNGE_SOCKET=") + socket);
  }
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

// Site mode: the REST API answers another user's experiment as a missing one,
// which is worth nothing if squeue shows every job's name (tfx-<id>-a<N>)
// to everyone. Refused (exit 2) unless slurm.conf has PrivateData=jobs or
// --allow-visible-jobs says to go on; a slurmctld that does not answer is a
// warning (the release check already waits for it).
bool CheckJobsArePrivate(const CommandLine& cl) {
  if (!cl.site) return true;
  auto hidden = tfslurm::slurm::JobsArePrivate();
  if (!hidden.ok()) {
    spdlog::warn(
        "site mode: cannot tell whether slurm.conf has PrivateData=jobs ({}); without "
        "it every user's squeue shows every experiment's id",
        hidden.status().message());
    return true;
  }
  if (*hidden) return true;
  if (cl.allow_visible_jobs) {
    spdlog::warn(
        "site mode without PrivateData=jobs in slurm.conf (--allow-visible-jobs): every "
        "user's squeue shows every experiment's id in its job name");
    return true;
  }
  spdlog::error(
      "site mode needs PrivateData=jobs in slurm.conf: without it every user's squeue shows every "
      "job's name, tfx-<experiment id>-a<attempt>, and so every user's experiment ids, which the "
      "REST API hides (docs/site-deployment.md). Add it (scontrol reconfigure), or pass "
      "--allow-visible-jobs to start anyway");
  return false;
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
  if (!CheckJobsArePrivate(cl)) return 2;
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
  sigaddset(&stop_signals, SIGHUP);  // reloads the TLS certificate
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
  const char* scheme = (*daemon)->tls() ? "https" : "http";
  spdlog::info("REST API listening on {}://{}:{}", scheme, d.http_host, bound);
  spdlog::info("agents connect to {} (gRPC{}; JSON at {}://{}:{}/agent/v1/message)",
               (*daemon)->agent_address(), (*daemon)->tls() ? " over TLS" : "", scheme, d.http_host,
               bound);
  tfslurm::LogTransportSecurity(d, **daemon);
  spdlog::info("database {}, output root {}, agent {}", cl.db, (*daemon)->output_root(),
               d.core.launch.agent_path);
  if (!cl.ready_file.empty()) {
    std::ofstream(cl.ready_file)
        << nlohmann::json{{"http_port", bound}, {"agent_port", (*daemon)->agent_port()}}.dump()
        << "\n";
  }

  int sig = 0;
  while (sigwait(&stop_signals, &sig) == 0 && sig == SIGHUP) {
    if (!(*daemon)->tls()) {
      spdlog::info("SIGHUP: nothing to reload (no TLS)");
      continue;
    }
    auto reloaded = (*daemon)->ReloadTls();
    if (reloaded.ok())
      spdlog::info("SIGHUP: TLS certificate reloaded; new connections get {}", *reloaded);
    else
      spdlog::error("SIGHUP: TLS certificate not reloaded, still serving the old one: {}",
                    reloaded.status().message());
  }
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
  cl.daemon.max_tasks_given = app.count("--max-tasks-per-experiment") > 0;
  if (cl.create_token) return CreateToken(cl);
  if (cl.tls.init) return tfslurm::RunTlsInit(cl.tls);
  if (cl.show_version) return PrintVersion();
  spdlog::set_level(spdlog::level::from_str(cl.log_level));
  if (int bad = CompleteOptions(cl)) return bad;
  return RunDaemon(cl);
}
