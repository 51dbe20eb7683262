#include "agent/checkpoint_watch.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "schema/checkpoint_name.h"
#include "tests/agent/temp_dir.h"

namespace tfslurm::agent {
namespace {

using testing::TempDir;
using testing::WriteFile;

TEST(ParseCheckpointStateTest, RelativePathIsResolvedAgainstModelDir) {
  auto state = ParseCheckpointState(
      "model_checkpoint_path: \"model.ckpt-1200\"\n"
      "all_model_checkpoint_paths: \"model.ckpt-1000\"\n"
      "all_model_checkpoint_paths: \"model.ckpt-1200\"\n",
      "/scratch/exp");
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->step, 1200);
  EXPECT_EQ(state->path, "/scratch/exp/model.ckpt-1200");
}

// Verbatim state files written by TensorFlow 2.21 (examples/mnist_tf and
// examples/tf1_ps, run by hand): tf.train.CheckpointManager adds timestamp
// fields; tf.compat.v1.train.Saver under MonitoredTrainingSession writes
// absolute paths, one step past the target when workers overshoot it.
TEST(ParseCheckpointStateTest, WhatTensorFlow221Writes) {
  auto manager = ParseCheckpointState(
      "model_checkpoint_path: \"model.ckpt-200\"\n"
      "all_model_checkpoint_paths: \"model.ckpt-50\"\n"
      "all_model_checkpoint_paths: \"model.ckpt-200\"\n"
      "all_model_checkpoint_timestamps: 1795540174.5098314\n"
      "all_model_checkpoint_timestamps: 1795540178.3182807\n"
      "last_preserved_timestamp: 1795540170.063762\n",
      "/tmp/mn/md");
  ASSERT_TRUE(manager.has_value());
  EXPECT_EQ(manager->step, 200);
  EXPECT_EQ(manager->path, "/tmp/mn/md/model.ckpt-200");

  auto saver = ParseCheckpointState(
      "model_checkpoint_path: \"/tmp/t1/md/model.ckpt-301\"\n"
      "all_model_checkpoint_paths: \"/tmp/t1/md/model.ckpt-0\"\n"
      "all_model_checkpoint_paths: \"/tmp/t1/md/model.ckpt-301\"\n",
      "/tmp/t1/md");
  ASSERT_TRUE(saver.has_value());
  EXPECT_EQ(saver->step, 301);
  EXPECT_EQ(saver->path, "/tmp/t1/md/model.ckpt-301");
}

TEST(ParseCheckpointStateTest, ModelDirWithTrailingSlash) {
  auto state = ParseCheckpointState("model_checkpoint_path: \"ckpt-5\"\n", "/scratch/exp/");
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->step, 5);  // TF2 CheckpointManager naming
  EXPECT_EQ(state->path, "/scratch/exp/ckpt-5");
}

TEST(ParseCheckpointStateTest, AbsolutePathIsKept) {
  auto state =
      ParseCheckpointState("model_checkpoint_path: \"/old/place/model.ckpt-7\"\n", "/scratch/exp");
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->step, 7);
  EXPECT_EQ(state->path, "/old/place/model.ckpt-7");
}

TEST(ParseCheckpointStateTest, FieldOrderWhitespaceAndNoTrailingNewline) {
  auto state = ParseCheckpointState(
      "all_model_checkpoint_paths: \"model.ckpt-1\"\r\n"
      "  model_checkpoint_path :   'sub/dir/model.ckpt-42'",
      "/m");
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->step, 42);
  EXPECT_EQ(state->path, "/m/sub/dir/model.ckpt-42");
}

TEST(ParseCheckpointStateTest, EscapesInThePath) {
  auto state = ParseCheckpointState(
      R"(model_checkpoint_path: "/data/a \"quoted\" dir\\x/caf\303\251/m\x2dx.ckpt-9")", "/m");
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->step, 9);
  EXPECT_EQ(state->path, "/data/a \"quoted\" dir\\x/café/m-x.ckpt-9");
}

TEST(ParseCheckpointStateTest, DirectoryDashesDoNotCount) {
  auto state = ParseCheckpointState("model_checkpoint_path: \"run-3/model.ckpt-15\"\n", "/m");
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->step, 15);
}

TEST(ParseCheckpointStateTest, NoUsableState) {
  EXPECT_FALSE(ParseCheckpointState("", "/m"));
  EXPECT_FALSE(ParseCheckpointState("all_model_checkpoint_paths: \"model.ckpt-1\"\n", "/m"));
  EXPECT_FALSE(ParseCheckpointState("model_checkpoint_path: \"model.ckpt\"\n", "/m"));
  EXPECT_FALSE(ParseCheckpointState("model_checkpoint_path: \"model.ckpt-\"\n", "/m"));
  EXPECT_FALSE(ParseCheckpointState("model_checkpoint_path: \"model.ckpt-12a\"\n", "/m"));
  EXPECT_FALSE(ParseCheckpointState("model_checkpoint_path: \"model.ckpt-12\n", "/m"));
  EXPECT_FALSE(ParseCheckpointState("model_checkpoint_path: model.ckpt-12\n", "/m"));
  EXPECT_FALSE(ParseCheckpointState("model_checkpoint_paths_v2: \"model.ckpt-12\"\n", "/m"));
}

TEST(CheckpointWatchTest, ReportsEachNewStepOnce) {
  TempDir dir;
  CheckpointWatch watch(dir.path());
  EXPECT_FALSE(watch.Poll());  // no file yet

  WriteFile(dir.Path("checkpoint"), "model_checkpoint_path: \"model.ckpt-100\"\n");
  auto first = watch.Poll();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->step, 100);
  EXPECT_EQ(first->path, dir.path() + "/model.ckpt-100");
  EXPECT_FALSE(watch.Poll());  // unchanged

  // Rewritten with the same step (e.g. all_model_checkpoint_paths pruned).
  WriteFile(dir.Path("checkpoint.tmp"),
            "model_checkpoint_path: \"model.ckpt-100\"\nall_model_checkpoint_paths: "
            "\"model.ckpt-100\"\n");
  std::filesystem::rename(dir.Path("checkpoint.tmp"), dir.Path("checkpoint"));
  EXPECT_FALSE(watch.Poll());

  WriteFile(dir.Path("checkpoint.tmp"), "model_checkpoint_path: \"model.ckpt-200\"\n");
  std::filesystem::rename(dir.Path("checkpoint.tmp"), dir.Path("checkpoint"));
  auto second = watch.Poll();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->step, 200);
  ASSERT_TRUE(watch.latest().has_value());
  EXPECT_EQ(watch.latest()->step, 200);
}

TEST(CheckpointWatchTest, UnparsableFileIsSkipped) {
  TempDir dir;
  CheckpointWatch watch(dir.path());
  WriteFile(dir.Path("checkpoint"), "garbage\n");
  EXPECT_FALSE(watch.Poll());
  EXPECT_FALSE(watch.latest().has_value());
}

TEST(TorchCheckpointNameTest, StepBeforeTheExtension) {
  EXPECT_EQ(wire::TorchCheckpointStep("ckpt-1200.pt"), 1200);
  EXPECT_EQ(wire::TorchCheckpointStep("checkpoint_7.pth"), 7);
  EXPECT_EQ(wire::TorchCheckpointStep("model-v2-0.pt"), 0);
  for (const char* name : {"ckpt-12.pt.tmp", "ckpt.pt", "12.pt", "-12.pt", "ckpt-.pt", "ckpt-12",
                           "ckpt-12.ptx", "ckpt-1234567890123456789.pt", ".pt", "ckpt12.pt"})
    EXPECT_EQ(wire::TorchCheckpointStep(name), std::nullopt) << name;
}

TEST(TorchCheckpointNameTest, LatestIsTheLargestStepWhateverTheListingOrder) {
  wire::LatestTorchCheckpoint a, b;
  for (const char* name : {"ckpt-100.pt", "ckpt-20.pt", "notes.txt", "ckpt-300.pt.tmp"})
    a.See(name);
  for (const char* name : {"ckpt-300.pt.tmp", "notes.txt", "ckpt-20.pt", "ckpt-100.pt"})
    b.See(name);
  EXPECT_EQ(a.step(), 100);
  EXPECT_EQ(a.file_name(), "ckpt-100.pt");
  EXPECT_EQ(b.file_name(), "ckpt-100.pt");
  wire::LatestTorchCheckpoint none;
  none.See("ckpt.pt");
  EXPECT_FALSE(none.found());
}

TEST(CheckpointWatchTest, TorchFilesReportTheLargestStepOnce) {
  TempDir dir;
  CheckpointWatch watch(dir.path(), CheckpointLayout::kTorchFiles);
  EXPECT_EQ(watch.Poll(), std::nullopt);
  // A half-written file under a temporary name is not a checkpoint.
  WriteFile(dir.path() + "/ckpt-50.pt.tmp", "x");
  EXPECT_EQ(watch.Poll(), std::nullopt);
  std::filesystem::rename(dir.path() + "/ckpt-50.pt.tmp", dir.path() + "/ckpt-50.pt");
  auto state = watch.Poll();
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->step, 50);
  EXPECT_EQ(state->path, dir.path() + "/ckpt-50.pt");
  EXPECT_EQ(watch.Poll(), std::nullopt);  // unchanged: not reported again
  WriteFile(dir.path() + "/ckpt-100.pt", "x");
  std::filesystem::remove(dir.path() + "/ckpt-50.pt");
  state = watch.Poll();
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->step, 100);
  EXPECT_EQ(watch.latest()->step, 100);
}

TEST(JaxCheckpointNameTest, TheWholeNameIsTheStep) {
  EXPECT_EQ(wire::JaxCheckpointStep("1200"), 1200);
  EXPECT_EQ(wire::JaxCheckpointStep("0"), 0);
  EXPECT_EQ(wire::JaxCheckpointStep("007"), 7);
  for (const char* name : {"", "1200.orbax-checkpoint-tmp", "step_12", "12a", "-12", "digests",
                           "1234567890123456789", "ckpt-12.pt"})
    EXPECT_EQ(wire::JaxCheckpointStep(name), std::nullopt) << name;
  wire::LatestJaxCheckpoint latest;
  for (const char* name : {"40", "120.orbax-checkpoint-tmp", "80", "digests"}) latest.See(name);
  EXPECT_EQ(latest.step(), 80);
  EXPECT_EQ(latest.file_name(), "80");
}

TEST(CheckpointWatchTest, JaxStepDirectoriesReportTheLargestFinalizedStep) {
  TempDir dir;
  CheckpointWatch watch(dir.path(), CheckpointLayout::kJaxStepDirectories);
  EXPECT_EQ(watch.state_file(), dir.path() + "/<step>/");
  EXPECT_EQ(watch.Poll(), std::nullopt);
  // Orbax writes into <step>.orbax-checkpoint-tmp: not a checkpoint yet.
  std::filesystem::create_directory(dir.path() + "/50.orbax-checkpoint-tmp");
  EXPECT_EQ(watch.Poll(), std::nullopt);
  // A file with a step's name is not a step directory.
  WriteFile(dir.path() + "/70", "x");
  EXPECT_EQ(watch.Poll(), std::nullopt);
  // Finalized: renamed to <step>.
  std::filesystem::rename(dir.path() + "/50.orbax-checkpoint-tmp", dir.path() + "/50");
  auto state = watch.Poll();
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->step, 50);
  EXPECT_EQ(state->path, dir.path() + "/50");
  EXPECT_EQ(watch.Poll(), std::nullopt);
  std::filesystem::create_directory(dir.path() + "/100");
  state = watch.Poll();
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->step, 100);
}

}  // namespace
}  // namespace tfslurm::agent
