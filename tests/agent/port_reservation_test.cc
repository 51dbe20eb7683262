#include "agent/port_reservation.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tfslurm::agent {
namespace {

// A socket bound to `port` on `any` (0.0.0.0 or [::]); -errno on failure.
int BindTo(int family, int port, bool reuse_port) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  const int one = 1;
  if (reuse_port) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  int rc;
  if (family == AF_INET) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(port);
    rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } else {
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(port);
    rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  if (rc != 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  return fd;
}

int ConnectToLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = rc == 0 ? 0 : errno;
  close(fd);
  return err;
}

TEST(PortReservationTest, ReservesAPortOnlySoReusePortSocketsCanShare) {
  auto reservation = PortReservation::Reserve();
  ASSERT_TRUE(reservation.ok()) << reservation.status().message();
  const int port = reservation->port();
  EXPECT_GT(port, 0);

  // Not listening: nobody can connect to the reservation itself.
  EXPECT_EQ(ConnectToLoopback(port), ECONNREFUSED);

  // An unrelated program cannot take the port...
  EXPECT_EQ(BindTo(AF_INET, port, /*reuse_port=*/false), -EADDRINUSE);

  // ...while the user's program (SO_REUSEPORT, same user) binds and listens,
  // and gets the connections.
  int server = BindTo(AF_INET, port, /*reuse_port=*/true);
  ASSERT_GE(server, 0) << "bind: " << std::strerror(-server);
  ASSERT_EQ(listen(server, 4), 0);
  EXPECT_EQ(ConnectToLoopback(port), 0);
  close(server);
}

TEST(PortReservationTest, DualStackServerCanBindTheReservedPort) {
  // TensorFlow's gRPC server binds [::]:port.
  auto reservation = PortReservation::Reserve();
  ASSERT_TRUE(reservation.ok());
  int server = BindTo(AF_INET6, reservation->port(), /*reuse_port=*/true);
  if (server == -EAFNOSUPPORT) GTEST_SKIP() << "no IPv6 here";
  ASSERT_GE(server, 0) << "bind: " << std::strerror(-server);
  EXPECT_EQ(listen(server, 4), 0);
  close(server);
}

TEST(PortReservationTest, CloseOnExecAndReleasedOnDestruction) {
  int port;
  {
    auto reservation = PortReservation::Reserve();
    ASSERT_TRUE(reservation.ok());
    EXPECT_TRUE(fcntl(reservation->fd(), F_GETFD) & FD_CLOEXEC);
    port = reservation->port();
    PortReservation moved = std::move(reservation).value();
    EXPECT_EQ(moved.port(), port);
  }
  int fd = BindTo(AF_INET, port, /*reuse_port=*/false);
  EXPECT_GE(fd, 0) << "port still held after destruction";
  if (fd >= 0) close(fd);
}

}  // namespace
}  // namespace tfslurm::agent
