// TensorFlow's checkpoint state file (MODEL_DIR/checkpoint), e.g.
//   model_checkpoint_path: "model.ckpt-1200"
//   all_model_checkpoint_paths: "model.ckpt-1000"
// Resume shows the step it will start from; the agent reports new ones.
// Reading the file is the Files port's (core/ports/files.h).
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tfslurm {

struct CheckpointState {
  std::string path;  // as written in the file
  int64_t step = 0;  // the number after the last '-', as TensorFlow names them
};

std::optional<CheckpointState> ParseCheckpointState(const std::string& contents);

}  // namespace tfslurm
