// tfslurmd's TLS on the command line: --tls-cert, --tls-key, --tls-ca and
// --insecure-plaintext; the rule that plaintext stays on loopback; and the
// `tfslurmd tls init` subcommand (tls/tls_init.h), which makes a CA and a
// server certificate for this host.
//
// Thread safety: for main's thread, before the daemon starts.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "service/daemon/daemon.h"

namespace tfslurm {

struct TlsCommandLine {
  bool insecure_plaintext = false;
  // tfslurmd tls init
  bool init = false;
  std::string init_dir = "/etc/tfslurm/tls";
  std::vector<std::string> init_names;
  std::vector<std::string> init_addresses;
  int init_days = 397;
  std::string init_user;  // the keys' owner: tfslurmd's user
};

// The options on tfslurmd itself, and the `tls init` subcommand.
void DefineTlsOptions(CLI::App& app, daemon::TlsOptions& tls, TlsCommandLine& cl);

// 0, or 2 after logging why: plaintext on an address other than loopback
// without --insecure-plaintext; half of a cert/key pair.
int CheckTransportSecurity(const daemon::DaemonOptions& d, const TlsCommandLine& cl);

// What the start log says about the transport: TLS and its certificate, or
// what plaintext costs.
void LogTransportSecurity(const daemon::DaemonOptions& d, const daemon::Daemon& daemon);

// `tfslurmd tls init`: exit code 0, 1 (it failed, and says why) or 2.
int RunTlsInit(const TlsCommandLine& cl);

bool IsLoopbackHost(const std::string& host);

}  // namespace tfslurm
