// The file-system port: the directories core creates for an attempt and the
// checkpoint state it reads from a MODEL_DIR. service/system/system.cc
// implements it on the local file system; unit tests use a fake.
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <optional>
#include <string>

#include "schema/status.h"
#include "service/core/checkpoint_state.h"

namespace tfslurm {

class Files {
 public:
  virtual ~Files() = default;
  // Creates `path` and its missing parents; Unavailable when it cannot.
  virtual Status CreateDirectories(const std::string& path) = 0;
  // <model_dir>/checkpoint, parsed; nullopt when absent or unreadable.
  virtual std::optional<CheckpointState> ReadCheckpointState(const std::string& model_dir) = 0;
};

}  // namespace tfslurm
