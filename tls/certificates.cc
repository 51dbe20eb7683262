#include "tls/certificates.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "tls/openssl_ptr.h"
#include "tls/x509_text.h"

namespace tfslurm::tls {
namespace {

StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return FailedPrecondition("cannot read " + what + " " + path + ": " + strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

StatusOr<std::vector<CertificateInfo>> ParseCertificates(const std::string& pem,
                                                         const std::string& what) {
  auto certs = ReadPemCertificates(pem);
  if (!certs.ok())
    return FailedPrecondition(what +
                              " holds no certificate that OpenSSL can read (PEM, "
                              "\"-----BEGIN CERTIFICATE-----\"): " +
                              certs.status().message());
  std::vector<CertificateInfo> out;
  for (const auto& c : *certs) out.push_back(Describe(c.get()));
  return out;
}

StatusOr<std::string> FirstFingerprint(const std::string& pem) {
  auto certs = ParseCertificates(pem, "the certificate");
  if (!certs.ok()) return certs.status();
  return certs->front().fingerprint;
}

StatusOr<ServerIdentity> LoadServerIdentity(const std::string& cert_path,
                                            const std::string& key_path, int64_t now_s) {
  ServerIdentity id;
  id.cert_path = cert_path;
  id.key_path = key_path;
  struct stat st {};
  if (stat(key_path.c_str(), &st) != 0)
    return FailedPrecondition("cannot read the TLS key " + key_path + ": " + strerror(errno));
  if (st.st_mode & (S_IROTH | S_IWOTH)) {
    char mode[8];
    snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    return FailedPrecondition("the TLS key " + key_path +
                              " may be read or written by every user (mode " + mode +
                              "); make it tfslurmd's alone: chmod 600 " + key_path);
  }
  auto chain = ReadFile(cert_path, "the TLS certificate");
  if (!chain.ok()) return chain.status();
  auto key = ReadFile(key_path, "the TLS key");
  if (!key.ok()) return key.status();
  id.chain_pem = std::move(*chain);
  id.key_pem = std::move(*key);

  auto certs = ReadPemCertificates(id.chain_pem);
  if (!certs.ok())
    return FailedPrecondition("the TLS certificate " + cert_path +
                              " holds no certificate (PEM): " + certs.status().message());
  auto pkey = ReadPemPrivateKey(id.key_pem);
  if (!pkey.ok())
    return FailedPrecondition("the TLS key " + key_path +
                              " holds no private key that OpenSSL can read (PEM, unencrypted): " +
                              pkey.status().message());
  X509* leaf = certs->front().get();
  id.leaf = Describe(leaf);
  if (X509_check_private_key(leaf, pkey->get()) != 1) {
    DrainOpenSslErrors();
    return FailedPrecondition("the TLS key " + key_path + " is not the key of the certificate " +
                              cert_path + " (" + id.leaf.subject + ")");
  }
  if (now_s < id.leaf.not_before_s)
    return FailedPrecondition("the TLS certificate " + cert_path + " (" + id.leaf.subject +
                              ") is not valid before " + FormatUtc(id.leaf.not_before_s) +
                              "; it is " + FormatUtc(now_s));
  if (now_s >= id.leaf.not_after_s)
    return FailedPrecondition("the TLS certificate " + cert_path + " (" + id.leaf.subject +
                              ") expired on " + FormatUtc(id.leaf.not_after_s) +
                              "; make a new one (tfslurmd tls init renews it from the same CA)");
  return id;
}

Status CheckServesHost(const ServerIdentity& identity, const std::string& ca_pem,
                       const std::string& host, int64_t now_s) {
  auto chain = ReadPemCertificates(identity.chain_pem);
  if (!chain.ok()) return FailedPrecondition(chain.status().message());
  OpenSslPtr<X509_STORE> store(X509_STORE_new());
  if (ca_pem.empty()) {
    X509_STORE_set_default_paths(store.get());
  } else {
    auto cas = ReadPemCertificates(ca_pem);
    if (!cas.ok()) return FailedPrecondition("the CA file: " + cas.status().message());
    for (auto& c : *cas) X509_STORE_add_cert(store.get(), c.get());
  }
  OpenSslPtr<STACK_OF(X509)> untrusted(sk_X509_new_null());
  for (size_t i = 1; i < chain->size(); ++i) sk_X509_push(untrusted.get(), (*chain)[i].get());
  OpenSslPtr<X509_STORE_CTX> ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), chain->front().get(), untrusted.get());
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());
  X509_VERIFY_PARAM_set_time(param, static_cast<time_t>(now_s));
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1)
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  DrainOpenSslErrors();
  int ok = X509_verify_cert(ctx.get());
  // The stack holds borrowed pointers: empty it before it is freed.
  while (sk_X509_num(untrusted.get()) > 0) sk_X509_pop(untrusted.get());
  if (ok == 1) return Status::Ok();
  int err = X509_STORE_CTX_get_error(ctx.get());
  DrainOpenSslErrors();
  std::string why = X509_verify_cert_error_string(err);
  if (err == X509_V_ERR_HOSTNAME_MISMATCH || err == X509_V_ERR_IP_ADDRESS_MISMATCH)
    why += ": it is for " + DescribeNames(Describe(chain->front().get())) + ", not " + host;
  return FailedPrecondition(why);
}

StatusOr<std::string> LoadCaBundle(const std::string& path) {
  auto pem = ReadFile(path, "the CA file");
  if (!pem.ok()) return pem.status();
  auto certs = ParseCertificates(*pem, "the CA file " + path);
  if (!certs.ok()) return certs.status();
  return pem;
}

std::string FormatUtc(int64_t seconds) {
  time_t t = static_cast<time_t>(seconds);
  tm utc{};
  gmtime_r(&t, &utc);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return buf;
}

std::string DescribeNames(const CertificateInfo& c) {
  std::string out;
  for (const auto& n : c.dns_names) out += (out.empty() ? "DNS:" : ", DNS:") + n;
  for (const auto& n : c.ip_addresses) out += (out.empty() ? "IP:" : ", IP:") + n;
  return out.empty() ? "(no subjectAltName)" : out;
}

}  // namespace tfslurm::tls
