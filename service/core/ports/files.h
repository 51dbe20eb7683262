// The file-system port: the directories core creates for an attempt and the
// latest checkpoint it reads from a MODEL_DIR. service/system/system.cc
// implements it on the local file system; unit tests use a fake.
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <optional>
#include <string>

#include "schema/status.h"
#include "service/core/checkpoint_state.h"
#include "service/core/spec.h"

namespace tfslurm {

class Files {
 public:
  virtual ~Files() = default;
  // Creates `path` and its missing parents; Unavailable when it cannot.
  virtual Status CreateDirectories(const std::string& path) = 0;
  // The latest checkpoint in model_dir; nullopt when there is none or it
  // cannot be read. TensorFlow: <model_dir>/checkpoint, parsed. PyTorch: the
  // <name>-<step>.pt file with the largest step (schema/checkpoint_name.h),
  // its path relative to model_dir as TensorFlow's are.
  virtual std::optional<CheckpointState> ReadCheckpointState(const std::string& model_dir,
                                                             Framework framework) = 0;
};

}  // namespace tfslurm
