#include "agent/event_scalars.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "tensorboard_event.pb.h"

namespace tfslurm::agent {
namespace {

namespace tb = ::tfslurm::tensorboard;

tb::TensorProto ScalarTensor(tb::DataType dtype) {
  tb::TensorProto t;
  t.set_dtype(dtype);
  t.mutable_tensor_shape();  // rank 0
  return t;
}

template <typename T>
std::string Bytes(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

// An Event with one summary value: tag, plugin ("" for none), and `fill`
// setting the value itself.
template <typename Fill>
std::string EventWith(const std::string& tag, const std::string& plugin, Fill fill,
                      int64_t step = 7, double wall_time = 1000.5) {
  tb::Event e;
  e.set_step(step);
  e.set_wall_time(wall_time);
  tb::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  if (!plugin.empty()) v->mutable_metadata()->mutable_plugin_data()->set_plugin_name(plugin);
  fill(*v);
  return e.SerializeAsString();
}

std::vector<ScalarPoint> Decode(const std::string& record, const std::string& run = "") {
  PluginsByTag plugins;
  std::vector<ScalarPoint> out;
  EXPECT_TRUE(DecodeEventScalars(record, run, plugins, out));
  return out;
}

TEST(DecodeEventScalarsTest, V1SimpleValue) {
  auto record = EventWith("loss", "", [](tb::Summary::Value& v) { v.set_simple_value(0.25f); });
  EXPECT_EQ(Decode(record), (std::vector<ScalarPoint>{{"loss", 7, 1000.5, 0.25}}));
}

TEST(DecodeEventScalarsTest, V2ScalarInFloatValAndInTensorContent) {
  auto float_val = EventWith("loss", "scalars", [](tb::Summary::Value& v) {
    *v.mutable_tensor() = ScalarTensor(tb::DT_FLOAT);
    v.mutable_tensor()->add_float_val(0.75f);
  });
  EXPECT_EQ(Decode(float_val), (std::vector<ScalarPoint>{{"loss", 7, 1000.5, 0.75}}));
  auto content = EventWith("loss", "scalars", [](tb::Summary::Value& v) {
    *v.mutable_tensor() = ScalarTensor(tb::DT_FLOAT);
    v.mutable_tensor()->set_tensor_content(Bytes(0.5f));
  });
  EXPECT_EQ(Decode(content), (std::vector<ScalarPoint>{{"loss", 7, 1000.5, 0.5}}));
}

TEST(DecodeEventScalarsTest, RunPrefixesTheTag) {
  auto record = EventWith("epoch_loss", "", [](tb::Summary::Value& v) { v.set_simple_value(1); });
  ASSERT_EQ(Decode(record, "train").size(), 1u);
  EXPECT_EQ(Decode(record, "train")[0].tag, "train/epoch_loss");
  EXPECT_EQ(Decode(record, "logs/validation")[0].tag, "logs/validation/epoch_loss");
}

TEST(DecodeEventScalarsTest, OtherPluginsAndShapesAreNotScalars) {
  // A histogram and text are tensors too; text is even rank 0.
  auto histogram = EventWith("weights", "histograms", [](tb::Summary::Value& v) {
    *v.mutable_tensor() = ScalarTensor(tb::DT_DOUBLE);
    v.mutable_tensor()->add_double_val(1);
  });
  EXPECT_TRUE(Decode(histogram).empty());
  auto text = EventWith("note", "text", [](tb::Summary::Value& v) {
    *v.mutable_tensor() = ScalarTensor(tb::DT_STRING);
    v.mutable_tensor()->add_string_val("hello");
  });
  EXPECT_TRUE(Decode(text).empty());
  auto vector = EventWith("pair", "scalars", [](tb::Summary::Value& v) {
    *v.mutable_tensor() = ScalarTensor(tb::DT_FLOAT);
    v.mutable_tensor()->mutable_tensor_shape()->add_dim()->set_size(2);
    v.mutable_tensor()->add_float_val(1);
    v.mutable_tensor()->add_float_val(2);
  });
  EXPECT_TRUE(Decode(vector).empty());
  auto no_plugin = EventWith("t", "", [](tb::Summary::Value& v) {
    *v.mutable_tensor() = ScalarTensor(tb::DT_FLOAT);
    v.mutable_tensor()->add_float_val(1);
  });
  EXPECT_TRUE(Decode(no_plugin).empty()) << "a tensor of no known plugin is not a scalar";
}

TEST(DecodeEventScalarsTest, PluginOfATagIsRememberedWithinItsRun) {
  auto with_metadata = EventWith("loss", "scalars", [](tb::Summary::Value& v) {
    *v.mutable_tensor() = ScalarTensor(tb::DT_FLOAT);
    v.mutable_tensor()->add_float_val(1);
  });
  auto without = EventWith("loss", "", [](tb::Summary::Value& v) {
    *v.mutable_tensor() = ScalarTensor(tb::DT_FLOAT);
    v.mutable_tensor()->add_float_val(2);
  });
  PluginsByTag plugins;
  std::vector<ScalarPoint> out;
  ASSERT_TRUE(DecodeEventScalars(with_metadata, "train", plugins, out));
  ASSERT_TRUE(DecodeEventScalars(without, "train", plugins, out));
  ASSERT_TRUE(DecodeEventScalars(without, "validation", plugins, out));
  ASSERT_EQ(out.size(), 2u) << "validation/loss never said it is a scalar";
  EXPECT_EQ(out[1].tag, "train/loss");
  EXPECT_EQ(out[1].value, 2);
}

TEST(DecodeEventScalarsTest, NodeNameWhenTheTagIsEmpty) {
  auto record = EventWith("", "", [](tb::Summary::Value& v) {
    v.set_node_name("old_op");
    v.set_simple_value(3);
  });
  ASSERT_EQ(Decode(record).size(), 1u);
  EXPECT_EQ(Decode(record)[0].tag, "old_op");
}

TEST(DecodeEventScalarsTest, EventsWithoutSummariesAndNonEvents) {
  tb::Event version;
  version.set_file_version("brain.Event:2");
  EXPECT_TRUE(Decode(version.SerializeAsString()).empty());
  PluginsByTag plugins;
  std::vector<ScalarPoint> out;
  EXPECT_FALSE(DecodeEventScalars("\xff\xff\xff", "", plugins, out));
  EXPECT_TRUE(out.empty());
}

TEST(ScalarTensorValueTest, EveryRealAndIntegerType) {
  auto value = [](tb::DataType dtype, auto fill) {
    tb::TensorProto t = ScalarTensor(dtype);
    fill(t);
    return ScalarTensorValue(t);
  };
  EXPECT_EQ(value(tb::DT_DOUBLE, [](auto& t) { t.add_double_val(0.1); }), 0.1);
  EXPECT_EQ(value(tb::DT_DOUBLE, [](auto& t) { t.set_tensor_content(Bytes(0.1)); }), 0.1);
  EXPECT_EQ(value(tb::DT_INT64, [](auto& t) { t.add_int64_val(-1234567890123); }),
            -1234567890123.0);
  EXPECT_EQ(value(tb::DT_INT32, [](auto& t) { t.set_tensor_content(Bytes<int32_t>(-5)); }), -5);
  EXPECT_EQ(value(tb::DT_INT8, [](auto& t) { t.add_int_val(-3); }), -3);
  EXPECT_EQ(value(tb::DT_UINT8, [](auto& t) { t.set_tensor_content(Bytes<uint8_t>(200)); }), 200);
  EXPECT_EQ(value(tb::DT_UINT64, [](auto& t) { t.add_uint64_val(1ull << 40); }), 0x1p40);
  // binary16: 0x3C00 is 1, 0xC100 is -2.5, 0x0001 the smallest subnormal, 0x7C00 infinity.
  EXPECT_EQ(value(tb::DT_HALF, [](auto& t) { t.add_half_val(0x3C00); }), 1.0);
  EXPECT_EQ(value(tb::DT_HALF, [](auto& t) { t.set_tensor_content(Bytes<uint16_t>(0xC100)); }),
            -2.5);
  EXPECT_EQ(value(tb::DT_HALF, [](auto& t) { t.add_half_val(0x0001); }), 0x1p-24);
  EXPECT_EQ(value(tb::DT_HALF, [](auto& t) { t.add_half_val(0x7C00); }), INFINITY);
  // bfloat16: the upper half of float32 1.5f (0x3FC00000).
  EXPECT_EQ(value(tb::DT_BFLOAT16, [](auto& t) { t.add_half_val(0x3FC0); }), 1.5);
  // No value at all is 0, as TensorFlow's MakeNdarray has it.
  EXPECT_EQ(value(tb::DT_FLOAT, [](auto&) {}), 0.0);
  // Not numbers, or content of the wrong size.
  EXPECT_EQ(value(tb::DT_STRING, [](auto& t) { t.add_string_val("1"); }), std::nullopt);
  EXPECT_EQ(value(tb::DT_BOOL, [](auto& t) { t.add_bool_val(true); }), std::nullopt);
  EXPECT_EQ(value(tb::DT_FLOAT, [](auto& t) { t.set_tensor_content("abc"); }), std::nullopt);
  tb::TensorProto unknown_rank = ScalarTensor(tb::DT_FLOAT);
  unknown_rank.mutable_tensor_shape()->set_unknown_rank(true);
  unknown_rank.add_float_val(1);
  EXPECT_EQ(ScalarTensorValue(unknown_rank), std::nullopt);
}

}  // namespace
}  // namespace tfslurm::agent
