// One tfslurmd per database, enforced. tfslurm's crash safety (one Slurm job
// per attempt, nothing lost) rests on a single process owning the database:
// two daemons on one file would both poll Slurm, reconcile, restart and
// resume the same experiments.
//
// The owner holds an exclusive flock(2) on "<db>.lock" for its whole life;
// the kernel drops it when the process dies, however it dies (kill -9
// included), so there is never a stale lock to clean up. The file's
// contents (pid, host, start time) are only there to name the holder to the
// next one that tries.
//
// flock is only as good as the file system's locking: on NFS it is emulated
// with byte-range locks (Linux 2.6.12+), which need a working lock manager,
// and other network file systems do not share locks across hosts at all.
// SQLite's WAL mode, which the store uses, does not work over a network file
// system either (it needs shared memory on one host: sqlite.org/wal.html).
// So a database on a network file system is refused (NetworkFileSystemName).
//
// Thread safety: a DatabaseOwnership is a plain owner of a file descriptor;
// the free functions are thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace tfslurm::store {

class DatabaseOwnership {
 public:
  // Takes the lock of db_path ("<db_path>.lock"), or says who holds it:
  // FailedPrecondition naming the holder's pid and host and what to do.
  // Unavailable when the lock file cannot be made. InvalidArgument when the
  // database's directory is on a network file system.
  static StatusOr<DatabaseOwnership> Acquire(const std::string& db_path);

  DatabaseOwnership(DatabaseOwnership&& other) noexcept;
  DatabaseOwnership& operator=(DatabaseOwnership&& other) noexcept;
  DatabaseOwnership(const DatabaseOwnership&) = delete;
  DatabaseOwnership& operator=(const DatabaseOwnership&) = delete;
  ~DatabaseOwnership();  // releases the lock

  const std::string& lock_path() const { return lock_path_; }

 private:
  DatabaseOwnership(int fd, std::string lock_path) : fd_(fd), lock_path_(std::move(lock_path)) {}
  int fd_ = -1;
  std::string lock_path_;
};

// The name of the network file system whose statfs(2) f_type this is ("nfs",
// "cifs", "lustre", ...), or "" for a local one.
std::string_view NetworkFileSystemName(long f_type);

}  // namespace tfslurm::store
