// Finds the latest checkpoint in MODEL_DIR from TensorFlow's `checkpoint`
// state file (a CheckpointState in protobuf text format), e.g.
//
//   model_checkpoint_path: "model.ckpt-1200"
//   all_model_checkpoint_paths: "model.ckpt-1000"
//   all_model_checkpoint_paths: "model.ckpt-1200"
//
// The path is relative to MODEL_DIR (what TensorFlow writes by default) or
// absolute; the step is the number after the last '-' of its last component
// (TF1 "model.ckpt-1200", TF2 CheckpointManager "ckpt-5").
//
// Thread safety: ParseCheckpointState is pure; a CheckpointWatch belongs to
// one thread.
#ifndef TFSLURM_AGENT_CHECKPOINT_WATCH_H_
#define TFSLURM_AGENT_CHECKPOINT_WATCH_H_

#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

namespace tfslurm::agent {

struct CheckpointState {
  int64_t step = 0;
  std::string path;  // absolute when the state file's path is relative to model_dir

  bool operator==(const CheckpointState&) const = default;
};

// Returns nullopt when the text has no model_checkpoint_path, or its path has
// no step number.
std::optional<CheckpointState> ParseCheckpointState(std::string_view contents,
                                                    std::string_view model_dir);

// Where a framework's checkpoints are found.
enum class CheckpointLayout {
  // TensorFlow's <model_dir>/checkpoint state file, above.
  kTensorflowStateFile,
  // PyTorch: <model_dir>/<name>-<step>.pt files, the largest step the latest
  // (schema/checkpoint_name.h).
  kTorchFiles,
  // JAX: Orbax's <model_dir>/<step>/ directories, the largest step the
  // latest (schema/checkpoint_name.h).
  kJaxStepDirectories,
};

// Polls <model_dir>/checkpoint, or for kTorchFiles and kJaxStepDirectories
// the directory's names.
// Re-reads only when the file's (the directory's) mtime, size or inode
// changed: TensorFlow replaces its file atomically by rename, so the inode
// changes on every save, and creating or renaming a file in a directory
// changes the directory's mtime. Each poll is then one stat(2).
class CheckpointWatch {
 public:
  explicit CheckpointWatch(std::string model_dir,
                           CheckpointLayout layout = CheckpointLayout::kTensorflowStateFile);

  // The state when the file names a step other than the last one returned;
  // nullopt otherwise (unchanged, absent, unreadable, no step).
  std::optional<CheckpointState> Poll();

  // The last state Poll returned.
  const std::optional<CheckpointState>& latest() const { return latest_; }
  // What is watched, for the log: the state file, or the torch file pattern.
  const std::string& state_file() const { return state_file_; }

 private:
  struct Fingerprint {
    timespec mtime{};
    off_t size = 0;
    ino_t inode = 0;
  };

  // The latest torch or JAX checkpoint in model_dir_; nullopt when there is
  // none.
  std::optional<CheckpointState> ScanDirectory() const;

  std::string model_dir_;
  CheckpointLayout layout_;
  std::string state_file_;
  std::optional<Fingerprint> seen_;
  std::optional<CheckpointState> latest_;
};

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_CHECKPOINT_WATCH_H_
