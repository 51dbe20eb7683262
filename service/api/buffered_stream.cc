#include "service/api/buffered_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tfslurm::api {

BufferedStream::BufferedStream(GateConnection& connection, std::string request,
                               std::chrono::milliseconds write_timeout,
                               std::chrono::milliseconds response_timeout)
    : connection_(connection),
      request_(std::move(request)),
      write_timeout_(write_timeout),
      response_timeout_(response_timeout) {}

ssize_t BufferedStream::read(char* ptr, size_t size) {
  const size_t n = std::min(size, request_.size() - read_);
  std::memcpy(ptr, request_.data() + read_, n);
  read_ += n;
  return static_cast<ssize_t>(n);
}

const char* BufferedStream::buffered_data(size_t& size) const {
  // None left is nullptr, not an empty span: httplib's line reader takes a
  // pointer for bytes to scan, and would wait on an empty one forever.
  size = request_.size() - read_;
  return size > 0 ? request_.data() + read_ : nullptr;
}

void BufferedStream::consume_buffered(size_t size) {
  read_ += std::min(size, request_.size() - read_);
}

std::chrono::milliseconds BufferedStream::WriteWait() const {
  if (!deadline_) return write_timeout_;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline_ - Clock::now());
  return std::min(left, write_timeout_);
}

bool BufferedStream::wait_writable() const {
  const std::chrono::milliseconds wait = WriteWait();
  if (wait.count() < 0) return false;
  // TLS too: an SSL_write waits only for room (renegotiation is off:
  // tls/serving_identity.cc), never to read.
  pollfd p{connection_.fd(), POLLOUT, 0};
  int n;
  do {
    n = poll(&p, 1, static_cast<int>(wait.count()));
  } while (n < 0 && errno == EINTR);
  return n > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)) == 0;
}

ssize_t BufferedStream::write(const char* ptr, size_t size) {
  if (!deadline_) deadline_ = Clock::now() + response_timeout_;
  size_t written = 0;
  while (written < size) {
    const ssize_t n = connection_.Send(ptr + written, size - written);
    if (n > 0) {
      written += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_writable()) return -1;
    } else {
      return -1;
    }
  }
  return static_cast<ssize_t>(written);
}

void BufferedStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  SocketAddress(connection_.fd(), /*peer=*/true, ip, port);
}

void BufferedStream::get_local_ip_and_port(std::string& ip, int& port) const {
  SocketAddress(connection_.fd(), /*peer=*/false, ip, port);
}

time_t BufferedStream::duration() const {
  return std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started_).count();
}

void SocketAddress(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ip.clear();
  port = 0;
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    port = ntohs(in6->sin6_port);
  }
  ip = text;
}

}  // namespace tfslurm::api
