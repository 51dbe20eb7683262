// TLS for both of tfslurmd's ports, as the daemon holds it: the identity
// read from --tls-cert/--tls-key, served on the REST port through an
// SSL_CTX (tls/serving_identity.h) and on the agent port through gRPC's
// file watcher on a private copy (tls/staged_identity.h), and the CA the
// jobs' agents verify the service with (--tls-ca, else the system's store).
//
// Reload (SIGHUP): the pair is read and checked again (parse, key matches,
// validity, the agents' host), and only then replaces both ports' identity;
// on any error both keep serving the old one, and the error says why. Open
// connections and agent streams keep their sessions; new handshakes get the
// new certificate.
//
// Thread safety: Load once; Reload from one thread at a time (main's
// signal loop), concurrently with handshakes on any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "tls/serving_identity.h"
#include "tls/staged_identity.h"

namespace tfslurm::daemon {

struct TlsOptions {
  std::string cert_path;  // the chain, leaf first (PEM); empty: no TLS
  std::string key_path;   // its key (PEM), readable by tfslurmd alone
  // The CA bundle agents verify the service with, handed to every job;
  // empty: the compute nodes' system trust store.
  std::string ca_path;
};

class DaemonTls {
 public:
  // `agent_host`: the host job scripts tell agents to dial; the certificate
  // must name it, and verify against the CA.
  static StatusOr<std::unique_ptr<DaemonTls>> Load(const TlsOptions& options,
                                                   const std::string& agent_host, int64_t now_s);

  // Reads the files again; on success both ports present the new identity
  // to their next handshakes. Returns what is now served, described.
  StatusOr<std::string> Reload(int64_t now_s);

  // The job environment's TFSLURM_CA: the CA bundle's PEM, or "system".
  std::string JobTrust() const { return ca_pem_.empty() ? "system" : ca_pem_; }
  tls::ServingIdentity& rest() { return *rest_; }
  const tls::StagedIdentity& agents() const { return *agents_; }
  // "CN=..., DNS:a, IP:b, valid until ..., SHA-256 AB:CD:..."
  std::string Describe() const;

 private:
  DaemonTls() = default;
  StatusOr<tls::ServerIdentity> ReadChecked(int64_t now_s) const;

  TlsOptions options_;
  std::string agent_host_;
  std::string ca_pem_;
  std::unique_ptr<tls::ServingIdentity> rest_;
  std::unique_ptr<tls::StagedIdentity> agents_;
};

}  // namespace tfslurm::daemon
