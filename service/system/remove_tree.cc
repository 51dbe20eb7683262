#include "service/system/remove_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace tfslurm::system {
namespace {

// Each level holds one descriptor; this bounds them and the recursion.
constexpr int kMaxDepth = 256;

Status Walk(int dir_fd, const std::string& shown, int depth, int64_t* removed) {
  if (depth > kMaxDepth)
    return FailedPrecondition(shown + " is nested more than " + std::to_string(kMaxDepth) +
                              " directories deep; not removed");
  // A duplicate for fdopendir, which takes the descriptor over.
  int fd = dup(dir_fd);
  if (fd < 0) return Unavailable("cannot read " + shown + ": " + strerror(errno));
  DIR* dir = fdopendir(fd);
  if (!dir) {
    close(fd);
    return Unavailable("cannot read " + shown + ": " + strerror(errno));
  }
  // Names first, then removal: unlinking while reading may skip entries.
  std::vector<std::pair<std::string, bool>> entries;
  errno = 0;
  while (dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st;
      is_dir = fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    }
    entries.emplace_back(std::move(name), is_dir);
  }
  const int read_errno = errno;
  closedir(dir);
  if (read_errno != 0) return Unavailable("cannot read " + shown + ": " + strerror(read_errno));
  for (const auto& [name, is_dir] : entries) {
    const std::string path = shown + "/" + name;
    if (is_dir) {
      // O_NOFOLLOW: if it was replaced by a symlink since, this fails
      // (ELOOP/ENOTDIR) and the link is unlinked below as a file.
      int child = openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child >= 0) {
        Status s = Walk(child, path, depth + 1, removed);
        close(child);
        if (!s.ok()) return s;
        if (unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
          return Unavailable("cannot remove " + path + ": " + strerror(errno));
        ++*removed;
        continue;
      }
      if (errno != ELOOP && errno != ENOTDIR && errno != ENOENT)
        return Unavailable("cannot open " + path + ": " + strerror(errno));
    }
    if (unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT)
      return Unavailable("cannot remove " + path + ": " + strerror(errno));
    ++*removed;
  }
  return Status::Ok();
}

}  // namespace

Status RemoveContents(int dir_fd, const std::string& shown, int64_t* removed) {
  return Walk(dir_fd, shown, 0, removed);
}

}  // namespace tfslurm::system
