#include "service/api/request_gate.h"

#include <openssl/ssl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <vector>

#include "base/status.h"
#include "service/api/buffered_stream.h"
#include "service/api/errors.h"

namespace tfslurm::api {
namespace {

using Clock = std::chrono::steady_clock;

// httplib's acceptor calls the server's process_and_close_socket through its
// task queue; this one runs it at once, on the acceptor's thread, where the
// gate only takes the socket in.
class RunAtOnce final : public httplib::TaskQueue {
 public:
  bool enqueue(std::function<void()> fn) override {
    fn();
    return true;
  }
  void shutdown() override {}
};

const char* ReasonPhrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Service Unavailable";
  }
}

// The answer to a request refused at the gate: the API's JSON error shape
// (errors.h), the HTTP status the refusal calls for.
std::string RefusalResponse(int http_status, const std::string& message) {
  const Status status = http_status == 400   ? InvalidArgument(message)
                        : http_status == 411 ? InvalidArgument(message)
                        : http_status == 408 || http_status == 503
                            ? Unavailable(message)
                            : Status(StatusCode::kResourceExhausted, message);
  const std::string body = ErrorBody(status);
  return "HTTP/1.1 " + std::to_string(http_status) + " " + ReasonPhrase(http_status) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

// Closes a connection after its answer, at once: what the client has sent
// and the gate has not read is dropped (at most 64 KiB of it is read first,
// without waiting, so that a close does not reset the connection before a
// small answer is read).
// A TLS connection whose handshake has not finished gets no answer: there is
// no session to write it in.
void CloseAfter(GateConnection connection, const std::string& answer) {
  if (!connection.handshake_done()) return;  // closed by its destructor
  if (!answer.empty()) (void)connection.Send(answer.data(), answer.size());
  connection.EndWrites();
  char sink[16384];
  for (int i = 0; i < 4 && connection.Recv(sink, sizeof sink) > 0; ++i) {
  }
}

// A refused client may still be sending its request (a body over the limit,
// say): closing with its bytes unread would reset the connection, and most
// clients, sending all before they read, would see a broken pipe instead of
// the answer. So the gate reads and drops what it sends for a while: at most
// kLingerTime, kLingerBytes, and never more than max_waiting connections.
constexpr std::chrono::milliseconds kLingerTime{2000};

// How long a thread that has answered a kept-alive connection waits for its
// next request before handing it back to the gate: long enough for a
// client's next call (one wake-up per request, not two), short enough that
// a client trickling its next request holds the thread no longer than this
// for each request it has made.
constexpr std::chrono::milliseconds kNextRequestWait{50};
constexpr size_t kLingerBytes = 16 << 20;

// The first request of `bytes` (whose head `head` scanned complete, and
// which holds all of it) for httplib, and what follows it in `*leftover`
// (the start of a next request on the connection). An Expect field is
// dropped: the gate answered it, or the body is here already.
std::string TakeRequest(std::string bytes, const HeadScan& head, std::string* leftover) {
  const size_t whole = head.head_bytes + head.body_bytes;
  *leftover = bytes.substr(whole);
  bytes.resize(whole);
  if (head.expects_continue)
    bytes.erase(head.expect_line_begin, head.expect_line_end - head.expect_line_begin);
  return bytes;
}

}  // namespace

struct GatedServer::Waiting {
  int fd = -1;
  GateConnection connection;  // on `fd`
  uint64_t order = 0;
  Clock::time_point accepted;
  std::string bytes;
  HeadScan head;  // kComplete once the head has arrived
  bool continue_sent = false;
  bool kept_alive = false;  // back after an answer, for the connection's next request
};

GatedServer::GatedServer(const GateOptions& options, const std::function<void(SSL_CTX*)>& tls)
    : options_(options), threads_(options.max_threads) {
  new_task_queue = [] { return new RunAtOnce(); };
  if (tls) {
    tls_ = SSL_CTX_new(TLS_server_method());
    if (!tls_) {
      spdlog::critical("the REST port cannot make its TLS context");
    } else {
      // An idle kept-alive connection holds no read buffer (up to 10,000
      // wait at the gate).
      SSL_CTX_set_mode(tls_, SSL_MODE_RELEASE_BUFFERS);
      tls(tls_);
    }
  }
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event wake{};
  wake.events = EPOLLIN;
  wake.data.fd = wake_fd_;
  if (epoll_fd_ < 0 || wake_fd_ < 0 || epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake) != 0)
    spdlog::critical("the REST port's gate cannot start: {}", strerror(errno));
  gate_ = std::thread([this] { RunGate(); });
}

GatedServer::~GatedServer() {
  Shutdown();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (tls_) SSL_CTX_free(tls_);
}

void GatedServer::Shutdown() {
  {
    MutexLock lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    waiting_.clear();  // each closes its connection
    by_age_.clear();
    lingering_.clear();
    linger_queue_.clear();
  }
  const uint64_t one = 1;
  // An eventfd's counter cannot overflow from one write: it cannot fail.
  // Kept in a variable: glibc's _FORTIFY_SOURCE declares write()
  // warn_unused_result, which a (void) cast does not silence.
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
  if (gate_.joinable()) gate_.join();
  threads_.shutdown();
}

size_t GatedServer::waiting() const {
  MutexLock lock(mu_);
  return waiting_.size();
}

size_t GatedServer::buffered_bytes() const {
  MutexLock lock(mu_);
  return buffered_;
}

bool GatedServer::process_and_close_socket(socket_t sock) {
  MutexLock lock(mu_);
  GateConnection connection(sock, tls_);
  if (shut_down_ || !connection.ok()) return false;
  // Full: the connection that has waited longest goes (it is the closest to
  // its deadline, and an honest client's request arrives at once).
  if (waiting_.size() >= options_.max_waiting && !by_age_.empty()) {
    Waiting& oldest = *waiting_.at(by_age_.begin()->second);
    GateConnection closing = std::move(oldest.connection);
    Forget(oldest);
    CloseAfter(std::move(closing), RefusalResponse(503,
                                                   "tfslurmd has too many connections whose "
                                                   "request has not arrived; retry"));
  }
  auto w = std::make_unique<Waiting>();
  w->fd = sock;
  w->connection = std::move(connection);
  w->order = ++accepted_;
  w->accepted = Clock::now();
  epoll_event ev{};
  // Edge-triggered: reported once per arrival; OnReadable reads until none
  // is left. Data already there when it is added is reported too. A TLS
  // handshake may also wait for room to write its flight.
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET | (tls_ ? EPOLLOUT : 0);
  ev.data.fd = sock;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, sock, &ev) != 0) {
    spdlog::warn("the REST port's gate cannot watch a connection: {}", strerror(errno));
    return false;
  }
  by_age_[w->order] = sock;
  waiting_[sock] = std::move(w);
  return true;
}

void GatedServer::RunGate() {
  std::vector<epoll_event> events(256);
  int wait_ms = 1000;
  for (;;) {
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), wait_ms);
    if (n < 0 && errno != EINTR) {
      spdlog::error("the REST port's gate: epoll_wait: {}", strerror(errno));
      return;
    }
    std::vector<Ready> ready;
    {
      MutexLock lock(mu_);
      if (shut_down_) return;
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_fd_) {
          // Drains the eventfd (a failed read leaves it readable: the next
          // epoll_wait says so again). Kept in a variable: glibc's
          // _FORTIFY_SOURCE declares read() warn_unused_result, which a
          // (void) cast does not silence.
          uint64_t count;
          ssize_t drained = ::read(wake_fd_, &count, sizeof count);
          (void)drained;
          continue;
        }
        if (auto it = waiting_.find(fd); it != waiting_.end())
          OnReadable(*it->second);
        else if (auto l = lingering_.find(fd); l != lingering_.end())
          OnLingering(fd, l->second);
      }
      wait_ms = ExpireOverdue();
      ready.swap(ready_);
    }
    // Outside the lock: a thread that cannot be started serves it right here.
    for (Ready& r : ready) {
      const size_t held = r.request.size() + r.leftover.size();
      auto connection = std::make_shared<GateConnection>(std::move(r.connection));
      if (!threads_.enqueue([this, connection, request = std::move(r.request),
                             leftover = std::move(r.leftover)]() mutable {
            Serve(std::move(*connection), std::move(request), std::move(leftover));
          })) {
        connection->Close();  // shutting down
        MutexLock lock(mu_);
        buffered_ -= held;
      }
    }
  }
}

void GatedServer::OnReadable(Waiting& w) {
  // TLS: the handshake first, on this thread, within the header timeout
  // (ExpireOverdue); a stranger who stalls it holds no thread.
  switch (w.connection.AdvanceHandshake()) {
    case GateConnection::Handshake::kWaiting:
      return;
    case GateConnection::Handshake::kFailed: {
      // A plaintext HTTP request was answered in plaintext
      // (tls/serving_identity.h): what else the client sent is read first,
      // without waiting, so that the close does not reset the connection
      // before the answer is read (as CloseAfter does).
      shutdown(w.fd, SHUT_WR);
      char sink[16384];
      for (int i = 0; i < 4 && recv(w.fd, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
      }
      return Forget(w);
    }
    case GateConnection::Handshake::kDone:
      break;
  }
  char buf[16384];
  for (;;) {
    // As much as the head may be until it has ended, then exactly the body.
    const size_t limit = w.head.kind == HeadScan::Kind::kComplete
                             ? w.head.head_bytes + w.head.body_bytes
                             : options_.head.max_header_bytes + 1;
    const size_t want = limit - std::min(w.bytes.size(), limit);
    if (want == 0) break;
    const ssize_t n = w.connection.Recv(buf, std::min(want, sizeof buf));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      return Forget(w);  // the client went away
    if (n < 0) {
      if (errno == EINTR) continue;
      break;  // all read; edge-triggered, so the next arrival is reported
    }
    if (buffered_ + static_cast<size_t>(n) > options_.max_buffered_bytes)
      return Refuse(w, 503, "tfslurmd holds too many requests at once; retry");
    w.bytes.append(buf, static_cast<size_t>(n));
    buffered_ += static_cast<size_t>(n);
    if (w.head.kind != HeadScan::Kind::kComplete) {
      w.head = ScanRequestHead(w.bytes, options_.head);
      if (w.head.kind == HeadScan::Kind::kRefused) return Refuse(w, w.head.status, w.head.message);
    }
  }
  if (w.head.kind != HeadScan::Kind::kComplete) return;
  const size_t whole = w.head.head_bytes + w.head.body_bytes;
  if (w.bytes.size() >= whole) return Dispatch(w);
  if (w.head.expects_continue && !w.continue_sent) {
    static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    (void)w.connection.Send(kContinue, sizeof kContinue - 1);
    w.continue_sent = true;
  }
}

int GatedServer::ExpireOverdue() {
  const Clock::time_point now = Clock::now();
  int next_ms = 1000;
  // Lingering ones in the order they began, each for kLingerTime.
  while (!linger_queue_.empty() && linger_queue_.front().first <= now) {
    const auto [fd, order] = linger_queue_.front().second;
    linger_queue_.pop_front();
    if (auto l = lingering_.find(fd); l != lingering_.end() && l->second.order == order)
      StopLingering(fd);
  }
  if (!linger_queue_.empty())
    next_ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(linger_queue_.front().first - now)
            .count() +
        1);
  // In accept order; a head that has arrived has the later deadline of the
  // whole request, so the scan stops at the first head still in time.
  for (auto it = by_age_.begin(); it != by_age_.end();) {
    Waiting& w = *waiting_.at(it->second);
    ++it;
    const bool head_done = w.head.kind == HeadScan::Kind::kComplete;
    const auto deadline =
        w.accepted + (head_done ? options_.request_timeout : options_.header_timeout);
    if (now >= deadline && w.kept_alive && w.bytes.empty()) {
      Forget(w);  // an idle kept-alive connection: closed, as any server does
      continue;
    }
    if (now >= deadline) {
      Refuse(w, 408,
             head_done ? "the request's body did not arrive within " +
                             std::to_string(options_.request_timeout.count() / 1000) + " s"
                       : "the request's header fields did not arrive within " +
                             std::to_string(options_.header_timeout.count() / 1000) + " s");
      continue;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    next_ms = std::min<int>(next_ms, static_cast<int>(left.count()) + 1);
    if (!head_done) break;
  }
  return next_ms;
}

void GatedServer::Dispatch(Waiting& w) {
  Ready r{std::move(w.connection), {}, {}};
  buffered_ -= w.bytes.size();
  r.request = TakeRequest(std::move(w.bytes), w.head, &r.leftover);
  w.bytes.clear();
  Forget(w);
  buffered_ += r.request.size() + r.leftover.size();  // held until served
  ready_.push_back(std::move(r));
}

void GatedServer::Refuse(Waiting& w, int http_status, const std::string& message) {
  const int fd = w.fd;
  const uint64_t order = w.order;
  const std::string answer = RefusalResponse(http_status, message);
  // A TLS handshake not done (too slow): no session to answer in.
  if (lingering_.size() >= options_.max_waiting || !w.connection.handshake_done()) {
    GateConnection closing = std::move(w.connection);
    Forget(w);
    return CloseAfter(std::move(closing), answer);
  }
  GateConnection connection = std::move(w.connection);
  (void)connection.Send(answer.data(), answer.size());
  connection.EndWrites();  // the answer is all: the client reads it, then the end
  // Out of the waiting connections, still watched by epoll.
  buffered_ -= w.bytes.size();
  by_age_.erase(w.order);
  waiting_.erase(fd);
  const Clock::time_point until = Clock::now() + kLingerTime;
  lingering_[fd] = {order, until, kLingerBytes, std::move(connection)};
  linger_queue_.push_back({until, {fd, order}});
}

void GatedServer::OnLingering(int fd, Lingering& l) {
  char sink[16384];
  for (;;) {
    const ssize_t n = l.connection.Recv(sink, sizeof sink);
    if (n > 0 && static_cast<size_t>(n) < l.discard_left) {
      l.discard_left -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    return StopLingering(fd);  // the client closed, or has sent enough
  }
}

void GatedServer::StopLingering(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  lingering_.erase(fd);  // closes it
}

void GatedServer::Forget(Waiting& w) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, w.fd, nullptr);
  buffered_ -= w.bytes.size();
  by_age_.erase(w.order);
  waiting_.erase(w.fd);  // destroys w, closing its connection unless it was moved out
}

void GatedServer::Serve(GateConnection connection, std::string request, std::string leftover) {
  std::string remote_addr, local_addr;
  int remote_port = 0, local_port = 0;
  SocketAddress(connection.fd(), /*peer=*/true, remote_addr, remote_port);
  SocketAddress(connection.fd(), /*peer=*/false, local_addr, local_port);
  for (size_t served = 1;; ++served) {
    const size_t held = request.size() + leftover.size();
    // The connection's last request says so in its answer.
    const bool last = served >= keep_alive_max_count_;
    bool closed = last;
    bool written;
    {
      BufferedStream stream(connection, std::move(request), options_.write_timeout,
                            options_.response_timeout);
      written = process_request(stream, remote_addr, remote_port, local_addr, local_port, last,
                                closed, nullptr);
    }
    {
      MutexLock lock(mu_);
      buffered_ -= held;
      buffered_ += leftover.size();  // until it is served or waits at the gate
    }
    if (!written || closed) break;
    // The connection's next request, if it comes at once (pipelined, or a
    // client's next call), is served on this thread; else the connection
    // waits for it at the gate, without a thread.
    HeadScan next;
    switch (AwaitNext(connection, leftover, next)) {
      case Next::kWaitAtGate:
        return Repark(std::move(connection), std::move(leftover));
      case Next::kClosed:
        break;
      case Next::kRefused: {
        {
          MutexLock lock(mu_);
          buffered_ -= leftover.size();
        }
        return CloseAfter(std::move(connection), RefusalResponse(next.status, next.message));
      }
      case Next::kComplete: {
        const size_t counted = leftover.size();
        request = TakeRequest(std::move(leftover), next, &leftover);
        MutexLock lock(mu_);
        buffered_ -= counted - (request.size() + leftover.size());  // an Expect line dropped
        continue;
      }
    }
    break;
  }
  MutexLock lock(mu_);
  buffered_ -= leftover.size();
  CloseAfter(std::move(connection), "");
}

GatedServer::Next GatedServer::AwaitNext(GateConnection& connection, std::string& bytes,
                                         HeadScan& head) {
  const Clock::time_point until = Clock::now() + kNextRequestWait;
  bool continue_sent = false;
  char buf[16384];
  for (;;) {
    head = ScanRequestHead(bytes, options_.head);
    if (head.kind == HeadScan::Kind::kRefused) return Next::kRefused;
    const bool head_done = head.kind == HeadScan::Kind::kComplete;
    const size_t limit =
        head_done ? head.head_bytes + head.body_bytes : options_.head.max_header_bytes + 1;
    if (head_done && bytes.size() >= limit) return Next::kComplete;
    if (head_done && head.expects_continue && !continue_sent) {
      static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      (void)connection.Send(kContinue, sizeof kContinue - 1);
      continue_sent = true;
    }
    // Bytes TLS has decrypted already are read before any wait: no poll
    // would report them.
    if (!connection.Buffered()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      if (left.count() <= 0) return Next::kWaitAtGate;
      pollfd p{connection.fd(), POLLIN, 0};
      const int ready = poll(&p, 1, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return Next::kWaitAtGate;
    }
    const ssize_t n =
        connection.Recv(buf, std::min(limit - std::min(bytes.size(), limit), sizeof buf));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      return Next::kClosed;
    if (n < 0) continue;
    {
      MutexLock lock(mu_);
      if (buffered_ + static_cast<size_t>(n) > options_.max_buffered_bytes) return Next::kClosed;
      buffered_ += static_cast<size_t>(n);
    }
    bytes.append(buf, static_cast<size_t>(n));
  }
}

void GatedServer::Repark(GateConnection connection, std::string leftover) {
  MutexLock lock(mu_);
  buffered_ -= leftover.size();
  if (shut_down_) return;  // closes it
  const int fd = connection.fd();
  auto w = std::make_unique<Waiting>();
  w->fd = fd;
  w->connection = std::move(connection);
  w->order = ++accepted_;
  w->accepted = Clock::now();
  w->kept_alive = true;
  w->bytes = std::move(leftover);
  buffered_ += w->bytes.size();
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    buffered_ -= w->bytes.size();
    return;  // closes it
  }
  Waiting& parked = *w;
  by_age_[w->order] = fd;
  waiting_[fd] = std::move(w);
  // Part of the next request may be here already: its head is checked now
  // (what is still to come is reported by epoll).
  if (!parked.bytes.empty()) {
    parked.head = ScanRequestHead(parked.bytes, options_.head);
    if (parked.head.kind == HeadScan::Kind::kRefused)
      Refuse(parked, parked.head.status, parked.head.message);
  }
}

}  // namespace tfslurm::api
