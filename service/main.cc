// tfslurmd: the tfslurm service. Parses the command line and the settings
// file (service/config/config_file.h) into the daemon's options, checks the
// Slurm releases on both ends, takes the database's ownership lock, opens
// the store and libslurm, and hands them to the daemon's wiring
// (service/daemon/daemon.h: core and the two listeners, REST + agents), then
// runs until SIGTERM/SIGINT. Under systemd (Type=notify) it says READY=1
// once both ports listen.
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/build_info.h"
#include "service/command_line.h"
#include "service/config/config_file.h"
#include "service/core/tokens.h"
#include "service/daemon/daemon.h"
#include "service/slurm/libslurm_client.h"
#include "service/slurm/release_window.h"
#include "service/store/ownership_lock.h"
#include "service/store/sqlite_backup.h"
#include "service/store/sqlite_store.h"
#include "service/system/accounts.h"
#include "service/system/system.h"
#include "service/tls_command.h"
#include "tls/openssl_through_exit.h"

namespace {

using tfslurm::command_line::CommandLine;
using tfslurm::command_line::DefineOptions;
using tfslurm::command_line::kExitFailed;
using tfslurm::command_line::kExitOk;
using tfslurm::command_line::kExitRefused;
using tfslurm::command_line::kExitUsage;
using tfslurm::daemon::DaemonOptions;

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
    return kExitUsage;
  }
  // The agents run on the compute nodes, which reach no loopback address
  // of this host: the endpoint listens on every address unless told
  // otherwise, whatever the REST API does (loopback, for --no-auth).
  if (!cl.agent_listen_given) d.agent_listen = "0.0.0.0:8081";
  std::string agent_host;
  int agent_port = 0;
  if (!SplitHostPort(d.agent_listen, &agent_host, &agent_port)) {
    spdlog::error("--agent-listen must be HOST:PORT, got '{}'", d.agent_listen);
    return kExitUsage;
  }
  if (d.no_auth && !tfslurm::IsLoopbackHost(d.http_host)) {
    spdlog::error("--no-auth is only allowed on a loopback address; --listen is {}", cl.listen);
    return kExitUsage;
  }
  if (d.munge_auth && d.no_auth) {
    spdlog::error("--munge-auth and --no-auth exclude each other");
    return kExitUsage;
  }
  if (cl.site && d.no_auth) {
    // Every caller would be the admin, and could run jobs as anyone.
    spdlog::error("--site and --no-auth exclude each other: site mode runs jobs as the caller");
    return kExitUsage;
  }
  if (d.gate.request_timeout < d.gate.header_timeout) {
    spdlog::error("--request-timeout-s ({}) must be at least --header-timeout-s ({})",
                  d.gate.request_timeout.count() / 1000, d.gate.header_timeout.count() / 1000);
    return kExitUsage;
  }
  if (!CheckJobPath(cl)) return kExitUsage;
  if (d.core.launch.agent_path.empty())
    d.core.launch.agent_path = tfslurm::base::SelfDirectory() + "/tfslurm-agent";
  if (d.core.launch.container_agent_dir.empty())
    d.core.launch.container_agent_dir =
        tfslurm::base::BesideSelfOr("agent-bundle", tfslurm::base::InstallAgentBundleDir());
  d.core.job_environment = JobEnvironment(cl.site, cl.job_path);
  if (cl.agent_relay == "node") d.core.job_environment.push_back("TFSLURM_AGENT_RELAY=node");
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

// Personal mode runs every job as tfslurmd's own account: as root, every
// token holder's program would run as uid 0, and their model_dir be made as
// root. Checked only when the daemon is to run (--print-config may be run
// as root to check a file).
bool RootWithoutSite(const CommandLine& cl) {
  if (geteuid() != 0 || cl.site || cl.allow_root) return false;
  spdlog::error(
      "tfslurmd is running as root without --site: every token holder's program would run as "
      "root (personal mode runs jobs as tfslurmd's own account). Use --site, where each "
      "experiment runs as its owner's Unix account (docs/site-deployment.md); or run tfslurmd "
      "as an ordinary user; or pass --allow-root to run jobs as root anyway");
  return true;
}

// The options whose defaults follow from others, set to what is in force,
// for --print-config.
void ShowDerivedDefaults(CLI::App& app, const CommandLine& cl) {
  const DaemonOptions& d = cl.daemon;
  app.get_option("--agent-listen")->default_str(d.agent_listen);
  app.get_option("--agent-path")->default_str(d.core.launch.agent_path);
  if (d.advertise_host.empty())
    app.get_option("--advertise")->default_str(d.agent_listen.substr(0, d.agent_listen.rfind(':')));
}

int Backup(const CommandLine& cl) {
  auto copy = tfslurm::store::BackupDatabase(cl.db, cl.backup_to);
  if (!copy.ok()) {
    fprintf(stderr, "tfslurmd backup: %s\n", copy.status().message().c_str());
    return kExitFailed;
  }
  printf("%s: a copy of %s at schema version %lld, %lld pages, %lld bytes; integrity_check ok\n",
         cl.backup_to.c_str(), cl.db.c_str(), static_cast<long long>(copy->schema_version),
         static_cast<long long>(copy->pages), static_cast<long long>(copy->bytes));
  return kExitOk;
}

// A tfslurmd whose libslurm cannot talk to this slurmctld would fail every
// poll and submission: refused now, naming both releases (exit 3). A
// slurmctld that is only down is waited for, as the polls always have.
bool CheckSlurmReleases(DaemonOptions& d) {
  d.libslurm_release = tfslurm::slurm::LibslurmRelease();
  auto releases = tfslurm::slurm::CheckSlurmReleases();
  if (releases.ok()) {
    d.slurmctld_release = releases->slurmctld;
    auto slurmctld = tfslurm::slurm::ParseSlurmRelease(releases->slurmctld);
    if (slurmctld && !tfslurm::slurm::OciRunsAttemptBundles(*slurmctld))
      d.core.launch.oci_unable_slurm_release = releases->slurmctld;
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

// Until SIGTERM or SIGINT, which it returns; SIGHUP reloads the TLS
// certificate and key (`systemctl reload tfslurmd`).
int WaitForStopSignal(const sigset_t& signals, tfslurm::daemon::Daemon& daemon) {
  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) {
    if (!daemon.tls()) {
      spdlog::info("SIGHUP: nothing to reload (no TLS)");
      continue;
    }
    auto reloaded = daemon.ReloadTls();
    if (reloaded.ok())
      spdlog::info("SIGHUP: TLS certificate reloaded; new connections get {}", *reloaded);
    else
      spdlog::error("SIGHUP: TLS certificate not reloaded, still serving the old one: {}",
                    reloaded.status().message());
  }
  return sig;
}

int RunDaemon(CommandLine& cl) {
  DaemonOptions& d = cl.daemon;
  if (!CheckSlurmReleases(d)) return kExitRefused;
  if (!CheckJobsArePrivate(cl)) return kExitUsage;
  // Before anything else touches the database, a directory or a port: a second daemon
  // on this database must change nothing (store/ownership_lock.h).
  auto ownership = tfslurm::store::DatabaseOwnership::Acquire(cl.db);
  if (!ownership.ok()) {
    spdlog::error("{}", ownership.status().message());
    return ownership.status().code() == tfslurm::StatusCode::kUnavailable ? kExitFailed
                                                                          : kExitRefused;
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
    // A newer database, or a migration that failed: the database is as it
    // was, and starting again would fail the same way.
    spdlog::error("{}", store.status().message());
    return store.status().code() == tfslurm::StatusCode::kFailedPrecondition ? kExitRefused
                                                                             : kExitFailed;
  }
  auto slurm = tfslurm::slurm::NewLibslurmClient();
  auto clock = tfslurm::system::NewSystemClock();
  auto random = tfslurm::system::NewSystemRandomness();
  auto files = tfslurm::system::NewLocalFiles();
  auto accounts = MakeAccounts(cl.site);
  if (!accounts) return kExitRefused;
  if (d.no_auth) {
    spdlog::warn(
        "--no-auth: every caller on {} acts as the local admin; use tokens on a shared machine",
        cl.listen);
  }
  auto daemon =
      tfslurm::daemon::Daemon::Start(d, {**store, *slurm, *clock, *random, *files, *accounts});
  if (!daemon.ok()) {
    spdlog::error("{}", daemon.status().message());
    return kExitFailed;
  }
  int bound = (*daemon)->http_port();
  const char* scheme = (*daemon)->tls() ? "https" : "http";
  spdlog::info("REST API listening on {}://{}:{}", scheme, d.http_host, bound);
  spdlog::info("agents connect to {} (gRPC{}; JSON at {}://{}:{}/agent/v1/message)",
               (*daemon)->agent_address(), (*daemon)->tls() ? " over TLS" : "", scheme, d.http_host,
               bound);
  tfslurm::LogTransportSecurity(d, **daemon);
  spdlog::info("database {}, output root {}, agent {} (in containers: {})", cl.db,
               (*daemon)->output_root(), d.core.launch.agent_path,
               d.core.launch.container_agent_dir);
  if (!cl.ready_file.empty()) {
    std::ofstream(cl.ready_file)
        << nlohmann::json{{"http_port", bound}, {"agent_port", (*daemon)->agent_port()}}.dump()
        << "\n";
  }
  // systemd's Type=notify: `systemctl start` returns now, and fails if
  // tfslurmd ended before this (a refused database, a port in use).
  sd_notifyf(0, "READY=1\nSTATUS=REST on %s:%d, agents on %s", d.http_host.c_str(), bound,
             (*daemon)->agent_address().c_str());

  int sig = WaitForStopSignal(stop_signals, **daemon);
  spdlog::info("signal {}: stopping; running jobs go on and are picked up at the next start", sig);
  sd_notify(0, "STOPPING=1");
  (*daemon)->Stop();
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  tfslurm::tls::KeepOpenSslThroughExit();
  CLI::App app{"tfslurmd: runs distributed TensorFlow experiments on Slurm"};
  CommandLine cl;
  DefineOptions(app, cl);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints and exits 0; every other parse error is a usage error.
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  if (auto bad = tfslurm::config::CheckFileSettings(app); !bad.ok()) {
    fprintf(stderr, "tfslurmd: %s\n", bad.message().c_str());
    return kExitUsage;
  }
  cl.agent_listen_given = app.count("--agent-listen") > 0;
  cl.daemon.max_tasks_given = app.count("--max-tasks-per-experiment") > 0;
  // Before libslurm reads its configuration (--version too), and before the
  // jobs' environment is taken from this process's.
  if (!cl.slurm_conf.empty()) setenv("SLURM_CONF", cl.slurm_conf.c_str(), 1);
  // A command's answer is its stdout (a token is read from it by scripts):
  // what it logs on the way, such as a new database's migration, goes to
  // stderr.
  if (cl.create_token || cl.tls.init || !cl.backup_to.empty())
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  if (cl.create_token) return CreateToken(cl);
  if (cl.tls.init) return tfslurm::RunTlsInit(cl.tls);
  if (!cl.backup_to.empty()) return Backup(cl);
  if (cl.show_version) return PrintVersion();
  spdlog::set_level(spdlog::level::from_str(cl.log_level));
  if (int bad = CompleteOptions(cl)) return bad;
  if (cl.print_config) {
    ShowDerivedDefaults(app, cl);
    auto given = tfslurm::config::SetOnCommandLine(
        [](CLI::App& probe) {
          static CommandLine unused;
          DefineOptions(probe, unused);
        },
        argc, argv);
    printf("%s", tfslurm::config::SettingsReport(app, given).c_str());
    return kExitOk;
  }
  if (RootWithoutSite(cl)) return kExitUsage;
  return RunDaemon(cl);
}
