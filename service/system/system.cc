#include "service/system/system.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <vector>

#include "base/sha256.h"
#include "schema/checkpoint_name.h"
#include "service/system/remove_tree.h"
#include "service/system/thread_identity.h"

namespace tfslurm::system {
namespace {

class SystemClock final : public Clock {
 public:
  int64_t NowMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

class SystemRandomness final : public Randomness {
 public:
  std::string NewSecret() override { return RandomHex(32); }
  std::string NewExperimentId() override {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
    return std::string("exp-") + buf + "-" + RandomHex(3);
  }

 private:
  static std::string RandomHex(size_t bytes) {
    std::vector<unsigned char> buf(bytes);
    if (RAND_bytes(buf.data(), static_cast<int>(bytes)) != 1) {
      spdlog::critical("RAND_bytes failed: no secret can be made safely; stopping");
      std::abort();
    }
    return HexBytes(buf.data(), bytes);
  }
};

// The calling thread acts as `as` for the caller's scope
// (ScopedThreadIdentity); nothing when `as` is tfslurmd's own account, so
// personal mode never switches. The caller checks ok().
std::optional<ScopedThreadIdentity> ActAs(const RunAs& as) {
  if (as.uid == geteuid()) return std::nullopt;
  return std::optional<ScopedThreadIdentity>(
      std::in_place, as.uid, as.gid, std::vector<gid_t>(as.groups.begin(), as.groups.end()));
}

std::string ErrnoText(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + strerror(errno);
}

// A checkpoint state file is a few hundred bytes; past this it is not one.
constexpr size_t kMaxCheckpointStateBytes = 1 << 20;

// The file at `path` if it is a regular file (O_NONBLOCK: a FIFO planted in
// its place must not hang the caller) of at most kMaxCheckpointStateBytes.
std::optional<std::string> ReadSmallRegularFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            static_cast<size_t>(st.st_size) <= kMaxCheckpointStateBytes;
  if (ok) {
    char buf[8192];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0 && text.size() <= kMaxCheckpointStateBytes)
      text.append(buf, static_cast<size_t>(n));
    ok = n == 0;
  }
  close(fd);
  if (!ok) return std::nullopt;
  return text;
}

// A failure to make or use a directory, by what the caller should do:
// nothing helps but another path or other permissions (PermissionDenied,
// FailedPrecondition), or it may pass (Unavailable: the disk, a limit).
Status DirectoryError(int error, const std::string& message) {
  switch (error) {
    case EACCES:
    case EPERM:
    case EROFS:
      return Status(StatusCode::kPermissionDenied, message);
    case ENOTDIR:
    case EEXIST:
    case ELOOP:
    case ENAMETOOLONG:
    case ENOENT:
      return FailedPrecondition(message);
    default:
      return Unavailable(message);
  }
}

class LocalFiles final : public Files {
 public:
  Status CreateExperimentDirectory(const std::string& path, const RunAs& as) override {
    if (mkdir(path.c_str(), 0750) != 0 && errno != EEXIST)
      return Unavailable(ErrnoText("cannot create", path));
    // Whether just made or already there, it is checked through a
    // descriptor of the directory itself (O_NOFOLLOW: never a symlink's
    // target), which is then given to `as`.
    int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
      return FailedPrecondition(ErrnoText("cannot use the experiment directory", path) +
                                " (it must be a directory, not a symlink)");
    struct stat st;
    Status status = Status::Ok();
    if (fstat(fd, &st) != 0) {
      status = Unavailable(ErrnoText("cannot stat", path));
    } else if (st.st_uid != as.uid && st.st_uid != geteuid()) {
      status = FailedPrecondition(path + " exists and belongs to uid " + std::to_string(st.st_uid) +
                                  ", not to " + as.user + " (uid " + std::to_string(as.uid) +
                                  "); remove it or use another id");
    } else if (st.st_uid != as.uid && fchown(fd, as.uid, as.gid) != 0) {
      status = Unavailable(ErrnoText("cannot give " + as.user + " the directory", path));
    }
    close(fd);
    return status;
  }

  Status CreateDirectories(const std::string& path, const RunAs& as) override {
    auto identity = ActAs(as);
    if (identity && !identity->ok())
      return Unavailable("cannot act as " + as.user + ": " + identity->error());
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec)
      return DirectoryError(ec.value(),
                            "cannot create " + path + " as " + as.user + ": " + ec.message());
    return Status::Ok();
  }

  Status CheckCanCreateDirectories(const std::string& path, const RunAs& as) override {
    auto identity = ActAs(as);
    if (identity && !identity->ok())
      return Unavailable("cannot act as " + as.user + ": " + identity->error());
    // The deepest part of the path that exists, as `as` sees it.
    std::filesystem::path existing = std::filesystem::path(path).lexically_normal();
    struct stat st;
    while (stat(existing.c_str(), &st) != 0) {
      if (errno != ENOENT)
        return DirectoryError(errno,
                              ErrnoText("cannot look at", existing.string()) + " as " + as.user);
      if (!existing.has_parent_path() || existing.parent_path() == existing)
        return FailedPrecondition("no part of " + path + " exists");
      existing = existing.parent_path();
    }
    if (!S_ISDIR(st.st_mode)) return FailedPrecondition(existing.string() + " is not a directory");
    // AT_EACCESS: the effective ids, which ActAs switched.
    if (faccessat(AT_FDCWD, existing.c_str(), W_OK | X_OK, AT_EACCESS) != 0)
      return DirectoryError(errno, as.user + " cannot create directories in " + existing.string() +
                                       ": " + strerror(errno));
    return Status::Ok();
  }

  Status CheckWorkdir(const std::string& path, const RunAs& as) override {
    auto identity = ActAs(as);
    if (identity && !identity->ok())
      return Unavailable("cannot act as " + as.user + ": " + identity->error());
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return FailedPrecondition(strerror(errno));
    if (!S_ISDIR(st.st_mode)) return FailedPrecondition("not a directory");
    // AT_EACCESS: the effective ids, which ActAs switched; plain access()
    // would check tfslurmd's real ones.
    if (faccessat(AT_FDCWD, path.c_str(), X_OK, AT_EACCESS) != 0)
      return FailedPrecondition(std::string(strerror(errno)) + " for " + as.user);
    return Status::Ok();
  }

  StatusOr<std::string> SetAsideExperimentDirectory(const std::string& path) override {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos || slash + 1 == path.size())
      return InvalidArgument("not a path in the output root: " + path);
    const std::string parent = slash == 0 ? "/" : path.substr(0, slash);
    const std::string name = path.substr(slash + 1);
    int dir = open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return Unavailable(ErrnoText("cannot open", parent));
    struct stat st;
    Status status = Status::Ok();
    std::string aside;
    if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) status = Unavailable(ErrnoText("cannot stat", path));
    } else if (!S_ISDIR(st.st_mode)) {
      status = FailedPrecondition(path + " is not a directory (a symlink?); left alone");
    } else {
      for (int n = 0; n < 1000 && aside.empty(); ++n) {
        std::string to = ".deleted-" + name + "-" + std::to_string(n);
        if (renameat2(dir, name.c_str(), dir, to.c_str(), RENAME_NOREPLACE) == 0)
          aside = parent + "/" + to;
        else if (errno != EEXIST)
          break;
      }
      if (aside.empty()) status = Unavailable(ErrnoText("cannot move aside", path));
    }
    close(dir);
    if (!status.ok()) return status;
    return aside;
  }

  StatusOr<int64_t> RemoveDirectoryTree(const std::string& path, const RunAs& as) override {
    int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return FailedPrecondition(ErrnoText("cannot open the directory", path));
    int64_t removed = 0;
    Status s = Status::Ok();
    {
      // The contents as their owner: the kernel checks what it may remove.
      auto identity = ActAs(as);
      if (identity && !identity->ok())
        s = Unavailable("cannot act as " + as.user + ": " + identity->error());
      else
        s = RemoveContents(fd, path, &removed);
    }
    close(fd);
    if (!s.ok()) return s;
    // The directory itself as tfslurmd, which made it in the output root.
    if (rmdir(path.c_str()) != 0) return Unavailable(ErrnoText("cannot remove", path));
    return removed + 1;
  }

  std::optional<CheckpointState> ReadCheckpointState(const std::string& model_dir,
                                                     Framework framework,
                                                     const RunAs& as) override {
    // Read as the owner: a symlink or hard link planted in MODEL_DIR reaches
    // only what the owner may read, never what root may.
    auto identity = ActAs(as);
    if (identity && !identity->ok()) return std::nullopt;
    if (HasRanks(framework)) {
      const bool jax = framework == Framework::kJax;
      wire::LatestCheckpoint latest(jax ? wire::JaxCheckpointStep : wire::TorchCheckpointStep);
      std::error_code ec;
      // increment(ec), not a range-for: its ++ throws on a read error.
      for (std::filesystem::directory_iterator it(model_dir, ec), end; !ec && it != end;
           it.increment(ec)) {
        std::error_code type_ec;
        // PyTorch's are files; JAX's (Orbax's) step directories.
        if (jax ? it->is_directory(type_ec) : it->is_regular_file(type_ec))
          latest.See(it->path().filename().string());
      }
      if (!latest.found()) return std::nullopt;
      return CheckpointState{latest.file_name(), latest.step()};
    }
    auto text = ReadSmallRegularFile(model_dir + "/checkpoint");
    if (!text) return std::nullopt;
    return ParseCheckpointState(*text);
  }

  Status WriteSecretFile(const std::string& path, const std::string& content,
                         const RunAs& as) override {
    auto identity = ActAs(as);
    if (identity && !identity->ok())
      return Unavailable("cannot act as " + as.user + ": " + identity->error());
    if (unlink(path.c_str()) != 0 && errno != ENOENT)
      return DirectoryError(errno, ErrnoText("cannot replace", path) + " as " + as.user);
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return DirectoryError(errno, ErrnoText("cannot create", path) + " as " + as.user);
    // 0600 whatever the umask left.
    bool ok = fchmod(fd, 0600) == 0;
    for (size_t done = 0; ok && done < content.size();) {
      ssize_t n = write(fd, content.data() + done, content.size() - done);
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0;
      if (ok) done += static_cast<size_t>(n);
    }
    const int error = errno;
    if (close(fd) != 0 || !ok) {
      unlink(path.c_str());
      return Unavailable("cannot write " + path + " as " + as.user + ": " +
                         strerror(ok ? errno : error));
    }
    return Status::Ok();
  }

  std::optional<std::string> ReadFileTail(const std::string& path, size_t max_bytes,
                                          const RunAs& as) override {
    auto identity = ActAs(as);
    if (identity && !identity->ok()) return std::nullopt;
    int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return std::nullopt;
    struct stat st;
    std::optional<std::string> text;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      off_t from = st.st_size > static_cast<off_t>(max_bytes) ? st.st_size - max_bytes : 0;
      text.emplace(static_cast<size_t>(st.st_size - from), '\0');
      ssize_t n = pread(fd, text->data(), text->size(), from);
      if (n < 0)
        text.reset();
      else
        text->resize(static_cast<size_t>(n));
    }
    close(fd);
    return text;
  }
};

}  // namespace

std::unique_ptr<Clock> NewSystemClock() { return std::make_unique<SystemClock>(); }
std::unique_ptr<Randomness> NewSystemRandomness() { return std::make_unique<SystemRandomness>(); }
std::unique_ptr<Files> NewLocalFiles() { return std::make_unique<LocalFiles>(); }

}  // namespace tfslurm::system
