#include "service/store/ownership_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>

namespace tfslurm::store {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

std::string HostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "?";
  return host;
}

std::string UtcNow() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// What the holder wrote into the lock file: "pid 123 on host vm since ...".
std::string ReadHolder(int fd) {
  char buf[512] = {};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "";
  std::string text(buf, static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

}  // namespace

std::string_view NetworkFileSystemName(long f_type) {
  // Magic numbers from linux/magic.h and the file systems' own headers.
  switch (static_cast<unsigned long>(f_type) & 0xffffffffUL) {
    case 0x6969UL:
      return "nfs";
    case 0x517BUL:
      return "smb";
    case 0xFF534D42UL:
      return "cifs";
    case 0xFE534D42UL:
      return "smb2";
    case 0x0BD00BD0UL:
      return "lustre";
    case 0x47504653UL:
      return "gpfs";
    case 0x19830326UL:
      return "beegfs";
    case 0x00C36400UL:
      return "ceph";
    case 0x6B414653UL:
      return "afs";
    case 0x01021997UL:
      return "9p";
    case 0x73757245UL:
      return "coda";
    case 0x7461636FUL:
      return "ocfs2";
    case 0x01161970UL:
      return "gfs2";
    case 0x65735546UL:
      return "fuse";  // sshfs, s3fs, gcsfuse...: remote more often than not
    default:
      return "";
  }
}

StatusOr<DatabaseOwnership> DatabaseOwnership::Acquire(const std::string& db_path) {
  std::string lock_path = db_path + ".lock";
  std::filesystem::path dir = std::filesystem::absolute(db_path).parent_path();
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) == 0) {
    std::string_view network = NetworkFileSystemName(static_cast<long>(fs.f_type));
    if (!network.empty()) {
      return InvalidArgument(
          "--db " + db_path + " is on a network file system (" + std::string(network) +
          "): SQLite's WAL journal needs one host's shared memory and file locks do not hold "
          "across hosts there, so two tfslurmd on different hosts could both own it; put the "
          "database on a local disk of the service's host");
    }
  }
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Unavailable("cannot open the database's lock file " + lock_path + ": " +
                       ErrnoText(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    std::string holder = ReadHolder(fd);
    ::close(fd);
    if (err != EWOULDBLOCK) {
      return Unavailable("cannot lock " + lock_path + ": " + ErrnoText(err));
    }
    return FailedPrecondition(
        "database " + db_path + " is owned by another tfslurmd (" +
        (holder.empty() ? std::string("holder unknown") : holder) + "; lock file " + lock_path +
        "): one tfslurmd owns a database. Stop that one first (its jobs go on and this one "
        "picks them up), or give this one its own --db");
  }
  std::string me =
      "pid " + std::to_string(::getpid()) + " on host " + HostName() + " since " + UtcNow() + "\n";
  // The lock is what matters; the text only names this process to others.
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, me.data(), me.size(), 0);
  return DatabaseOwnership(fd, std::move(lock_path));
}

DatabaseOwnership::DatabaseOwnership(DatabaseOwnership&& other) noexcept
    : fd_(other.fd_), lock_path_(std::move(other.lock_path_)) {
  other.fd_ = -1;
}

DatabaseOwnership& DatabaseOwnership::operator=(DatabaseOwnership&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    lock_path_ = std::move(other.lock_path_);
    other.fd_ = -1;
  }
  return *this;
}

DatabaseOwnership::~DatabaseOwnership() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace tfslurm::store
