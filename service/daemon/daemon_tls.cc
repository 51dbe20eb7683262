#include "service/daemon/daemon_tls.h"

#include "tls/certificates.h"

namespace tfslurm::daemon {

StatusOr<std::unique_ptr<DaemonTls>> DaemonTls::Load(const TlsOptions& options,
                                                     const std::string& agent_host, int64_t now_s) {
  std::unique_ptr<DaemonTls> t(new DaemonTls());
  t->options_ = options;
  t->agent_host_ = agent_host;
  if (!options.ca_path.empty()) {
    auto ca = tls::LoadCaBundle(options.ca_path);
    if (!ca.ok()) return ca.status();
    t->ca_pem_ = std::move(*ca);
  }
  auto identity = t->ReadChecked(now_s);
  if (!identity.ok()) return identity.status();
  auto rest = tls::ServingIdentity::Create(*identity);
  if (!rest.ok()) return rest.status();
  t->rest_ = std::move(*rest);
  auto agents = tls::StagedIdentity::Create(*identity);
  if (!agents.ok()) return agents.status();
  t->agents_ = std::move(*agents);
  return t;
}

StatusOr<tls::ServerIdentity> DaemonTls::ReadChecked(int64_t now_s) const {
  auto identity = tls::LoadServerIdentity(options_.cert_path, options_.key_path, now_s);
  if (!identity.ok()) return identity.status();
  // Every job's agents dial agent_host_ and verify against ca_pem_: a
  // certificate they would refuse is refused here, once, instead of as
  // every job's startup_error.
  if (Status s = tls::CheckServesHost(*identity, ca_pem_, agent_host_, now_s); !s.ok())
    return FailedPrecondition("agents could not verify the TLS certificate " + options_.cert_path +
                              " when they dial " + agent_host_ +
                              " (the agent endpoint's host in job scripts) against " +
                              (options_.ca_path.empty() ? std::string("the system's trust store")
                                                        : "--tls-ca " + options_.ca_path) +
                              ": " + s.message());
  return identity;
}

StatusOr<std::string> DaemonTls::Reload(int64_t now_s) {
  auto identity = ReadChecked(now_s);
  if (!identity.ok()) return identity.status();
  if (Status s = agents_->Replace(*identity); !s.ok()) return s;
  if (Status s = rest_->Replace(*identity); !s.ok()) return s;
  return Describe();
}

std::string DaemonTls::Describe() const {
  const tls::CertificateInfo& leaf = rest_->Current().leaf;
  return leaf.subject + " (" + tls::DescribeNames(leaf) + "), valid until " +
         tls::FormatUtc(leaf.not_after_s) + ", SHA-256 " + leaf.fingerprint;
}

}  // namespace tfslurm::daemon
