// The file-system port: the directories core creates for an attempt and the
// latest checkpoint it reads from a MODEL_DIR, each done as the account the
// experiment's job runs as (core/ports/accounts.h). service/system/system.cc
// implements it on the local file system; unit tests use a fake.
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "service/core/checkpoint_state.h"
#include "service/core/ports/accounts.h"
#include "service/core/spec.h"

namespace tfslurm {

class Files {
 public:
  virtual ~Files() = default;
  // Creates the experiment's own directory <output root>/<id>, which only
  // tfslurmd can create in the output root, for `as`: it belongs to `as`
  // (mode 0750). One that exists must be a directory (not a symlink)
  // belonging to `as`; FailedPrecondition otherwise.
  virtual Status CreateExperimentDirectory(const std::string& path, const RunAs& as) = 0;
  // Creates `path` and its missing parents as `as` (the kernel checks
  // `as`'s permissions, and they belong to `as`). PermissionDenied when `as`
  // may not (EACCES, EPERM, EROFS), FailedPrecondition when something in the
  // way is not a directory; Unavailable only for what may pass (the disk).
  virtual Status CreateDirectories(const std::string& path, const RunAs& as) = 0;
  // OK when CreateDirectories(path, as) would succeed as things are now:
  // `path` is a directory `as` may write into and enter, or the deepest of
  // its parents that exists is. Otherwise the same codes, saying why. Makes
  // nothing: the dry run and a submission ask it before anything is made.
  virtual Status CheckCanCreateDirectories(const std::string& path, const RunAs& as) = 0;
  // Moves the experiment's directory <output root>/<id> (`path`) aside, to
  // <output root>/.deleted-<id>-<n> in the same directory, so that the id is
  // free at once and the tree can be removed outside core's lock. Returns the
  // new path, or "" when there is no such directory. Anything but a directory
  // in its place (a symlink) is left alone: FailedPrecondition.
  virtual StatusOr<std::string> SetAsideExperimentDirectory(const std::string& path) = 0;
  // Removes the tree at `path` (a directory set aside): its contents as
  // `as`, never following a symlink (a link is removed, its target stays),
  // then the directory itself. Returns how many entries were removed.
  virtual StatusOr<int64_t> RemoveDirectoryTree(const std::string& path, const RunAs& as) = 0;
  // OK when `path` is a directory `as` may enter, as the program's working
  // directory must be; otherwise an error whose message says why (missing,
  // not a directory, permission denied). The nodes are taken to see the
  // same file system as tfslurmd, as they do the output root.
  virtual Status CheckWorkdir(const std::string& path, const RunAs& as) = 0;
  // The latest checkpoint in model_dir; nullopt when there is none or it
  // cannot be read as `as`. TensorFlow: <model_dir>/checkpoint, a regular
  // file, parsed. PyTorch: the <name>-<step>.pt file with the largest step;
  // JAX: the <step> directory with the largest step (schema/
  // checkpoint_name.h); its path relative to model_dir as TensorFlow's are.
  virtual std::optional<CheckpointState> ReadCheckpointState(const std::string& model_dir,
                                                             Framework framework,
                                                             const RunAs& as) = 0;
  // Writes `content` to a new regular file `path`, mode 0600, as `as`: the
  // attempt's secret, which the job's agents read there, so that it never
  // travels in Slurm's submit and launch RPCs. A file already at `path` (a
  // submission tried again) is unlinked first, never written through; the
  // new one is made O_CREAT|O_EXCL|O_NOFOLLOW, so that no link planted there
  // is followed. Same codes as CreateDirectories.
  virtual Status WriteSecretFile(const std::string& path, const std::string& content,
                                 const RunAs& as) = 0;
  // At most the last `max_bytes` of the regular file `path` (a task's log),
  // read as `as`, without following a symlink; nullopt when it cannot be.
  virtual std::optional<std::string> ReadFileTail(const std::string& path, size_t max_bytes,
                                                  const RunAs& as) = 0;
};

}  // namespace tfslurm
