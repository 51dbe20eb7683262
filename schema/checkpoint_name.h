// PyTorch checkpoints as tfslurm finds them. TensorFlow keeps an index of
// its checkpoints (MODEL_DIR/checkpoint); torch.save writes whatever file the
// program names, so tfslurm has a convention: a checkpoint is a file
// MODEL_DIR/<name>-<step>.pt (or .pth, or '_' before the step), e.g.
// "ckpt-1200.pt", and the latest is the one with the largest step. Write it
// under another name and rename it, so a half-written file never has a
// checkpoint's name. Shared by the agent (which reports new checkpoints) and
// the service (which reads the step a resume starts from).
//
// Thread safety: pure functions.
#ifndef TFSLURM_SCHEMA_CHECKPOINT_NAME_H_
#define TFSLURM_SCHEMA_CHECKPOINT_NAME_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tfslurm::wire {

// The step of a file name that follows the convention, nullopt otherwise
// ("ckpt-12.pt" -> 12; "ckpt-12.pt.tmp", "ckpt.pt", "12.pt" -> nullopt).
std::optional<int64_t> TorchCheckpointStep(std::string_view file_name);

// Keeps the latest of the names shown to it, by step (the later name in
// byte order when two have the same step, so the choice does not depend on
// the order a directory lists them).
class LatestTorchCheckpoint {
 public:
  void See(std::string_view file_name);
  bool found() const { return step_.has_value(); }
  int64_t step() const { return step_.value_or(0); }
  const std::string& file_name() const { return file_name_; }

 private:
  std::optional<int64_t> step_;
  std::string file_name_;
};

}  // namespace tfslurm::wire

#endif  // TFSLURM_SCHEMA_CHECKPOINT_NAME_H_
