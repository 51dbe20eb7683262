// The certificate and key a TLS server presents, replaceable while it
// serves (SIGHUP), for servers built on an OpenSSL SSL_CTX (the REST port's
// gate, service/api/request_gate.h).
//
// The SSL_CTX is set up once (Configure) and never changed after: OpenSSL
// does not allow changing an SSL_CTX while connections are made from it.
// Instead each handshake asks for the certificate (SSL_CTX_set_cert_cb) and
// gets the identity current at that moment (SSL_use_cert_and_key), so a
// Replace reaches the next handshake, and connections already open keep
// theirs: nothing in flight is dropped.
//
// Configure also answers a plaintext HTTP request on the TLS port with a
// plaintext "400 ... this port speaks HTTPS" (OpenSSL recognises one in the
// first record and fails the handshake with SSL_R_HTTP_REQUEST; the info
// callback then writes the answer on the socket), so that curl, tfctl and a
// browser say why instead of "empty reply".
//
// Thread safety: Replace, Current and the handshakes may run at once on any
// threads; the identity is swapped under mu_.
#pragma once

#include <memory>
#include <string>

#include "base/mutex.h"
#include "base/status.h"
#include "tls/certificates.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace tfslurm::tls {

class ServingIdentity {
 public:
  // InvalidArgument when the PEM texts do not parse (LoadServerIdentity has
  // checked them already; this is the second look, as OpenSSL objects).
  static StatusOr<std::unique_ptr<ServingIdentity>> Create(const ServerIdentity& identity);
  ~ServingIdentity();
  ServingIdentity(const ServingIdentity&) = delete;
  ServingIdentity& operator=(const ServingIdentity&) = delete;

  // On an error the identity served stays the old one.
  Status Replace(const ServerIdentity& next) ABSL_LOCKS_EXCLUDED(mu_);
  ServerIdentity Current() const ABSL_LOCKS_EXCLUDED(mu_);

  // A server context: TLS 1.2 at least, no compression, no renegotiation,
  // the certificate from this object at every handshake, and the plaintext
  // answer. This object must outlive `ctx`.
  void Configure(SSL_CTX* ctx);

  // The plaintext answer's body, tfslurmd's JSON error format.
  static std::string PlaintextAnswer();

 private:
  struct Loaded;
  ServingIdentity() = default;
  static StatusOr<std::shared_ptr<const Loaded>> Parse(const ServerIdentity& identity);
  std::shared_ptr<const Loaded> loaded() const ABSL_LOCKS_EXCLUDED(mu_);
  static int OnCertificateWanted(SSL* ssl, void* self);

  mutable Mutex mu_;
  std::shared_ptr<const Loaded> loaded_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfslurm::tls
