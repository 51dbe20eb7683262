#include "tls/serving_identity.h"

#include <sys/socket.h>

#include "tls/openssl_ptr.h"
#include "tls/x509_text.h"

namespace tfslurm::tls {

struct ServingIdentity::Loaded {
  ServerIdentity text;
  OpenSslPtr<X509> leaf;
  OpenSslPtr<STACK_OF(X509)> chain;  // the certificates after the leaf
  OpenSslPtr<EVP_PKEY> key;
};

StatusOr<std::shared_ptr<const ServingIdentity::Loaded>> ServingIdentity::Parse(
    const ServerIdentity& id) {
  auto certs = ReadPemCertificates(id.chain_pem);
  if (!certs.ok()) return InvalidArgument("the certificate: " + certs.status().message());
  auto key = ReadPemPrivateKey(id.key_pem);
  if (!key.ok()) return InvalidArgument("the key: " + key.status().message());
  if (X509_check_private_key(certs->front().get(), key->get()) != 1) {
    DrainOpenSslErrors();
    return InvalidArgument("the key is not the certificate's");
  }
  auto loaded = std::make_shared<ServingIdentity::Loaded>();
  loaded->text = id;
  loaded->leaf = std::move(certs->front());
  loaded->chain.reset(sk_X509_new_null());
  for (size_t i = 1; i < certs->size(); ++i)
    sk_X509_push(loaded->chain.get(), (*certs)[i].release());
  loaded->key = std::move(*key);
  return std::shared_ptr<const ServingIdentity::Loaded>(std::move(loaded));
}

namespace {

// SSL_CB_ACCEPT_EXIT after a failed handshake whose first record was a
// plaintext HTTP request (ssl3_get_record: SSL_R_HTTP_REQUEST; the state
// machine empties the error queue when it starts, so the reason is this
// handshake's).
void AnswerPlaintextHttp(const SSL* ssl, int where, int ret) {
  if ((where & SSL_CB_EXIT) == 0 || (where & SSL_ST_ACCEPT) == 0 || ret > 0) return;
  unsigned long e = ERR_peek_last_error();
  if (ERR_GET_LIB(e) != ERR_LIB_SSL || ERR_GET_REASON(e) != SSL_R_HTTP_REQUEST) return;
  int fd = SSL_get_fd(ssl);
  if (fd < 0) return;
  std::string body = ServingIdentity::PlaintextAnswer();
  std::string answer =
      "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
      "Connection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  // Best effort, never waiting: the handshake runs on a non-blocking socket
  // (the REST port's gate, service/api/gate_connection.h), and the answer
  // fits a socket buffer.
  (void)send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

StatusOr<std::unique_ptr<ServingIdentity>> ServingIdentity::Create(const ServerIdentity& identity) {
  auto loaded = Parse(identity);
  if (!loaded.ok()) return loaded.status();
  std::unique_ptr<ServingIdentity> s(new ServingIdentity());
  MutexLock lock(s->mu_);
  s->loaded_ = std::move(*loaded);
  return s;
}

ServingIdentity::~ServingIdentity() = default;

Status ServingIdentity::Replace(const ServerIdentity& next) {
  auto loaded = Parse(next);
  if (!loaded.ok()) return loaded.status();
  MutexLock lock(mu_);
  loaded_ = std::move(*loaded);
  return Status::Ok();
}

ServerIdentity ServingIdentity::Current() const { return loaded()->text; }

std::shared_ptr<const ServingIdentity::Loaded> ServingIdentity::loaded() const {
  MutexLock lock(mu_);
  return loaded_;
}

int ServingIdentity::OnCertificateWanted(SSL* ssl, void* self) {
  // The shared_ptr keeps this identity alive for the call; the SSL takes
  // its own references to the certificate, chain and key.
  std::shared_ptr<const Loaded> id = static_cast<ServingIdentity*>(self)->loaded();
  return SSL_use_cert_and_key(ssl, id->leaf.get(), id->key.get(), id->chain.get(), 1) == 1 ? 1 : 0;
}

void ServingIdentity::Configure(SSL_CTX* ctx) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(
      ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_cert_cb(ctx, &ServingIdentity::OnCertificateWanted, this);
  SSL_CTX_set_info_callback(ctx, &AnswerPlaintextHttp);
}

std::string ServingIdentity::PlaintextAnswer() {
  return R"json({"error":{"code":"invalid_argument","message":"this port speaks HTTPS: use )json"
         R"json(https:// instead of http:// (tfctl --url, TFSLURM_URL)","fields":[],)json"
         R"json("retryable":false}})json"
         "\n";
}

}  // namespace tfslurm::tls
