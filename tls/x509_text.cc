#include "tls/x509_text.h"

#include <arpa/inet.h>
#include <openssl/pem.h>

#include <ctime>

#include "base/sha256.h"

namespace tfslurm::tls {
namespace {

OpenSslPtr<BIO> MemoryBio(const std::string& text) {
  return OpenSslPtr<BIO>(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : "";
}

int64_t Seconds(const ASN1_TIME* t) {
  tm when{};
  if (!t || ASN1_TIME_to_tm(t, &when) != 1) return 0;
  return static_cast<int64_t>(timegm(&when));
}

std::string NameText(const X509_NAME* name) {
  OpenSslPtr<BIO> out(BIO_new(BIO_s_mem()));
  X509_NAME_print_ex(out.get(), name, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
  return BioText(out.get());
}

void AddAltNames(X509* cert, CertificateInfo& info) {
  OpenSslPtr<GENERAL_NAMES> names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  if (!names) return;
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), i);
    if (n->type == GEN_DNS) {
      const ASN1_IA5STRING* s = n->d.dNSName;
      info.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                  static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (n->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = n->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = "";
      int len = ASN1_STRING_length(ip);
      if (len == 4 || len == 16)
        inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(ip), text, sizeof text);
      info.ip_addresses.emplace_back(text);
    }
  }
}

}  // namespace

StatusOr<std::vector<OpenSslPtr<X509>>> ReadPemCertificates(const std::string& pem) {
  auto bio = MemoryBio(pem);
  std::vector<OpenSslPtr<X509>> certs;
  while (X509* c = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(c);
  // The loop ends at the end of the text ("no start line"), or at a block
  // that does not parse.
  unsigned long last = ERR_peek_last_error();
  bool clean_end = ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE;
  std::string errors = DrainOpenSslErrors();
  if (certs.empty() || (!clean_end && last != 0))
    return Error(certs.empty() ? "no certificate found" + (errors.empty() ? "" : ": " + errors)
                               : "a certificate after the " + std::to_string(certs.size()) +
                                     ". does not parse: " + errors);
  return certs;
}

StatusOr<OpenSslPtr<EVP_PKEY>> ReadPemPrivateKey(const std::string& pem) {
  auto bio = MemoryBio(pem);
  // An empty passphrase callback: an encrypted key fails instead of
  // prompting on the terminal.
  OpenSslPtr<EVP_PKEY> key(PEM_read_bio_PrivateKey(
      bio.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr));
  if (!key) return Error(DrainOpenSslErrors());
  return key;
}

std::string ToPem(X509* cert) {
  OpenSslPtr<BIO> out(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(out.get(), cert);
  return BioText(out.get());
}

std::string ToPem(EVP_PKEY* key) {
  OpenSslPtr<BIO> out(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(out.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  return BioText(out.get());
}

std::string Fingerprint(X509* cert) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  X509_digest(cert, EVP_sha256(), md, &n);
  std::string hex = HexBytes(md, n), out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    if (i) out += ':';
    out += static_cast<char>(toupper(hex[i]));
    out += static_cast<char>(toupper(hex[i + 1]));
  }
  return out;
}

CertificateInfo Describe(X509* cert) {
  CertificateInfo info;
  info.subject = NameText(X509_get_subject_name(cert));
  info.issuer = NameText(X509_get_issuer_name(cert));
  info.not_before_s = Seconds(X509_get0_notBefore(cert));
  info.not_after_s = Seconds(X509_get0_notAfter(cert));
  OpenSslPtr<BASIC_CONSTRAINTS> bc(static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(cert, NID_basic_constraints, nullptr, nullptr)));
  info.is_ca = bc && bc->ca;
  AddAltNames(cert, info);
  info.fingerprint = Fingerprint(cert);
  return info;
}

}  // namespace tfslurm::tls
