// The identity a server presents, as a private pair of files for a reader
// that watches paths rather than taking objects: gRPC's
// FileWatcherCertificateProvider (grpc_tls_certificate_provider.cc in gRPC
// 1.51), which re-reads a key path and a certificate path every
// refresh interval and serves whatever it read.
//
// Why a copy and not the admin's files: the admin's files change when the
// admin writes them, one at a time, and the watcher would serve a half-done
// change (a new certificate with the old key) until it read again; tfslurmd
// reloads on SIGHUP only, and only a pair it has checked. Replace writes the
// pair into a new generation directory and switches the `current` symlink
// to it with one rename, so both paths change at one instant. The watcher
// notices a change between reading its two files by their modification
// times (it stats each before and after), and retries; every file of
// generation N has the time N (seconds since the epoch), so no two
// generations share one, however fast they follow each other.
//
// The directory is made with mkdtemp, mode 0700, in $RUNTIME_DIRECTORY
// (systemd's RuntimeDirectory, a tmpfs removed when the service stops),
// else $TMPDIR, else /tmp; it is removed by the destructor. The generation
// before the current one is kept until the next Replace, for a reader in
// the middle of a read.
//
// Thread safety: Replace from one thread at a time; the paths are constant.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "tls/certificates.h"

namespace tfslurm::tls {

class StagedIdentity {
 public:
  static StatusOr<std::unique_ptr<StagedIdentity>> Create(const ServerIdentity& identity);
  ~StagedIdentity();
  StagedIdentity(const StagedIdentity&) = delete;
  StagedIdentity& operator=(const StagedIdentity&) = delete;

  Status Replace(const ServerIdentity& identity);

  // <dir>/current/server.key and <dir>/current/server.pem.
  std::string key_path() const { return dir_ + "/current/server.key"; }
  std::string cert_path() const { return dir_ + "/current/server.pem"; }
  const std::string& dir() const { return dir_; }

 private:
  explicit StagedIdentity(std::string dir) : dir_(std::move(dir)) {}
  std::string GenerationDir(int n) const { return dir_ + "/g" + std::to_string(n); }

  const std::string dir_;
  int generation_ = 0;
};

}  // namespace tfslurm::tls
