// One accepted REST connection's bytes, as the gate (request_gate.h) and the
// thread serving its request move them: plain on the socket, or TLS over it
// (an SSL the gate made from its SSL_CTX, --tls-cert).
//
// Every call is non-blocking and answers as recv(2)/send(2) with
// MSG_DONTWAIT do: bytes moved, 0 when the peer has closed, -1 with errno
// EAGAIN when it would wait (for TLS: OpenSSL's WANT_READ or WANT_WRITE; the
// caller waits for either with poll or epoll), any other errno when the
// connection is broken. So the gate reads a TLS request as it reads a plain
// one, on its one epoll thread, and no thread waits for a client's bytes.
//
// A TLS connection first completes its handshake (Handshake, driven by the
// gate until it is done, within the header timeout); until then nothing may
// be read or written on it, not even a refusal. TLS also buffers: bytes the
// kernel handed OpenSSL may sit decrypted in the SSL, where neither poll nor
// an edge-triggered epoll sees them, so a caller checks Buffered() before it
// waits.
//
// Thread safety: one thread at a time (the gate, then the serving thread,
// then the gate again: each hand-over goes through the gate's mutex).
#pragma once

#include <sys/types.h>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace tfslurm::api {

class GateConnection {
 public:
  // A plain connection on `fd`; or, with `tls`, a server-side TLS one made
  // from it (the socket is made non-blocking; OpenSSL's reads and writes on
  // it must not wait). An SSL that cannot be made leaves ok() false.
  GateConnection(int fd, SSL_CTX* tls);
  GateConnection() = default;
  ~GateConnection();
  GateConnection(GateConnection&& other) noexcept;
  GateConnection& operator=(GateConnection&& other) noexcept;
  GateConnection(const GateConnection&) = delete;
  GateConnection& operator=(const GateConnection&) = delete;

  bool ok() const { return fd_ >= 0 && (!tls_ || ssl_ != nullptr); }
  int fd() const { return fd_; }
  bool tls() const { return tls_; }

  enum class Handshake { kDone, kWaiting, kFailed };
  // Advances the TLS handshake as far as the bytes here allow; kDone at once
  // for a plain connection.
  Handshake AdvanceHandshake();
  bool handshake_done() const { return !tls_ || handshake_done_; }

  ssize_t Recv(char* buf, size_t size);
  ssize_t Send(const char* buf, size_t size);
  // Bytes already read from the socket and not yet returned by Recv.
  bool Buffered() const;

  // The answer is all: TLS's close_notify (one try, best effort), then
  // shutdown(SHUT_WR). Reading goes on.
  void EndWrites();
  // Says goodbye (TLS: close_notify, best effort), frees the SSL and closes
  // the socket; the destructor does it too.
  void Close();

 private:
  int fd_ = -1;
  bool tls_ = false;
  SSL* ssl_ = nullptr;
  bool handshake_done_ = false;
};

}  // namespace tfslurm::api
