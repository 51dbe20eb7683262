#include "service/tls_command.h"

#include <pwd.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>

#include "tls/tls_init.h"

namespace tfslurm {
namespace {

std::string HostOf(const std::string& host_port) {
  return host_port.substr(0, host_port.rfind(':'));
}

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void DefineInitCommand(CLI::App& app, TlsCommandLine& cl) {
  auto* tls_cmd = app.add_subcommand("tls", "TLS certificates for tfslurmd");
  auto* init = tls_cmd->add_subcommand(
      "init",
      "make a CA and a server certificate for this host (run again: a new server certificate "
      "from the same CA; then `kill -HUP` tfslurmd)");
  init->add_option("--dir", cl.init_dir, "where to write ca.pem, ca.key, server.pem, server.key")
      ->capture_default_str();
  init->add_option("--name", cl.init_names,
                   "a DNS name the service is reached by (repeat); default: this host's names "
                   "and addresses");
  init->add_option("--ip", cl.init_addresses, "an IP address the service is reached by (repeat)");
  init->add_option("--days", cl.init_days, "days the server certificate is valid")
      ->capture_default_str()
      ->check(CLI::Range(1, 3650));
  init->add_option("--user", cl.init_user,
                   "the Unix user the keys belong to (tfslurmd's); default: the caller");
  init->callback([&cl] { cl.init = true; });
  tls_cmd->require_subcommand(1);
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

void DefineTlsOptions(CLI::App& app, daemon::TlsOptions& tls, TlsCommandLine& cl) {
  app.add_option("--tls-cert", tls.cert_path,
                 "TLS certificate chain (PEM, leaf first) for both ports; reloaded on SIGHUP "
                 "(`tfslurmd tls init` makes one)");
  app.add_option("--tls-key", tls.key_path,
                 "the certificate's private key (PEM), readable by tfslurmd alone; reloaded on "
                 "SIGHUP");
  app.add_option("--tls-ca", tls.ca_path,
                 "CA bundle (PEM) the jobs' agents verify the service with; default: the compute "
                 "nodes' system trust store");
  app.add_flag("--insecure-plaintext", cl.insecure_plaintext,
               "serve without TLS on an address other than loopback: tokens, MUNGE credentials, "
               "attempt secrets and TF_CONFIG then cross the network readable by anyone on it");
  DefineInitCommand(app, cl);
}

int CheckTransportSecurity(const daemon::DaemonOptions& d, const TlsCommandLine& cl) {
  const daemon::TlsOptions& t = d.tls;
  if (t.cert_path.empty() != t.key_path.empty()) {
    spdlog::error("--tls-cert and --tls-key go together; got only {}",
                  t.cert_path.empty() ? "--tls-key" : "--tls-cert");
    return 2;
  }
  if (t.cert_path.empty() && !t.ca_path.empty()) {
    spdlog::error("--tls-ca is for a service with TLS: give --tls-cert and --tls-key too");
    return 2;
  }
  if (!t.cert_path.empty()) {
    if (cl.insecure_plaintext) {
      spdlog::error("--insecure-plaintext and --tls-cert exclude each other");
      return 2;
    }
    return 0;
  }
  std::vector<std::string> exposed;
  if (!IsLoopbackHost(d.http_host)) exposed.push_back("the REST API on " + d.http_host);
  if (!IsLoopbackHost(HostOf(d.agent_listen)))
    exposed.push_back("the agent endpoint on " + HostOf(d.agent_listen));
  if (exposed.empty() || cl.insecure_plaintext) return 0;
  std::string what = exposed[0] + (exposed.size() > 1 ? " and " + exposed[1] : "");
  spdlog::error(
      "refusing to serve {} without TLS: anyone who can read that network could take users' "
      "tokens and MUNGE credentials, and attempt secrets with which to act as any task. Give "
      "--tls-cert and --tls-key (`tfslurmd tls init` makes a CA and a certificate for this "
      "host), listen on loopback only, or accept the risk with --insecure-plaintext",
      what);
  return 2;
}

void LogTransportSecurity(const daemon::DaemonOptions& d, const daemon::Daemon& daemon) {
  if (daemon.tls()) {
    spdlog::info(
        "TLS on both ports: {}; agents verify it against {}; SIGHUP reloads {} and {}",
        daemon.TlsDescription(),
        d.tls.ca_path.empty() ? std::string("the nodes' system trust store") : d.tls.ca_path,
        d.tls.cert_path, d.tls.key_path);
    return;
  }
  if (IsLoopbackHost(d.http_host) && IsLoopbackHost(HostOf(d.agent_listen))) {
    spdlog::info("plaintext on loopback only: only processes on this host can reach tfslurmd");
    return;
  }
  spdlog::warn(
      "--insecure-plaintext: tfslurmd speaks plaintext on {} and {}. Anyone who can read that "
      "network reads every token and MUNGE credential (and acts as its user), every attempt "
      "secret (and reports exits, marks progress and takes over rendezvous as any task), and "
      "every TF_CONFIG; anyone on the path can change what either side says. Use "
      "--tls-cert/--tls-key (docs/security.md)",
      d.http_host + ":" + std::to_string(daemon.http_port()), daemon.agent_address());
}

int RunTlsInit(const TlsCommandLine& cl) {
  tls::TlsInitOptions o;
  o.dir = cl.init_dir;
  o.dns_names = cl.init_names;
  o.ip_addresses = cl.init_addresses;
  if (o.dns_names.empty() && o.ip_addresses.empty()) {
    tls::HostNames here = tls::LocalNamesAndAddresses();
    o.dns_names = here.dns_names;
    o.ip_addresses = here.ip_addresses;
  }
  o.server_days = cl.init_days;
  o.now_s = NowSeconds();
  if (!cl.init_user.empty()) {
    passwd* pw = getpwnam(cl.init_user.c_str());
    if (!pw) {
      fprintf(stderr, "tfslurmd tls init: --user: no Unix user '%s'\n", cl.init_user.c_str());
      return 2;
    }
    o.key_uid = pw->pw_uid;
    o.key_gid = pw->pw_gid;
  }
  auto r = tls::RunTlsInit(o);
  if (!r.ok()) {
    fprintf(stderr, "tfslurmd tls init: %s\n", r.status().message().c_str());
    return 1;
  }
  printf("%s %s\n", r->made_ca ? "made the CA" : "kept the CA", r->ca_cert_path.c_str());
  printf("  SHA-256 fingerprint %s\n", r->ca.fingerprint.c_str());
  printf("  give this fingerprint to users: `tfctl login` shows it when it pins the CA\n");
  printf("made the server certificate %s (key %s)\n", r->cert_path.c_str(), r->key_path.c_str());
  printf("  for %s\n", tls::DescribeNames(r->server).c_str());
  printf("  valid until %s\n", tls::FormatUtc(r->server.not_after_s).c_str());
  printf("serve with: tfslurmd --tls-cert %s --tls-key %s --tls-ca %s ...\n", r->cert_path.c_str(),
         r->key_path.c_str(), r->ca_cert_path.c_str());
  printf("or, to a running tfslurmd serving these files: kill -HUP <pid>\n");
  return 0;
}

}  // namespace tfslurm
