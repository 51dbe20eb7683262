// X.509 certificates and keys as tfslurm reads them, through OpenSSL: what a
// PEM file holds (subject, names, validity, SHA-256 fingerprint), and a
// server's certificate chain and key checked together before anything
// serves with them.
//
// The fingerprint is SHA-256 over the certificate's DER bytes, written as
// OpenSSL prints it (`openssl x509 -noout -fingerprint -sha256`): upper-case
// hex pairs joined by ':', so an admin can compare the two by eye.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tfslurm::tls {

struct CertificateInfo {
  std::string subject;  // RFC 2253, e.g. "CN=tfslurmd login1"
  std::string issuer;
  std::vector<std::string> dns_names;     // subjectAltName DNS entries
  std::vector<std::string> ip_addresses;  // subjectAltName IP entries, as text
  int64_t not_before_s = 0;               // seconds since the epoch
  int64_t not_after_s = 0;
  bool is_ca = false;       // basicConstraints CA:TRUE
  std::string fingerprint;  // SHA-256 of the DER, "AB:CD:..."
};

// Every certificate in `pem`, in order. InvalidArgument when there is none
// or one does not parse; `what` names the source in the message.
StatusOr<std::vector<CertificateInfo>> ParseCertificates(const std::string& pem,
                                                         const std::string& what);

// SHA-256 fingerprint of the first certificate of `pem`.
StatusOr<std::string> FirstFingerprint(const std::string& pem);

// A certificate chain (leaf first) and its private key, as PEM, checked:
// both parse, the key is the leaf's, the leaf is valid at `now_s`.
struct ServerIdentity {
  std::string chain_pem;
  std::string key_pem;
  CertificateInfo leaf;
  std::string cert_path, key_path;  // where they were read from
};

// Reads and checks the pair. Refused (FailedPrecondition, naming the file):
// a file that cannot be read; a key file that other users may read (mode o+r
// or o+w: "chmod 600"); no certificate; a key that does not parse or is not
// the leaf's; a leaf not yet valid or expired (with its dates).
StatusOr<ServerIdentity> LoadServerIdentity(const std::string& cert_path,
                                            const std::string& key_path, int64_t now_s);

// Whether a client that trusts `ca_pem` (empty: the system's store) and
// dials `host` (a name or an IP address) accepts `identity`'s chain at
// `now_s`, as OpenSSL verifies it for gRPC and cpp-httplib. The error says
// why: "unable to get local issuer certificate", or the names the
// certificate is for.
Status CheckServesHost(const ServerIdentity& identity, const std::string& ca_pem,
                       const std::string& host, int64_t now_s);

// Reads a CA bundle (one or more certificates) and returns its PEM as read.
StatusOr<std::string> LoadCaBundle(const std::string& path);

// "2027-11-28 04:00:00 UTC".
std::string FormatUtc(int64_t seconds);

// The leaf's names and addresses, "DNS:login1, IP:198.18.0.3".
std::string DescribeNames(const CertificateInfo& c);

}  // namespace tfslurm::tls
