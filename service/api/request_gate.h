// The REST port's gate: no thread serves a connection until its whole
// request has arrived, within the limits.
//
// cpp-httplib serves a connection on one thread, which waits in recv for
// every byte of the request; a client that trickles a byte within every read
// timeout holds that thread for as long as it likes, and with enough such
// clients every thread is held and nobody else is answered (issue 41: 2,300
// of them delayed /healthz by 51 s). Here an accepted connection first waits
// at the gate, one thread with epoll for all of them, which reads its bytes
// as they come:
//   - the request line and header fields within `header_timeout` of the
//     accept, and the body within `request_timeout` (else 408);
//   - at most HeadLimits' header bytes and fields (431), a body only with a
//     Content-Length (411) of at most max_body_bytes (413), all checked by
//     ScanRequestHead (request_head.h) before anything else sees them;
//   - at most `max_buffered_bytes` held by all requests, waiting or being
//     served (503 past it), and at most `max_waiting` connections waiting
//     (the oldest is closed past it).
// A complete request is then handed to a thread (at most `max_threads` at
// once, started on demand: connection_threads.h) with its bytes, and
// httplib parses and routes it from memory (BufferedStream), so the thread
// never waits for the client. The response is written with `write_timeout`
// per write and `response_timeout` in all from its first byte. A kept-alive
// connection then goes back to the gate for its next request (its thread
// goes on to other work) unless that request comes within 50 ms, so that a
// next request trickling in holds a thread no longer than that; idle at the
// gate for `header_timeout`, the connection is closed.
//
// With TLS (--tls-cert: the constructor's `tls` sets up the SSL_CTX), the
// gate also does each connection's handshake, non-blocking on the same
// epoll thread (gate_connection.h), within `header_timeout` of the accept
// and counted among `max_waiting`: a client that stalls its handshake holds
// no thread, and after the handshake its request is read whole within the
// same limits, decrypted, before a thread sees it; the serving thread then
// writes the answer through the same SSL. (httplib's own SSLServer would
// accept, handshake and read on one thread per connection, each wait up to
// its read timeout: SSLServer::process_and_close_socket, which this class
// replaces as it replaces Server's.) A handshake costs this thread one
// ECDSA P-256 signature and one key exchange, about 0.2 ms: a few thousand
// new connections a second, and kept-alive ones handshake once.
//
// An `Expect: 100-continue` is answered by the gate once the head is
// accepted, and the field dropped before httplib reads the request. A
// refused client is answered, then what it still sends is read and dropped
// for up to 2 s (16 MiB), so that it reads the answer rather than a reset.
//
// Thread safety: as httplib::Server; the gate's state is guarded by mu_.
// Shutdown() after stop().
#pragma once

#include <httplib.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "service/api/connection_threads.h"
#include "service/api/gate_connection.h"
#include "service/api/gate_options.h"

namespace tfslurm::api {

class GatedServer final : public httplib::Server {
 public:
  // `tls`, when given, configures the REST port's SSL_CTX (certificate,
  // versions: tls/serving_identity.h); every connection then speaks TLS.
  explicit GatedServer(const GateOptions& options,
                       const std::function<void(SSL_CTX*)>& tls = nullptr);
  ~GatedServer() override;
  GatedServer(const GatedServer&) = delete;
  GatedServer& operator=(const GatedServer&) = delete;

  // Closes the waiting connections and waits for those being served (at
  // most 10 s). After stop(); idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // For tests and the log: connections waiting at the gate, and the bytes
  // held by requests waiting or being served.
  size_t waiting() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t buffered_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Waiting;
  // A refused connection whose client may still be sending: its bytes are
  // read and dropped until `until`, at most `discard_left` more.
  struct Lingering {
    uint64_t order;
    std::chrono::steady_clock::time_point until;
    size_t discard_left;
    GateConnection connection;
  };
  // A complete request, to be handed to a thread once the lock is released.
  struct Ready {
    GateConnection connection;
    std::string request;
    std::string leftover;  // what came after it: the start of the next request
  };

  // httplib's acceptor hands each accepted socket here (on its own thread,
  // through a task queue that runs it at once): it waits at the gate.
  bool process_and_close_socket(socket_t sock) override ABSL_LOCKS_EXCLUDED(mu_);
  // The gate's thread: epoll over the waiting connections, and their
  // deadlines.
  void RunGate() ABSL_LOCKS_EXCLUDED(mu_);
  // Reads what `w` has been sent; hands it on, refuses it or lets it wait.
  void OnReadable(Waiting& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Connections past their deadline get 408; returns the ms to the next one.
  int ExpireOverdue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Dispatch(Waiting& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers `w` with `http_status` and lingers on it (Lingering).
  void Refuse(Waiting& w, int http_status, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnLingering(int fd, Lingering& l) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopLingering(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(Waiting& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // On a connection thread: the request, as httplib's own
  // process_and_close_socket serves it, from memory; then the connection's
  // next request if all of it came along, else the connection goes back to
  // the gate (Repark) or is closed.
  void Serve(GateConnection connection, std::string request, std::string leftover)
      ABSL_LOCKS_EXCLUDED(mu_);
  // What became of a kept-alive connection's next request while its thread
  // waited for it (AwaitNext).
  enum class Next { kComplete, kWaitAtGate, kClosed, kRefused };
  // Reads the connection's next request into `bytes` (which may hold its
  // start) for up to 50 ms; `head` gets its scan.
  Next AwaitNext(GateConnection& connection, std::string& bytes, HeadScan& head)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A kept-alive connection waits at the gate for its next request, whose
  // first bytes may be `leftover`.
  void Repark(GateConnection connection, std::string leftover) ABSL_LOCKS_EXCLUDED(mu_);

  const GateOptions options_;
  SSL_CTX* tls_ = nullptr;  // with TLS; owned
  OnDemandThreads threads_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: Shutdown wakes the gate's thread
  std::thread gate_;

  mutable Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::unordered_map<int, std::unique_ptr<Waiting>> waiting_ ABSL_GUARDED_BY(mu_);  // by fd
  std::map<uint64_t, int> by_age_ ABSL_GUARDED_BY(mu_);  // accept order -> fd
  uint64_t accepted_ ABSL_GUARDED_BY(mu_) = 0;
  size_t buffered_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Ready> ready_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<int, Lingering> lingering_ ABSL_GUARDED_BY(mu_);  // by fd
  // (until, (fd, order)), in the order they began lingering.
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::pair<int, uint64_t>>>
      linger_queue_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfslurm::api
