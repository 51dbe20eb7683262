#include "service/daemon/descriptor_budget.h"

#include <gtest/gtest.h>

namespace tfslurm::daemon {
namespace {

bool Says(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(FitTaskCap, ACapThatFitsIsKept) {
  auto cap = FitTaskCap(16384, false, 16384 + kDescriptorsBesideAgents);
  ASSERT_TRUE(cap.ok());
  EXPECT_EQ(cap->max_tasks, 16384);
  EXPECT_EQ(cap->warning, "");
  cap = FitTaskCap(16384, true, 20000);  // this machine's hard limit
  ASSERT_TRUE(cap.ok());
  EXPECT_EQ(cap->max_tasks, 16384);
}

TEST(FitTaskCap, ASiteCapThatDoesNotFitIsRefusedSayingHowToFixIt) {
  auto cap = FitTaskCap(16384, true, 4096);
  ASSERT_FALSE(cap.ok());
  EXPECT_EQ(cap.status().code(), StatusCode::kFailedPrecondition);
  const std::string& m = cap.status().message();
  EXPECT_TRUE(Says(m, "--max-tasks-per-experiment 16384 needs 17408 file descriptors")) << m;
  EXPECT_TRUE(Says(m, "at most 4096 file descriptors (its hard RLIMIT_NOFILE)")) << m;
  EXPECT_TRUE(Says(m, "LimitNOFILE=")) << m;
  EXPECT_TRUE(Says(m, "or give --max-tasks-per-experiment 3072 or less")) << m;
  // One descriptor short is short.
  EXPECT_FALSE(FitTaskCap(100, true, 100 + kDescriptorsBesideAgents - 1).ok());
}

TEST(FitTaskCap, TheDefaultCapIsLoweredToFitWithAWarning) {
  auto cap = FitTaskCap(16384, false, 4096);
  ASSERT_TRUE(cap.ok());
  EXPECT_EQ(cap->max_tasks, 4096 - kDescriptorsBesideAgents);
  EXPECT_TRUE(Says(cap->warning, "capped at 3072 tasks, not the default 16384")) << cap->warning;
  EXPECT_TRUE(Says(cap->warning, "LimitNOFILE=")) << cap->warning;
  // Too few descriptors for even one task: refused either way.
  EXPECT_FALSE(FitTaskCap(16384, false, kDescriptorsBesideAgents).ok());
}

}  // namespace
}  // namespace tfslurm::daemon
