// cpp-httplib 0.11 listens with a backlog of 5: a burst of clients (a
// dashboard per user, many curls, an agent per task) then waits for SYN
// retries of a second or more. httplib does not expose its socket, so
// RaiseListenBacklog finds it among the process's descriptors by its port
// and listens on it again with the system's maximum. Call it after
// bind_to_port and before listen_after_bind.
//
// Why not httplib's own CPPHTTPLIB_LISTEN_BACKLOG: Debian's cpp-httplib
// (0.11.4+ds-1+deb12u1) is a compiled library, and the define only reaches
// code compiled with it. In /usr/include/httplib.h the macro appears once,
// at lines 112-114 (#ifndef ... #define CPPHTTPLIB_LISTEN_BACKLOG 5); the
// header has no listen() call: Server::create_server_socket is only declared
// there (line 736) and defined in libcpp-httplib.so.0.11.4 (exported, nm -D),
// whose code passes the 5 as a constant (objdump: `mov $0x5,%esi; call
// listen@plt`, twice). Measured with `ss -ltn` on a bound httplib::Server:
// Send-Q (the backlog) 5 without the define, 5 with
// -DCPPHTTPLIB_LISTEN_BACKLOG=4096, and 4096 after RaiseListenBacklog
// (net.core.somaxconn 4096). tests/unit/listen_backlog_test.cc checks the
// library's 5 too: once it fails, the define works and this file can go.
//
// Thread safety: RaiseListenBacklog may be called from any thread; it only
// reads /proc/self/fd and calls listen() on the matching sockets.
#pragma once

namespace tfslurm::api {

// Raises the backlog of this process's listening TCP sockets (IPv4 or IPv6)
// bound to `port`. Returns false when there is none.
bool RaiseListenBacklog(int port);

}  // namespace tfslurm::api
