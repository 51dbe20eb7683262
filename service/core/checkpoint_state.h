// TensorFlow's checkpoint state file (MODEL_DIR/checkpoint), e.g.
//   model_checkpoint_path: "model.ckpt-1200"
//   all_model_checkpoint_paths: "model.ckpt-1000"
// Resume shows the step it will start from; the agent reports new ones.
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
// Reads <model_dir>/checkpoint; nullopt when absent or unreadable.
std::optional<CheckpointState> ReadCheckpointState(const std::string& model_dir);

}  // namespace tfslurm
