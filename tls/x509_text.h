// OpenSSL objects from and to text: PEM in, CertificateInfo out. Private to
// tls/.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "tls/certificates.h"
#include "tls/openssl_ptr.h"

namespace tfslurm::tls {

// Every certificate of a PEM text, in order; an error when there is none.
StatusOr<std::vector<OpenSslPtr<X509>>> ReadPemCertificates(const std::string& pem);
// The first private key of a PEM text (unencrypted).
StatusOr<OpenSslPtr<EVP_PKEY>> ReadPemPrivateKey(const std::string& pem);
std::string ToPem(X509* cert);
std::string ToPem(EVP_PKEY* key);  // PKCS#8

CertificateInfo Describe(X509* cert);
std::string Fingerprint(X509* cert);

}  // namespace tfslurm::tls
