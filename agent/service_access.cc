#include "agent/service_access.h"

#include "agent/child_env.h"
#include "agent/uid_credential.h"
#include "tls/certificates.h"
#include "tls/probe.h"

namespace tfslurm::agent {

StatusOr<std::optional<std::string>> ServiceCaFromEnv(const EnvLookup& env) {
  std::optional<std::string> ca = env(kCaVariable);
  if (!ca || ca->empty()) return std::optional<std::string>();
  std::string pem = *ca == "system" ? tls::SystemTrustPem() : *ca;
  if (pem.empty())
    return Error(std::string(kCaVariable) +
                 "=system, but this node's trust store cannot be read (OpenSSL's default "
                 "file; Debian's ca-certificates)");
  if (auto certs = tls::ParseCertificates(pem, kCaVariable); !certs.ok()) return certs.status();
  return std::optional<std::string>(std::move(pem));
}

Status ConfigureServiceAccess(const EnvLookup& env, SessionOptions& options) {
  auto ca = ServiceCaFromEnv(env);
  if (!ca.ok()) return ca.status();
  if (*ca) {
    const std::string pem = **ca;
    options.stream.tls_ca_pem = pem;
    options.why_unverified = [target = options.stream.target, pem] {
      return WhyServiceUnverified(target, pem);
    };
  }
  if (std::optional<std::string> prove = env(kProveUidVariable); prove && !prove->empty()) {
    if (*prove != "munge")
      return Error(std::string(kProveUidVariable) + "='" + *prove +
                   "': the one way an agent proves its uid is 'munge'");
    options.uid_credential =
        [socket = env("TFSLURM_MUNGE_SOCKET").value_or("")](const std::string& payload) {
          return MakeUidCredential(payload, socket);
        };
  }
  return Status::Ok();
}

std::optional<std::string> WhyServiceUnverified(const std::string& target,
                                                const std::string& ca_pem) {
  tls::ProbeOptions probe;
  if (!tls::SplitTarget(target, &probe.host, &probe.port)) return std::nullopt;
  probe.ca_pem = ca_pem;
  tls::ProbeResult r = tls::ProbeTls(probe);
  switch (r.kind) {
    case tls::ProbeResult::Kind::kUnverified:
      return r.reason + " (checked against " + std::string(kCaVariable) + ")";
    case tls::ProbeResult::Kind::kNotTls:
      return r.reason;
    case tls::ProbeResult::Kind::kVerified:
    case tls::ProbeResult::Kind::kUnreachable:
      break;
  }
  return std::nullopt;
}

}  // namespace tfslurm::agent
