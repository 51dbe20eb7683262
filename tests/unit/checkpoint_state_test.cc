#include "service/core/checkpoint_state.h"

#include <gtest/gtest.h>

namespace tfslurm {
namespace {

TEST(ParseCheckpointState, ReadsTensorFlowStateFile) {
  auto s = ParseCheckpointState(
      "model_checkpoint_path: \"model.ckpt-1200\"\nall_model_checkpoint_paths: "
      "\"model.ckpt-1000\"\n"
      "all_model_checkpoint_paths: \"model.ckpt-1200\"\n");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->path, "model.ckpt-1200");
  EXPECT_EQ(s->step, 1200);
}

TEST(ParseCheckpointState, AbsolutePathsAndMissingStep) {
  auto s = ParseCheckpointState("model_checkpoint_path: \"/out/x/ckpt-7\"\n");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->step, 7);
  auto n = ParseCheckpointState("model_checkpoint_path: \"final\"\n");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->step, 0);
  EXPECT_FALSE(ParseCheckpointState("garbage").has_value());
  EXPECT_FALSE(ParseCheckpointState("").has_value());
}

}  // namespace
}  // namespace tfslurm
