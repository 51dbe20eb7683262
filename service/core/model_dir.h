// Where an experiment's model_dir may be. The model directory is where its
// program reads and writes checkpoints, and where tfslurmd reads the
// checkpoint state and the training scalars it shows; a model_dir in another
// user's experiment would show that user's checkpoint and let the program
// overwrite it.
//
// The rule (docs/security.md):
// - a model_dir is normalized as text (NormalizePath);
// - inside the output root it must be under the experiment's own directory
//   <output_root>/<id>, or under the directory of another experiment of the
//   same owner (how one continues from another's checkpoint);
// - outside the output root it is made and used as the job's Unix account:
//   in site mode the owner's, so the kernel checks it; in personal mode
//   tfslurmd's own account, whoever submits. When that account is root,
//   nothing outside the output root is allowed: tfslurmd never creates a
//   directory elsewhere as root.
//
// Thread safety: pure functions.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/status.h"

namespace tfslurm {

// An absolute path with every "//", "." and ".." resolved as text, without a
// trailing "/" ("/a//b/./c/../" is "/a/b"; ".." at the root stays there).
// Symbolic links are not followed: this is what the path says, and the
// kernel, acting as the job's account, checks the rest.
std::string NormalizePath(const std::string& absolute);
// Whether normalized `path` is `dir` or below it.
bool PathIsWithin(const std::string& path, const std::string& dir);

struct ModelDirRequest {
  std::string model_dir;      // normalized, as ParseSpec gives it; empty: the default
  std::string id;             // the experiment's
  std::string owner;          // who submits
  std::string output_root;    // tfslurmd's --output-root
  bool runs_as_root = false;  // the job's account is uid 0 (personal mode as root)
};

// OK, or InvalidArgument naming the field model_dir, its value and what is
// allowed. `owner_of` gives the owner of an experiment id, nullopt when there
// is none: an id that is someone else's and one that does not exist are
// refused with the same words, so the answer tells nothing about others.
Status CheckModelDir(const ModelDirRequest& request,
                     const std::function<std::optional<std::string>(const std::string&)>& owner_of);

}  // namespace tfslurm
