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

// The socket options a program sets before bind().
enum class Reuse {
  kNone,
  // gRPC's TCP listeners, TensorFlow's among them: SO_REUSEADDR always,
  // SO_REUSEPORT only when asked (TF_GRPC_REUSE_PORT, off by default).
  kAddr,
  kPort,
};

// A socket bound to `port` on `any` (0.0.0.0 or [::]); -errno on failure.
int BindTo(int family, int port, Reuse reuse) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  const int one = 1;
  if (reuse == Reuse::kAddr) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (reuse == Reuse::kPort) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
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

TEST(PortReservationTest, ASocketWithoutReuseOptionsCannotTakeThePort) {
  auto reservation = PortReservation::Reserve();
  ASSERT_TRUE(reservation.ok()) << reservation.status().message();
  const int port = reservation->port();
  EXPECT_GT(port, 0);

  // Not listening: nobody can connect to the reservation itself.
  EXPECT_EQ(ConnectToLoopback(port), ECONNREFUSED);
  EXPECT_EQ(BindTo(AF_INET, port, Reuse::kNone), -EADDRINUSE);
}

TEST(PortReservationTest, GrpcDefaultServerBindsItThenHoldsItAlone) {
  // TensorFlow's gRPC server as TF 2.21 runs it by default (strace: one
  // setsockopt SO_REUSEADDR, then bind [::]:port, listen): Linux lets a
  // SO_REUSEADDR socket bind a port whose other holders set SO_REUSEADDR too
  // and none of them listens.
  auto reservation = PortReservation::Reserve();
  ASSERT_TRUE(reservation.ok());
  const int port = reservation->port();
  int server = BindTo(AF_INET6, port, Reuse::kAddr);
  if (server == -EAFNOSUPPORT) GTEST_SKIP() << "no IPv6 here";
  ASSERT_GE(server, 0) << "bind: " << std::strerror(-server);
  ASSERT_EQ(listen(server, 4), 0);
  EXPECT_EQ(ConnectToLoopback(port), 0);

  // Once the program listens, the port is its own: nobody else binds it,
  // with SO_REUSEADDR or SO_REUSEPORT, so no second listener can split its
  // connections.
  EXPECT_EQ(BindTo(AF_INET, port, Reuse::kAddr), -EADDRINUSE);
  EXPECT_EQ(BindTo(AF_INET, port, Reuse::kPort), -EADDRINUSE);
  EXPECT_EQ(BindTo(AF_INET6, port, Reuse::kPort), -EADDRINUSE);
  close(server);
}

TEST(PortReservationTest, ASoReusePortServerOfTheSameUserBindsIt) {
  // TF_GRPC_REUSE_PORT=true, or a program that sets SO_REUSEPORT itself.
  auto reservation = PortReservation::Reserve();
  ASSERT_TRUE(reservation.ok());
  int server = BindTo(AF_INET, reservation->port(), Reuse::kPort);
  ASSERT_GE(server, 0) << "bind: " << std::strerror(-server);
  ASSERT_EQ(listen(server, 4), 0);
  EXPECT_EQ(ConnectToLoopback(reservation->port()), 0);
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
  int fd = BindTo(AF_INET, port, Reuse::kNone);
  EXPECT_GE(fd, 0) << "port still held after destruction";
  if (fd >= 0) close(fd);
}

}  // namespace
}  // namespace tfslurm::agent
