// Certificates made with OpenSSL, for `tfslurmd tls init` (tls_init.h) and
// the tests: a CA, and server certificates it signs.
//
// Keys are ECDSA P-256: a TLS handshake makes one signature with the
// server's key, ~50 us for P-256 against ~1.5 ms for RSA-2048, and 4,096
// agents may handshake at once when a large job starts.
//
// The CA: basicConstraints critical CA:TRUE, pathlen 0; keyUsage critical
// keyCertSign, cRLSign. A server certificate: CA:FALSE; keyUsage critical
// digitalSignature; extendedKeyUsage serverAuth; subjectAltName with every
// DNS name and IP address asked for (clients match the host they dial
// against these, never the CN). Serial numbers are 128 random bits.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tfslurm::tls {

struct MadeCertificate {
  std::string cert_pem;
  std::string key_pem;  // PKCS#8, unencrypted
};

struct CertificateSpec {
  std::string common_name;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;  // IPv4 or IPv6 text
  int64_t not_before_s = 0;
  int64_t not_after_s = 0;
};

// A self-signed CA (spec's names are ignored).
StatusOr<MadeCertificate> MakeCa(const CertificateSpec& spec);

// A server certificate for spec's names, signed by `ca`. InvalidArgument
// for an address that is not IPv4 or IPv6, or no name at all.
StatusOr<MadeCertificate> MakeServerCertificate(const CertificateSpec& spec,
                                                const MadeCertificate& ca);

}  // namespace tfslurm::tls
