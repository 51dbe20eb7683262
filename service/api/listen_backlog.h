// cpp-httplib listens with a small backlog (5 in Debian's 0.11; 128 in the
// vendored 0.53.1, CPPHTTPLIB_LISTEN_BACKLOG): a burst of clients (a
// dashboard per user, many curls, an agent per task) past it waits for SYN
// retries of a second or more. httplib does not expose its socket, so
// RaiseListenBacklog finds it among the process's descriptors by its port
// and listens on it again with the system's maximum. Call it after
// bind_to_port and before listen_after_bind.
//
// Why not httplib's own CPPHTTPLIB_LISTEN_BACKLOG: httplib is compiled once
// (third_party/cpp-httplib), so the define would have to be the library
// target's; it was not reachable at all in Debian's compiled library, where
// this began (`ss -ltn`: Send-Q 5 with or without -DCPPHTTPLIB_LISTEN_BACKLOG
// =4096, 4096 after RaiseListenBacklog). tests/unit/listen_backlog_test.cc
// checks the library's own value.
//
// Thread safety: RaiseListenBacklog may be called from any thread; it only
// reads /proc/self/fd and calls listen() on the matching sockets.
#pragma once

namespace tfslurm::api {

// Raises the backlog of this process's listening TCP sockets (IPv4 or IPv6)
// bound to `port`. Returns false when there is none.
bool RaiseListenBacklog(int port);

}  // namespace tfslurm::api
