// cpp-httplib 0.11 listens with a backlog of 5: a burst of clients (a
// dashboard per user, many curls, an agent per task) then waits for SYN
// retries of a second or more. httplib does not expose its socket, so
// RaiseListenBacklog finds it among the process's descriptors by its port
// and listens on it again with the system's maximum. Call it after
// bind_to_port and before listen_after_bind; safe from any thread.
#pragma once

namespace tfslurm::api {

// Raises the backlog of this process's listening TCP sockets (IPv4 or IPv6)
// bound to `port`. Returns false when there is none.
bool RaiseListenBacklog(int port);

}  // namespace tfslurm::api
