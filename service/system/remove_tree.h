// Removing a directory tree without ever following a symlink: every step is
// taken through the descriptor of the directory it is in (openat with
// O_NOFOLLOW, unlinkat), so a symlink inside the tree, or one planted while
// the walk runs, is removed as a link and its target is left alone. Used to
// delete an experiment's files (Files::RemoveDirectoryTree).
//
// Thread safety: functions of their arguments; the caller's thread identity
// (system/thread_identity.h) decides what the kernel lets them remove.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace tfslurm::system {

// Removes everything inside the directory open as `dir_fd` (not the
// directory itself). Counts the entries removed into `*removed`. Stops at the
// first error, naming the entry under `shown` (the directory's path, for
// messages); a tree deeper than 256 levels is refused, not walked.
Status RemoveContents(int dir_fd, const std::string& shown, int64_t* removed);

}  // namespace tfslurm::system
