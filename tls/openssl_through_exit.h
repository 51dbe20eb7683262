// OpenSSL's own teardown at exit, switched off for a process whose threads
// outlive it.
//
// Unless told otherwise at its first initialization, OpenSSL registers an
// atexit handler (OPENSSL_cleanup) that frees its tables and deletes the
// thread-local keys whose destructors free each thread's state. gRPC's
// threads (a server's handshakes, its executors) still run then: one that
// ends after the handler leaves its error queue (ERR_STATE, 904 bytes)
// unfreed, which LeakSanitizer reports, and one still in a handshake uses
// tables the handler freed. With the handler off, every thread's state is
// freed as the thread ends, and the kernel takes the rest back at exit.
//
// Call KeepOpenSslThroughExit() before anything touches OpenSSL (the first
// line of main): only the first initialization decides. Test binaries, whose
// main is gtest's, get it from tests/openssl_through_exit_at_start.cc.
#pragma once

namespace tfslurm::tls {

void KeepOpenSslThroughExit();

}  // namespace tfslurm::tls
