#include "service/api/listen_backlog.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>

namespace tfslurm::api {

bool RaiseListenBacklog(int port) {
  // Only open descriptors are listed, however high the file limit is.
  DIR* fds = opendir("/proc/self/fd");
  if (!fds) return false;
  bool raised = false;
  while (dirent* e = readdir(fds)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(fds)) continue;
    int accepting = 0;
    socklen_t len = sizeof accepting;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting) continue;
    sockaddr_storage addr{};
    socklen_t alen = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
    int p;
    if (addr.ss_family == AF_INET)
      p = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    else if (addr.ss_family == AF_INET6)
      p = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    else
      continue;
    if (p == port && listen(static_cast<int>(fd), SOMAXCONN) == 0) raised = true;
  }
  closedir(fds);
  return raised;
}

}  // namespace tfslurm::api
