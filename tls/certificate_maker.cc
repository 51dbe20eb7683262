#include "tls/certificate_maker.h"

#include <arpa/inet.h>
#include <openssl/ec.h>
#include <openssl/rand.h>

#include "tls/openssl_ptr.h"
#include "tls/x509_text.h"

namespace tfslurm::tls {
namespace {

StatusOr<OpenSslPtr<EVP_PKEY>> NewKey() {
  OpenSslPtr<EVP_PKEY> key(EVP_EC_gen("P-256"));
  if (!key) return Internal("cannot make an ECDSA P-256 key: " + DrainOpenSslErrors());
  return key;
}

bool AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate with the fields every one has: version 3, a random serial,
// the validity, the subject's CN, its public key.
StatusOr<OpenSslPtr<X509>> NewCertificate(const CertificateSpec& spec, EVP_PKEY* key) {
  OpenSslPtr<X509> cert(X509_new());
  OpenSslPtr<BIGNUM> serial(BN_new());
  if (!cert || !serial || !BN_rand(serial.get(), 128, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY))
    return Internal("cannot make a certificate: " + DrainOpenSslErrors());
  X509_set_version(cert.get(), 2);
  BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get()));
  ASN1_TIME_set(X509_getm_notBefore(cert.get()), static_cast<time_t>(spec.not_before_s));
  ASN1_TIME_set(X509_getm_notAfter(cert.get()), static_cast<time_t>(spec.not_after_s));
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1,
                             -1, 0);
  X509_set_pubkey(cert.get(), key);
  return cert;
}

StatusOr<std::string> AltNames(const CertificateSpec& spec) {
  std::string names;
  for (const auto& dns : spec.dns_names) {
    if (dns.empty() || dns.find_first_of(",: \t") != std::string::npos)
      return InvalidArgument("'" + dns + "' is not a host name");
    names += (names.empty() ? "DNS:" : ",DNS:") + dns;
  }
  for (const auto& ip : spec.ip_addresses) {
    unsigned char buf[16];
    if (inet_pton(AF_INET, ip.c_str(), buf) != 1 && inet_pton(AF_INET6, ip.c_str(), buf) != 1)
      return InvalidArgument("'" + ip + "' is not an IPv4 or IPv6 address");
    names += (names.empty() ? "IP:" : ",IP:") + ip;
  }
  if (names.empty())
    return InvalidArgument("a server certificate needs at least one name or address");
  return names;
}

}  // namespace

StatusOr<MadeCertificate> MakeCa(const CertificateSpec& spec) {
  auto key = NewKey();
  if (!key.ok()) return key.status();
  auto cert = NewCertificate(spec, key->get());
  if (!cert.ok()) return cert.status();
  X509* c = cert->get();
  X509_set_issuer_name(c, X509_get_subject_name(c));
  if (!AddExtension(c, c, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
      !AddExtension(c, c, NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !AddExtension(c, c, NID_subject_key_identifier, "hash") ||
      X509_sign(c, key->get(), EVP_sha256()) == 0)
    return Internal("cannot make the CA certificate: " + DrainOpenSslErrors());
  return MadeCertificate{ToPem(c), ToPem(key->get())};
}

StatusOr<MadeCertificate> MakeServerCertificate(const CertificateSpec& spec,
                                                const MadeCertificate& ca) {
  auto names = AltNames(spec);
  if (!names.ok()) return names.status();
  auto ca_certs = ReadPemCertificates(ca.cert_pem);
  if (!ca_certs.ok()) return InvalidArgument("the CA certificate: " + ca_certs.status().message());
  auto ca_key = ReadPemPrivateKey(ca.key_pem);
  if (!ca_key.ok()) return InvalidArgument("the CA key: " + ca_key.status().message());
  X509* issuer = ca_certs->front().get();
  if (X509_check_private_key(issuer, ca_key->get()) != 1) {
    DrainOpenSslErrors();
    return InvalidArgument("the CA key is not the CA certificate's");
  }
  auto key = NewKey();
  if (!key.ok()) return key.status();
  auto cert = NewCertificate(spec, key->get());
  if (!cert.ok()) return cert.status();
  X509* c = cert->get();
  X509_set_issuer_name(c, X509_get_subject_name(issuer));
  if (!AddExtension(c, issuer, NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExtension(c, issuer, NID_key_usage, "critical,digitalSignature") ||
      !AddExtension(c, issuer, NID_ext_key_usage, "serverAuth") ||
      !AddExtension(c, issuer, NID_subject_key_identifier, "hash") ||
      !AddExtension(c, issuer, NID_authority_key_identifier, "keyid:always") ||
      !AddExtension(c, issuer, NID_subject_alt_name, *names) ||
      X509_sign(c, ca_key->get(), EVP_sha256()) == 0)
    return Internal("cannot make the server certificate: " + DrainOpenSslErrors());
  return MadeCertificate{ToPem(c), ToPem(key->get())};
}

}  // namespace tfslurm::tls
