// Reserves a TCP port for the user's program, which binds it later.
//
// Why the agent binds the port instead of picking a number: fixed port bases
// collide when several tasks share a node, and a port found free and then
// released can be taken by anyone before the program binds it. So the agent
// keeps a socket bound to the port for the program's whole lifetime:
//
// - The socket is bound to 0.0.0.0:0 (the kernel picks a free port) with
//   SO_REUSEADDR and SO_REUSEPORT, and is never listen()ed on.
// - Linux lets another socket bind the port only if it sets SO_REUSEADDR (and
//   no holder listens) or SO_REUSEPORT as the same user. gRPC's TCP listeners
//   always set SO_REUSEADDR (grpc's tcp_server_utils_posix_common.cc), and
//   TensorFlow's gRPC server leaves SO_REUSEPORT off unless
//   TF_GRPC_REUSE_PORT=true (grpc_server_lib.cc); strace of TF 2.21 shows
//   SO_REUSEADDR, bind([::]:port), listen(). So TF binds the port with its
//   defaults, through SO_REUSEADDR. PyTorch's rank 0 binds MASTER_PORT (its
//   agent's port) for the TCPStore server the same way: c10d's socket.cpp
//   (SocketListenOp::tryListen) sets SO_REUSEADDR and no SO_REUSEPORT, and
//   the libuv backend of torch >= 2.4 binds with uv_tcp_bind, which sets
//   SO_REUSEADDR (libuv's uv__tcp_bind); strace of Debian's torch 1.13.1
//   shows SO_REUSEADDR, IPV6_V6ONLY=0, bind([::]:port), listen(2048). The
//   agent does not set
//   TF_GRPC_REUSE_PORT: without SO_REUSEPORT on TF's listener, nobody else
//   can bind the port once TF listens, so no second listener can split its
//   connections. JAX's process 0 binds JAX_COORDINATOR_ADDRESS's port (its
//   agent's) for the coordination service, XLA's gRPC server, which keeps
//   gRPC's default: strace of jax 0.10.2 shows SO_REUSEPORT, SO_REUSEADDR,
//   bind([::]:port), listen(4096). So it binds next to this socket as the
//   same user through SO_REUSEPORT; another user's program never can, and
//   only a program of the job's own user asking for this very number with
//   SO_REUSEPORT could listen beside it (docs/jax.md).
// - The kernel never hands a bound port to a socket asking for port 0 (with
//   the default net.ipv4.ip_autobind_reuse=0), nor uses it as a connect()
//   source port; so the only programs that could bind it before the user's
//   program does are ones asking for this very number with SO_REUSEADDR or
//   (same user) SO_REUSEPORT.
// - Because this socket does not listen, it is not in the kernel's listening
//   set: every incoming connection goes to the program's listening socket and
//   none is ever queued on ours.
// - The socket is close-on-exec: the program does not inherit it, and the
//   port is released only when the agent exits.
//
// Thread safety: a PortReservation is a plain owner of a file descriptor.
#ifndef TFSLURM_AGENT_PORT_RESERVATION_H_
#define TFSLURM_AGENT_PORT_RESERVATION_H_

#include "base/status.h"

namespace tfslurm::agent {

class PortReservation {
 public:
  // Binds a fresh port as described above.
  static StatusOr<PortReservation> Reserve();

  PortReservation(PortReservation&& other) noexcept;
  PortReservation& operator=(PortReservation&& other) noexcept;
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;
  ~PortReservation();

  int port() const { return port_; }
  int fd() const { return fd_; }

 private:
  PortReservation(int fd, int port) : fd_(fd), port_(port) {}
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_PORT_RESERVATION_H_
