// One TLS handshake with a service, to say exactly why it cannot be
// verified: the agent runs it when its gRPC stream fails before opening
// (gRPC says only "handshake failed"), and tfctl when https fails, and
// `tfctl login` to see the certificate it is asked to trust.
//
// The handshake always completes when the peer speaks TLS (the verify
// callback records OpenSSL's verdict instead of failing), so the result has
// both the verdict and what the service presented. Nothing is sent after
// the handshake.
//
// Verification is OpenSSL's, as gRPC's and cpp-httplib's are: the chain up
// to a certificate of `ca_pem` (or of the system's store,
// /etc/ssl/certs/ca-certificates.crt, when it is empty), each certificate in
// its validity, and `host` among the leaf's subjectAltName entries (DNS or
// IP). X509_V_FLAG_PARTIAL_CHAIN is set, so a certificate pinned by `tfctl
// login` (not a root) can be the anchor.
//
// Thread safety: a pure function of its options and the network.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "tls/certificates.h"

namespace tfslurm::tls {

struct ProbeOptions {
  std::string host;  // DNS name or IP address, as the client dials it
  int port = 0;
  std::string ca_pem;  // the trusted certificates; empty: the system's store
  std::chrono::milliseconds timeout{5000};
};

struct ProbeResult {
  enum class Kind {
    kVerified,     // TLS, and the certificate checks out
    kUnverified,   // TLS, but the certificate does not (why: `reason`)
    kNotTls,       // the port answered, but not with a TLS handshake
    kUnreachable,  // no TCP connection, or closed before a word
  };
  Kind kind = Kind::kUnreachable;
  // Why, in a line: "certificate has expired (on 2026-01-01 00:00:00 UTC)",
  // "hostname mismatch: the certificate is for DNS:a, IP:b, not c",
  // "Connection refused".
  std::string reason;
  // What the service presented, leaf first, as PEM and described.
  std::vector<std::string> chain_pem;
  std::vector<CertificateInfo> chain;
};

ProbeResult ProbeTls(const ProbeOptions& options);

// The system's trusted CAs as one PEM text (OpenSSL's default file), for
// clients that take PEM (gRPC); "" when unreadable.
std::string SystemTrustPem();

// "host" of "host:port" / "[v6]:port", and the port; false when malformed.
bool SplitTarget(const std::string& target, std::string* host, int* port);

}  // namespace tfslurm::tls
