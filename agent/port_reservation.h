// Reserves a TCP port for the user's program, which binds it later.
//
// Why the agent binds the port instead of picking a number: fixed port bases
// collide when several tasks share a node, and a port found free and then
// released can be taken by anyone before the program binds it. So the agent
// keeps a socket bound to the port for the program's whole lifetime:
//
// - The socket is bound to 0.0.0.0:0 (the kernel picks a free port) with
//   SO_REUSEADDR and SO_REUSEPORT, and is never listen()ed on.
// - Any other socket that wants the port must also set SO_REUSEPORT and run
//   as the same user (Linux's rule for sharing a port), so unrelated programs
//   get EADDRINUSE while the user's program can bind it: TensorFlow's gRPC
//   server sets SO_REUSEPORT by default, and so does our example.
// - Because this socket does not listen, it is not in the kernel's listening
//   set: every incoming connection goes to the program's listening socket and
//   none is ever queued on ours.
// - The socket is close-on-exec: the program does not inherit it, and the
//   port is released only when the agent exits.
//
// Thread safety: a PortReservation is a plain owner of a file descriptor.
#ifndef TFSLURM_AGENT_PORT_RESERVATION_H_
#define TFSLURM_AGENT_PORT_RESERVATION_H_

#include "agent/status.h"

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
