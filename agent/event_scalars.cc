#include "agent/event_scalars.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "tensorboard_event.pb.h"

namespace tfslurm::agent {
namespace {

namespace tb = ::tfslurm::tensorboard;

constexpr std::string_view kScalarsPlugin = "scalars";

// IEEE 754 binary16, as DT_HALF stores it.
double HalfToDouble(uint16_t bits) {
  const int sign = (bits >> 15) ? -1 : 1;
  const int exponent = (bits >> 10) & 0x1f;
  const int fraction = bits & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(fraction, -24);  // zero, subnormal
  if (exponent == 0x1f) {
    return fraction ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  }
  return sign * std::ldexp(fraction | 0x400, exponent - 25);
}

// bfloat16 is the upper half of a float32.
double BFloat16ToDouble(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// The one element of tensor_content, `Wire` being its little-endian layout
// (the hosts TensorFlow and the agent run on are little-endian).
template <typename Wire>
std::optional<Wire> FromContent(const std::string& content) {
  if (content.size() != sizeof(Wire)) return std::nullopt;
  Wire v;
  std::memcpy(&v, content.data(), sizeof(Wire));
  return v;
}

// The element of a scalar: tensor_content when set, else the first of the
// typed values (TensorFlow repeats a lone value to fill the shape), else 0.
template <typename Wire, typename Repeated>
std::optional<double> Element(const tb::TensorProto& t, const Repeated& values) {
  if (!t.tensor_content().empty()) {
    std::optional<Wire> v = FromContent<Wire>(t.tensor_content());
    if (!v) return std::nullopt;
    return static_cast<double>(*v);
  }
  if (values.empty()) return 0.0;
  return static_cast<double>(static_cast<Wire>(values.Get(0)));
}

std::optional<double> Element16(const tb::TensorProto& t, double (*convert)(uint16_t)) {
  uint16_t bits = 0;
  if (!t.tensor_content().empty()) {
    std::optional<uint16_t> v = FromContent<uint16_t>(t.tensor_content());
    if (!v) return std::nullopt;
    bits = *v;
  } else if (!t.half_val().empty()) {
    bits = static_cast<uint16_t>(t.half_val(0));
  }
  return convert(bits);
}

}  // namespace

std::optional<double> ScalarTensorValue(const tb::TensorProto& t) {
  if (t.tensor_shape().unknown_rank() || t.tensor_shape().dim_size() != 0) return std::nullopt;
  switch (t.dtype()) {
    case tb::DT_FLOAT:
      return Element<float>(t, t.float_val());
    case tb::DT_DOUBLE:
      return Element<double>(t, t.double_val());
    case tb::DT_HALF:
      return Element16(t, HalfToDouble);
    case tb::DT_BFLOAT16:
      return Element16(t, BFloat16ToDouble);
    case tb::DT_INT32:
      return Element<int32_t>(t, t.int_val());
    case tb::DT_INT16:
      return Element<int16_t>(t, t.int_val());
    case tb::DT_INT8:
      return Element<int8_t>(t, t.int_val());
    case tb::DT_UINT8:
      return Element<uint8_t>(t, t.int_val());
    case tb::DT_UINT16:
      return Element<uint16_t>(t, t.int_val());
    case tb::DT_INT64:
      return Element<int64_t>(t, t.int64_val());
    case tb::DT_UINT32:
      return Element<uint32_t>(t, t.uint32_val());
    case tb::DT_UINT64:
      return Element<uint64_t>(t, t.uint64_val());
    default:
      return std::nullopt;
  }
}

bool DecodeEventScalars(std::string_view record, std::string_view run, PluginsByTag& plugins,
                        std::vector<ScalarPoint>& out) {
  tb::Event event;
  if (!event.ParseFromArray(record.data(), static_cast<int>(record.size()))) return false;
  if (!event.has_summary()) return true;
  for (const tb::Summary::Value& value : event.summary().value()) {
    const std::string& name = value.tag().empty() ? value.node_name() : value.tag();
    if (name.empty()) continue;
    std::string tag = run.empty() ? name : std::string(run) + "/" + name;
    if (!value.metadata().plugin_data().plugin_name().empty()) {
      plugins[tag] = value.metadata().plugin_data().plugin_name();
    }
    std::optional<double> number;
    if (value.value_case() == tb::Summary::Value::kSimpleValue) {
      number = value.simple_value();
    } else if (value.value_case() == tb::Summary::Value::kTensor) {
      auto plugin = plugins.find(tag);
      if (plugin != plugins.end() && plugin->second == kScalarsPlugin) {
        number = ScalarTensorValue(value.tensor());
      }
    }
    if (!number) continue;
    out.push_back(ScalarPoint{std::move(tag), event.step(), event.wall_time(), *number});
  }
  return true;
}

}  // namespace tfslurm::agent
