// tfctl login: remembers where tfslurmd is, what to trust and the token to
// send, in ~/.config/tfslurm/config, after checking each:
//   - an https:// service's certificate is verified (--cacert, else the
//     system's store). One this machine does not trust may be pinned on
//     first use: tfctl shows its CA's SHA-256 fingerprint (which `tfslurmd
//     tls init` printed for the admin to publish), asks, or takes
//     --fingerprint, and saves that certificate as the config's cacert. A
//     certificate that is expired, or not for the URL's host, is never
//     pinned. A pinned certificate that no longer verifies is not replaced
//     silently: the error says what changed.
//   - the token (--token, TFSLURM_TOKEN, the config's) must be accepted;
//     with none, one is made for the caller through MUNGE (POST /tokens).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "client/tfctl/command.h"
#include "tls/probe.h"

namespace tfslurm::tfctl {
namespace {

struct LoginOptions {
  std::string fingerprint;  // the CA's, as published; required to pin without asking
  bool yes = false;         // pin without asking
  bool no_token = false;    // keep using MUNGE per request
};

std::string Normalized(std::string fp) {
  fp.erase(std::remove_if(fp.begin(), fp.end(), [](char c) { return c == ':' || isspace(c); }),
           fp.end());
  std::transform(fp.begin(), fp.end(), fp.begin(), ::toupper);
  if (fp.rfind("SHA256", 0) == 0) fp = fp.substr(6);
  return fp;
}

bool IsUntrustedIssuer(const std::string& reason) {
  for (const char* s : {"unable to get local issuer certificate", "self-signed certificate",
                        "self signed certificate", "unable to get issuer certificate"})
    if (reason.find(s) != std::string::npos) return true;
  return false;
}

// Asks on the terminal, or decides from --fingerprint / --yes.
Status ConfirmPin(const tls::CertificateInfo& anchor, const LoginOptions& o) {
  if (!o.fingerprint.empty()) {
    if (Normalized(o.fingerprint) != Normalized(anchor.fingerprint))
      return Error("the certificate's fingerprint is " + anchor.fingerprint +
                   ", not the --fingerprint given; nothing was pinned (someone may be "
                   "answering in the service's place)");
    return Status::Ok();
  }
  if (o.yes) return Status::Ok();
  if (!isatty(STDIN_FILENO))
    return Error(
        "not pinning without a terminal to ask on: compare the fingerprint with the "
        "one your administrator published, then run `tfctl login --fingerprint FP` "
        "(or --yes)");
  std::cerr << "Trust it for this URL from now on? [y/N] " << std::flush;
  std::string answer;
  std::getline(std::cin, answer);
  if (answer == "y" || answer == "Y" || answer == "yes") return Status::Ok();
  return Error("not pinned");
}

// First use of an https:// service this machine does not trust: pins the
// top certificate it presents (its CA, as `tfslurmd tls init` sends it).
StatusOr<std::string> PinOnFirstUse(const client::Connection& c, const tls::ProbeOptions& probe,
                                    const tls::ProbeResult& seen, const std::string& config_path,
                                    const LoginOptions& o) {
  const std::string anchor_pem = seen.chain_pem.back();
  const tls::CertificateInfo& anchor = seen.chain.back();
  tls::ProbeOptions again = probe;
  again.ca_pem = anchor_pem;
  tls::ProbeResult pinned = tls::ProbeTls(again);
  if (pinned.kind != tls::ProbeResult::Kind::kVerified)
    return Error("cannot verify tfslurmd at " + c.url + " even trusting its own chain: " +
                 (pinned.reason.empty() ? seen.reason : pinned.reason) + "; nothing was pinned");
  std::cerr << "tfslurmd at " << c.url << " presents a certificate this machine does not trust:\n"
            << "  " << seen.chain.front().subject << " (" << tls::DescribeNames(seen.chain.front())
            << ")\n"
            << "  issued by " << anchor.subject << "\n"
            << "  SHA-256 fingerprint of " << (anchor.is_ca ? "that CA" : "the certificate") << ": "
            << anchor.fingerprint << "\n"
            << "Compare it with the fingerprint your administrator published (`tfslurmd tls "
               "init` printed it).\n";
  if (Status s = ConfirmPin(anchor, o); !s.ok()) return s;
  const std::filesystem::path dir = std::filesystem::path(config_path).parent_path();
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  }
  std::string file = dir.string() + "/ca-" + probe.host + "-" + std::to_string(probe.port) + ".pem";
  std::ofstream out(file, std::ios::trunc);
  out << anchor_pem;
  if (!out.flush()) return Error("cannot write " + file);
  std::cerr << "pinned " << anchor.fingerprint << " for " << c.url << " (saved as " << file
            << ")\n";
  return file;
}

// The CA file to keep in the config for an https:// service, "" for the
// system's store; an error when the service cannot be trusted.
StatusOr<std::string> CheckTrust(const client::Connection& c, const std::string& config_path,
                                 const LoginOptions& o) {
  if (c.url.rfind("https://", 0) != 0) {
    std::cerr << "note: " << c.url
              << " is plaintext: tokens and MUNGE credentials cross the network readable\n";
    return c.cacert;
  }
  tls::ProbeOptions probe;
  std::string target = c.url.substr(8);
  if (!tls::SplitTarget(target, &probe.host, &probe.port)) {
    probe.host = target;
    probe.port = 443;
  }
  if (!c.cacert.empty()) {
    std::ifstream in(c.cacert);
    std::stringstream pem;
    pem << in.rdbuf();
    probe.ca_pem = pem.str();
  }
  tls::ProbeResult r = tls::ProbeTls(probe);
  if (r.kind == tls::ProbeResult::Kind::kVerified) {
    std::cerr << "tfslurmd at " << c.url << " verified: " << r.chain.front().subject << ", SHA-256 "
              << r.chain.front().fingerprint << "\n";
    return c.cacert;
  }
  if (r.kind == tls::ProbeResult::Kind::kUnverified && c.cacert.empty() && !r.chain.empty() &&
      IsUntrustedIssuer(r.reason))
    return PinOnFirstUse(c, probe, r, config_path, o);
  std::string against = c.cacert.empty() ? "this machine's trust store"
                                         : c.cacert + " (from " + c.cacert_origin + ")";
  return Error(
      "cannot verify tfslurmd at " + c.url + ": " + r.reason +
      (r.kind == tls::ProbeResult::Kind::kUnverified ? "; checked against " + against : ""));
}

int RunLogin(const GlobalOptions& global, const LoginOptions& o) {
  client::EnvLookup env = client::ProcessEnvironment();
  const std::string config_path = client::DefaultConfigPath(env);
  auto connection = client::ResolveConnection(global.connection, env, config_path);
  if (!connection.ok()) return Fail(connection.status());
  auto cacert = CheckTrust(*connection, config_path, o);
  if (!cacert.ok()) return Fail(cacert.status());
  connection->cacert = *cacert;
  connection->cacert_origin = config_path;

  client::Client client(*connection);
  std::string token = connection->token;
  if (!token.empty()) {
    client::ListQuery one;
    one.limit = 1;
    if (auto list = client.ListExperiments(one); !list.ok()) return Fail(list.status());
  } else if (!o.no_token) {
    auto created = client.CreateToken("", false);
    if (!created.ok()) return Fail(created.status());
    token = created->token;
    std::cerr << "made a token for " << created->user << " (through MUNGE)\n";
  }
  if (Status s = client::SaveConfig(config_path, connection->url, *cacert, token); !s.ok())
    return Fail(s);
  std::cerr << "logged in to " << connection->url << "; saved in " << config_path << "\n";
  return kExitOk;
}

}  // namespace

Command AddLoginCommand(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<LoginOptions>();
  CLI::App* login = app.add_subcommand(
      "login", "check and remember the service's URL, its certificate and your token");
  login->add_option("--fingerprint", options->fingerprint,
                    "pin a certificate this machine does not trust only if its CA's SHA-256 "
                    "fingerprint is this one");
  login->add_flag("--yes", options->yes, "pin such a certificate without asking");
  login->add_flag("--no-token", options->no_token,
                  "make no token: keep proving your Unix user with MUNGE per request");
  login->footer(
      "Writes url, cacert and token to ~/.config/tfslurm/config (mode 0600).\n\n"
      "Examples:\n"
      "  tfctl login --url https://tfslurm.example.org:8443\n"
      "  tfctl login --url https://login1:8443 --fingerprint AB:CD:...   # as published\n"
      "  tfctl login --url https://login1:8443 --cacert /etc/tfslurm/tls/ca.pem");
  return {login, [&global, options] { return RunLogin(global, *options); }};
}

}  // namespace tfslurm::tfctl
