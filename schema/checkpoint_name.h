// PyTorch and JAX checkpoints as tfslurm finds them. TensorFlow keeps an
// index of its checkpoints (MODEL_DIR/checkpoint); torch.save writes whatever
// file the program names, so tfslurm has a convention: a checkpoint is a file
// MODEL_DIR/<name>-<step>.pt (or .pth, or '_' before the step), e.g.
// "ckpt-1200.pt", and the latest is the one with the largest step. Write it
// under another name and rename it, so a half-written file never has a
// checkpoint's name.
//
// JAX: Orbax's CheckpointManager layout, a directory MODEL_DIR/<step>/ whose
// whole name is the step ("1200"; orbax v0.12.3, path/step.py:347-355 with
// its default step_prefix None and no fixed length). Orbax writes a step into
// <step>.orbax-checkpoint-tmp (path/atomicity.py:164-167) and renames that to
// <step> when it finalizes (atomicity.py:552), so a directory with the bare
// name is complete. A program without Orbax does the same (docs/jax.md).
//
// Shared by the agent (which reports new checkpoints) and the service (which
// reads the step a resume starts from).
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

// The step of a JAX (Orbax) step directory's name: 1 to 18 digits and
// nothing else ("1200" -> 1200; "1200.orbax-checkpoint-tmp", "step_12", "" ->
// nullopt). The caller checks that the name is a directory's.
std::optional<int64_t> JaxCheckpointStep(std::string_view dir_name);

// Keeps the latest of the names shown to it, by step (the later name in
// byte order when two have the same step, so the choice does not depend on
// the order a directory lists them). The names are read by one of the two
// functions above.
class LatestCheckpoint {
 public:
  using StepOf = std::optional<int64_t> (*)(std::string_view);
  explicit LatestCheckpoint(StepOf step_of) : step_of_(step_of) {}
  void See(std::string_view file_name);
  bool found() const { return step_.has_value(); }
  int64_t step() const { return step_.value_or(0); }
  const std::string& file_name() const { return file_name_; }

 private:
  StepOf step_of_;
  std::optional<int64_t> step_;
  std::string file_name_;
};

// PyTorch's <name>-<step>.pt files.
class LatestTorchCheckpoint : public LatestCheckpoint {
 public:
  LatestTorchCheckpoint() : LatestCheckpoint(TorchCheckpointStep) {}
};

// JAX's <step> directories.
class LatestJaxCheckpoint : public LatestCheckpoint {
 public:
  LatestJaxCheckpoint() : LatestCheckpoint(JaxCheckpointStep) {}
};

}  // namespace tfslurm::wire

#endif  // TFSLURM_SCHEMA_CHECKPOINT_NAME_H_
