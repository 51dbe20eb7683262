// What a file asking httplib for a larger backlog would define; httplib is
// compiled once, on its own (third_party/cpp-httplib), and ignores it
// (service/api/listen_backlog.h), which HttplibIgnoresTheDefineAndIsRaised
// checks.
#define CPPHTTPLIB_LISTEN_BACKLOG 4096

#include "service/api/listen_backlog.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

namespace tfslurm::api {
namespace {

// A loopback listener with a backlog of 1, as httplib's 5 but easier to fill.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd, 1) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      ADD_FAILURE() << "cannot listen on loopback";
    port = ntohs(addr.sin_port);
  }
  ~Listener() { close(fd); }
};

// Connects `n` clients at once without accepting any; returns how many
// connections complete within `wait_ms`. Past the backlog the kernel drops
// SYNs, and the client retries only after a second.
int ConnectWithoutAccept(int port, int n, int wait_ms) {
  std::vector<pollfd> clients;
  for (int i = 0; i < n; ++i) {
    int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    clients.push_back({c, POLLOUT, 0});
  }
  // Completed connections stay writable, so poll returns at once: count
  // against the clock.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  int done = 0;
  while (done < n && std::chrono::steady_clock::now() < deadline) {
    poll(clients.data(), clients.size(), 10);
    done = 0;
    for (auto& p : clients) {
      int error = 0;
      socklen_t len = sizeof error;
      if ((p.revents & POLLOUT) && getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 &&
          error == 0)
        ++done;
    }
    if (done < n) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (auto& p : clients) close(p.fd);
  return done;
}

// The backlog the kernel keeps for this process's socket listening on
// `port`, as `ss -ltn` shows it (Send-Q): for a listener, TCP_INFO's
// tcpi_sacked is its maximum backlog. -1 when nothing listens there.
int KernelBacklog(int port) {
  DIR* fds = opendir("/proc/self/fd");
  if (!fds) return -1;
  int backlog = -1;
  while (dirent* e = readdir(fds)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(fds)) continue;
    int accepting = 0;
    socklen_t len = sizeof accepting;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting) continue;
    sockaddr_in addr{};
    socklen_t alen = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0 ||
        addr.sin_family != AF_INET || ntohs(addr.sin_port) != port)
      continue;
    tcp_info info{};
    socklen_t ilen = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &ilen) == 0)
      backlog = static_cast<int>(info.tcpi_sacked);
  }
  closedir(fds);
  return backlog;
}

TEST(RaiseListenBacklog, HttplibIgnoresTheDefineAndIsRaised) {
  httplib::Server http;
  int port = http.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  // The vendored httplib passes its default, 128, to listen() whatever
  // CPPHTTPLIB_LISTEN_BACKLOG says here.
  EXPECT_EQ(KernelBacklog(port), 128);
  ASSERT_TRUE(RaiseListenBacklog(port));
  // listen(SOMAXCONN), which the kernel caps at net.core.somaxconn.
  int somaxconn = 0;
  ASSERT_TRUE(std::ifstream("/proc/sys/net/core/somaxconn") >> somaxconn);
  EXPECT_EQ(KernelBacklog(port), std::min(SOMAXCONN, somaxconn));
}

TEST(RaiseListenBacklog, LetsABurstOfClientsConnectAtOnce) {
  Listener small;
  EXPECT_LT(ConnectWithoutAccept(small.port, 32, 300), 32);  // the backlog of 1 is full
  Listener raised;
  ASSERT_TRUE(RaiseListenBacklog(raised.port));
  EXPECT_EQ(ConnectWithoutAccept(raised.port, 32, 300), 32);
}

TEST(RaiseListenBacklog, FalseWhenNothingListensOnThePort) {
  int port;
  {
    Listener closed;
    port = closed.port;
  }
  EXPECT_FALSE(RaiseListenBacklog(port));
}

}  // namespace
}  // namespace tfslurm::api
