/* LD_PRELOAD shim: sets TCP_NODELAY on every socket the process accepts.
 *
 * For measuring tfslurmd as it would be with its REST listener calling
 * httplib::Server::set_tcp_nodelay(true), on the unmodified binary:
 *   LD_PRELOAD=.../libbench_tcp_nodelay.so tfslurmd ...
 * cpp-httplib writes a response's headers and body in separate send()s;
 * without TCP_NODELAY, Nagle's algorithm holds the body until the client
 * ACKs the headers, and the client delays that ACK (40 ms on Linux).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static void set_nodelay(int fd) {
  if (fd < 0) return;
  int one = 1;
  /* Fails harmlessly on non-TCP sockets (unix sockets). */
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int accept(int fd, struct sockaddr *addr, socklen_t *len) {
  static int (*real)(int, struct sockaddr *, socklen_t *);
  if (!real) real = (int (*)(int, struct sockaddr *, socklen_t *))dlsym(RTLD_NEXT, "accept");
  int s = real(fd, addr, len);
  set_nodelay(s);
  return s;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
  static int (*real)(int, struct sockaddr *, socklen_t *, int);
  if (!real) real = (int (*)(int, struct sockaddr *, socklen_t *, int))dlsym(RTLD_NEXT, "accept4");
  int s = real(fd, addr, len, flags);
  set_nodelay(s);
  return s;
}
