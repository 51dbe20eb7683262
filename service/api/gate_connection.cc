#include "service/api/gate_connection.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace tfslurm::api {
namespace {

// What an SSL_read/SSL_write that returned `n` <= 0 means, as recv/send
// would say it (errno set). The error queue is emptied: it is per thread,
// and the next connection served on this thread must not read this one's.
ssize_t AsSocketResult(SSL* ssl, int n) {
  const int error = SSL_get_error(ssl, n);
  const int saved_errno = errno;
  ERR_clear_error();
  switch (error) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      errno = EAGAIN;
      return -1;
    case SSL_ERROR_ZERO_RETURN:  // close_notify
      return 0;
    case SSL_ERROR_SYSCALL:
      // The socket's own error; none is an end without close_notify, which
      // a client that closes after its answer is entitled to.
      if (saved_errno == 0) return 0;
      errno = saved_errno;
      return -1;
    default:
      errno = EPROTO;
      return -1;
  }
}

}  // namespace

GateConnection::GateConnection(int fd, SSL_CTX* tls) : fd_(fd), tls_(tls != nullptr) {
  if (!tls_) return;
  const int flags = fcntl(fd_, F_GETFL);
  if (flags < 0 || fcntl(fd_, F_SETFL, flags | O_NONBLOCK) != 0) return;
  ssl_ = SSL_new(tls);
  if (!ssl_) {
    ERR_clear_error();
    return;
  }
  if (SSL_set_fd(ssl_, fd_) != 1) {
    ERR_clear_error();
    SSL_free(ssl_);
    ssl_ = nullptr;
    return;
  }
  // A write retried after EAGAIN continues from where the last one stopped
  // (BufferedStream passes the rest of its buffer, which may have moved).
  SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_set_accept_state(ssl_);
}

GateConnection::~GateConnection() { Close(); }

GateConnection::GateConnection(GateConnection&& other) noexcept { *this = std::move(other); }

GateConnection& GateConnection::operator=(GateConnection&& other) noexcept {
  if (this == &other) return *this;
  Close();
  fd_ = std::exchange(other.fd_, -1);
  tls_ = std::exchange(other.tls_, false);
  ssl_ = std::exchange(other.ssl_, nullptr);
  handshake_done_ = std::exchange(other.handshake_done_, false);
  return *this;
}

GateConnection::Handshake GateConnection::AdvanceHandshake() {
  if (handshake_done()) return Handshake::kDone;
  if (!ssl_) return Handshake::kFailed;
  const int n = SSL_do_handshake(ssl_);
  if (n == 1) {
    handshake_done_ = true;
    return Handshake::kDone;
  }
  const int error = SSL_get_error(ssl_, n);
  ERR_clear_error();
  return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE ? Handshake::kWaiting
                                                                       : Handshake::kFailed;
}

ssize_t GateConnection::Recv(char* buf, size_t size) {
  if (!tls_) return recv(fd_, buf, size, MSG_DONTWAIT);
  if (!handshake_done_) {
    errno = EAGAIN;
    return -1;
  }
  errno = 0;
  const int n = SSL_read(ssl_, buf, static_cast<int>(std::min<size_t>(size, 1 << 30)));
  return n > 0 ? n : AsSocketResult(ssl_, n);
}

ssize_t GateConnection::Send(const char* buf, size_t size) {
  if (!tls_) return send(fd_, buf, size, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (!handshake_done_) {
    errno = EAGAIN;
    return -1;
  }
  if (size == 0) return 0;
  errno = 0;
  const int n = SSL_write(ssl_, buf, static_cast<int>(std::min<size_t>(size, 1 << 30)));
  return n > 0 ? n : AsSocketResult(ssl_, n);
}

bool GateConnection::Buffered() const { return ssl_ && SSL_has_pending(ssl_) == 1; }

void GateConnection::EndWrites() {
  if (ssl_ && handshake_done_) {
    // close_notify: the client knows the answer was all of it. One try: the
    // socket does not wait, and a client that is not reading loses nothing
    // it asked for.
    (void)SSL_shutdown(ssl_);
    ERR_clear_error();
  }
  if (fd_ >= 0) shutdown(fd_, SHUT_WR);
}

void GateConnection::Close() {
  if (ssl_) {
    if (handshake_done_ && (SSL_get_shutdown(ssl_) & SSL_SENT_SHUTDOWN) == 0) {
      (void)SSL_shutdown(ssl_);
      ERR_clear_error();
    }
    SSL_free(ssl_);
    ssl_ = nullptr;
  }
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  handshake_done_ = false;
}

}  // namespace tfslurm::api
