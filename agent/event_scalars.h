// The training scalars in one TensorBoard Event (schema/tensorboard_event.proto):
//
// - TF1 summaries, `Summary.Value.simple_value`
//   (tf.compat.v1.summary.scalar, Keras 2's callback);
// - TF2 summaries, `Summary.Value.tensor` holding a rank-0 tensor, when the
//   value's plugin is "scalars" (tf.summary.scalar, Keras 3's callback). The
//   plugin is in the value's metadata; TensorBoard keeps the first metadata
//   of each tag in a run and later values may omit it, so the plugin seen for
//   a tag is remembered (`PluginsByTag`). Histograms, images, text and other
//   plugins' tensors, and tensors of any other shape, are not scalars.
//
// A tag is the value's tag (its node_name when the tag is empty), prefixed
// with the run, the event file's directory relative to MODEL_DIR, joined with
// '/' ("train/epoch_loss"), as TensorBoard names runs.
//
// Thread safety: pure functions, except that DecodeEventScalars updates the
// caller's PluginsByTag.
#ifndef TFSLURM_AGENT_EVENT_SCALARS_H_
#define TFSLURM_AGENT_EVENT_SCALARS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tfslurm::tensorboard {
class TensorProto;
}

namespace tfslurm::agent {

struct ScalarPoint {
  std::string tag;
  int64_t step = 0;
  double wall_time = 0;  // seconds since the Unix epoch
  double value = 0;

  bool operator==(const ScalarPoint&) const = default;
};

// Full tag (with its run) -> the plugin name last seen in its metadata.
using PluginsByTag = std::unordered_map<std::string, std::string>;

// Appends the scalars of one serialized Event to `out`. `run` is "" for an
// event file directly in MODEL_DIR. Returns false when `record` does not
// parse as an Event (nothing is appended then).
bool DecodeEventScalars(std::string_view record, std::string_view run, PluginsByTag& plugins,
                        std::vector<ScalarPoint>& out);

// The value of a rank-0 tensor of a real or integer type, from its typed
// field or its tensor_content, as TensorFlow's MakeNdarray reads it (no value
// at all is 0). nullopt for other shapes and types (strings, bools, complex).
std::optional<double> ScalarTensorValue(const tensorboard::TensorProto& tensor);

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_EVENT_SCALARS_H_
