#include "tls/staged_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace tfslurm::tls {
namespace {

std::string ParentDirectory() {
  for (const char* name : {"RUNTIME_DIRECTORY", "TMPDIR"}) {
    const char* v = getenv(name);
    // systemd may name several runtime directories, ':'-separated.
    if (v && *v) return std::string(v).substr(0, std::string(v).find(':'));
  }
  return "/tmp";
}

Status WriteFile(const std::string& path, const std::string& text, mode_t mode, time_t mtime) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return Internal("cannot write " + path + ": " + strerror(errno));
  bool ok = true;
  for (size_t done = 0; ok && done < text.size();) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  timespec times[2] = {{mtime, 0}, {mtime, 0}};
  ok = ok && futimens(fd, times) == 0;
  int err = errno;
  close(fd);
  if (!ok) return Internal("cannot write " + path + ": " + strerror(err));
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<StagedIdentity>> StagedIdentity::Create(const ServerIdentity& identity) {
  std::string pattern = ParentDirectory() + "/tfslurmd-tls-XXXXXX";
  if (!mkdtemp(pattern.data()))
    return FailedPrecondition("cannot make a private directory for the agent port's TLS key (" +
                              pattern + "): " + strerror(errno));
  std::unique_ptr<StagedIdentity> staged(new StagedIdentity(pattern));
  if (auto s = staged->Replace(identity); !s.ok()) return s;
  return staged;
}

StagedIdentity::~StagedIdentity() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

Status StagedIdentity::Replace(const ServerIdentity& identity) {
  const int next = generation_ + 1;
  const std::string gen = GenerationDir(next);
  std::error_code ec;
  std::filesystem::remove_all(gen, ec);
  if (mkdir(gen.c_str(), 0700) != 0) return Internal("cannot make " + gen + ": " + strerror(errno));
  if (auto s = WriteFile(gen + "/server.key", identity.key_pem, 0600, next); !s.ok()) return s;
  if (auto s = WriteFile(gen + "/server.pem", identity.chain_pem, 0600, next); !s.ok()) return s;
  const std::string link = dir_ + "/current.new";
  unlink(link.c_str());
  if (symlink(("g" + std::to_string(next)).c_str(), link.c_str()) != 0 ||
      rename(link.c_str(), (dir_ + "/current").c_str()) != 0)
    return Internal("cannot switch " + dir_ + "/current to " + gen + ": " + strerror(errno));
  if (generation_ > 1) std::filesystem::remove_all(GenerationDir(generation_ - 1), ec);
  generation_ = next;
  return Status::Ok();
}

}  // namespace tfslurm::tls
