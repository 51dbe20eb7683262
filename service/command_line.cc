#include "service/command_line.h"

#include "base/build_info.h"
#include "service/config/config_file.h"

namespace tfslurm::command_line {
namespace {

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
  app.add_option("--advertise", d.advertise_host,
                 "host the agents use to reach the service; default: the agent listen host, or "
                 "this host's name when that is 0.0.0.0 or ::");
  app.add_option("--agent-relay", cl.agent_relay,
                 "node: the agents of a node reach the agent endpoint through one relay process "
                 "and one connection (a job of 16,384 tasks on 8-task nodes: 2,048 connections, "
                 "not 16,384); off: each agent connects itself (docs/design.md, \"The node's "
                 "relay\")")
      ->capture_default_str()
      ->check(CLI::IsMember({"node", "off"}));
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
  app.add_option("--slurm-conf", cl.slurm_conf,
                 "the cluster's slurm.conf, for libslurm and every job (sets SLURM_CONF); "
                 "default: SLURM_CONF, else libslurm's own (/etc/slurm/slurm.conf)");
  app.add_option("--log-level", cl.log_level, "trace|debug|info|warn|error")->capture_default_str();
}

// Which container runtime a spec's `runtime: auto` means, and the agent that
// runs inside pyxis's and Slurm's OCI containers (docs/containers.md).
void DefineContainerOptions(CLI::App& app, CommandLine& cl) {
  tfslurm::AgentLaunch& launch = cl.daemon.core.launch;
  app.add_option_function<std::string>(
         "--container-runtime",
         [&launch](const std::string& name) {
           launch.container_runtime = name == "pyxis"       ? tfslurm::ContainerRuntime::kPyxis
                                      : name == "enroot"    ? tfslurm::ContainerRuntime::kEnroot
                                      : name == "oci"       ? tfslurm::ContainerRuntime::kOci
                                      : name == "apptainer" ? tfslurm::ContainerRuntime::kApptainer
                                                            : tfslurm::ContainerRuntime::kAuto;
         },
         "the runtime of specs whose container.runtime is auto (docs/containers.md); "
         "default: none, and such a spec is refused")
      ->check(CLI::IsMember({"pyxis", "enroot", "oci", "apptainer"}));
  app.add_option("--container-agent-dir", launch.container_agent_dir,
                 "the self-contained agent (deploy/containers/agent-bundle.sh) that pyxis and "
                 "Slurm's OCI support run inside the container, at the same path on every node; "
                 "default: agent-bundle next to tfslurmd when there is one, else " +
                     std::string(tfslurm::base::InstallAgentBundleDir()));
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
               "slurmctld's (SLURM_CONF's cluster), then exit")
      ->configurable(false);
  app.add_flag("--print-config", cl.print_config,
               "print every setting in force (as a settings file) with where it came from: the "
               "command line, the --config file or the default; check them, then exit")
      ->configurable(false);
}

// The settings file (--config), the help's footer on settings and exit
// codes, and `tfslurmd backup --to FILE`.
void DefineSettingsAndBackup(CLI::App& app, CommandLine& cl) {
  tfslurm::config::AddConfigFile(app, tfslurm::config::kDefaultConfigFile);
  app.footer(
      "Settings: every option above is also a setting of the --config file (default " +
      std::string(tfslurm::config::kDefaultConfigFile) +
      "), by its name without the --: `key = value`; the command line wins over the file.\n"
      "Signals: SIGTERM and SIGINT stop it (running jobs go on); SIGHUP reloads the TLS "
      "certificate and key (tls-cert, tls-key).\n"
      "Exit codes: 0 stopped (SIGTERM, SIGINT) or done; 1 a failure that may pass (a port in "
      "use, slurmctld away: the packaged unit restarts it); 2 bad options or settings; 3 "
      "refused: the database is another tfslurmd's, newer than this one, or would not migrate "
      "(it is left as it was), or this Slurm or site mode cannot be worked with.");

  // tfslurmd backup --to FILE: a consistent copy while the service runs.
  auto* backup_cmd = app.add_subcommand(
      "backup",
      "copy the database (--db) to a new FILE with SQLite's online backup API: consistent, and "
      "safe while tfslurmd runs; the copy is checked (PRAGMA integrity_check)");
  backup_cmd->add_option("--to", cl.backup_to, "the new file (it must not exist)")->required();
  backup_cmd->fallthrough();
}

}  // namespace

void DefineOptions(CLI::App& app, CommandLine& cl) {
  DefineServiceOptions(app, cl);
  DefineContainerOptions(app, cl);
  DefineAccessOptions(app, cl);
  tfslurm::DefineTlsOptions(app, cl.daemon.tls, cl.tls);
  DefineSettingsAndBackup(app, cl);
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

}  // namespace tfslurm::command_line
