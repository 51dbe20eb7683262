#include "agent/port_reservation.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace tfslurm::agent {
namespace {

Status ErrnoStatus(const std::string& what, int err) {
  return Error("cannot reserve a TCP port for the program: " + what + ": " + std::strerror(err));
}

}  // namespace

StatusOr<PortReservation> PortReservation::Reserve() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket", errno);
  const int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("setsockopt(SO_REUSEADDR/SO_REUSEPORT)", err);
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("bind(0.0.0.0:0)", err);
  }
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("getsockname", err);
  }
  // Deliberately no listen(): see the header.
  return PortReservation(fd, ntohs(addr.sin_port));
}

PortReservation::PortReservation(PortReservation&& other) noexcept
    : fd_(other.fd_), port_(other.port_) {
  other.fd_ = -1;
  other.port_ = 0;
}

PortReservation& PortReservation::operator=(PortReservation&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    port_ = other.port_;
    other.fd_ = -1;
    other.port_ = 0;
  }
  return *this;
}

PortReservation::~PortReservation() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace tfslurm::agent
