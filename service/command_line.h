// tfslurmd's command line: every option and subcommand (token create,
// backup, tls init), each bound to its field of CommandLine, and the exit
// codes. Every option is also a setting of the --config file
// (service/config/config_file.h). main.cc checks the options against each
// other and runs what they ask for.
//
// Thread safety: for main's thread, before the daemon starts.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "service/daemon/daemon.h"
#include "service/tls_command.h"

namespace tfslurm::command_line {

using tfslurm::daemon::DaemonOptions;

// How tfslurmd ends. The packaged unit restarts it on kFailed only
// (RestartPreventExitStatus=2 3): starting again cannot mend the others.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,   // something that may pass: a port in use, a disk, slurmctld
  kExitUsage = 2,    // a bad option, setting or combination of them
  kExitRefused = 3,  // the database is another tfslurmd's, newer than this one, or would not
                     // migrate; or this Slurm or this account cannot be worked with
};

// Everything the command line says. The defaults are the daemon's and
// core's own (DaemonOptions, CoreConfig): each is written once, there.
struct CommandLine {
  DaemonOptions daemon;
  std::string listen;  // HOST:PORT, split into daemon.http_host/http_port
  bool agent_listen_given = false;
  std::string db = "tfslurm.db";
  std::string ready_file;
  std::string log_level = "info";
  std::string slurm_conf;  // "" keeps SLURM_CONF (or libslurm's default)
  bool site = false;
  // --agent-relay: "node" (a node's agents share one connection through the
  // node's relay, agent/relay/) or "off" (one connection per agent).
  std::string agent_relay = "node";
  // Site mode: the PATH every job gets (not tfslurmd's, which is root's).
  std::string job_path = "/usr/local/bin:/usr/bin:/bin";
  // Site mode without slurm.conf's PrivateData=jobs: refused unless given.
  bool allow_visible_jobs = false;
  bool allow_root = false;
  bool show_version = false;
  bool print_config = false;
  // tfslurmd backup --to FILE
  std::string backup_to;
  // tfslurmd token create --user NAME [--admin]
  bool create_token = false;
  std::string token_user;
  bool token_admin = false;
  tfslurm::TlsCommandLine tls;
};

// Binds every option straight to its field, showing the field's default.
void DefineOptions(CLI::App& app, CommandLine& cl);

}  // namespace tfslurm::command_line
