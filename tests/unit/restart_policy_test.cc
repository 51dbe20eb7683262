#include "service/core/restart_policy.h"

#include <gtest/gtest.h>

namespace tfslurm {
namespace {

TEST(RestartPolicyTest, ASuccessSucceedsWhateverThePolicy) {
  RestartPolicy p;
  p.on.clear();
  AfterAttempt next = DecideAfterAttempt(p, EndReason::kSucceeded, "chief exited 0", 3, 9);
  EXPECT_EQ(next.action, AfterAttempt::kSucceed);
  EXPECT_EQ(next.why, "chief exited 0");
}

TEST(RestartPolicyTest, AReasonNotInRestartOnFailsAndSaysWhy) {
  RestartPolicy p;  // preempted, timeout, node_fail, retryable_exit
  AfterAttempt next = DecideAfterAttempt(p, EndReason::kPermanentExit, "exit 1", 2, 0);
  EXPECT_EQ(next.action, AfterAttempt::kFail);
  EXPECT_EQ(next.why,
            "attempt 2 permanent_exit: exit 1 (not restarted: permanent_exit is not in "
            "restart.on)");
}

TEST(RestartPolicyTest, AStartupErrorIsNotRestartedByDefaultAndSaysHowToChangeThat) {
  RestartPolicy p;
  AfterAttempt next =
      DecideAfterAttempt(p, EndReason::kStartupError, "worker:0 exited with code 1", 1, 0);
  EXPECT_EQ(next.action, AfterAttempt::kFail);
  EXPECT_EQ(next.why,
            "attempt 1 startup_error: worker:0 exited with code 1 (not restarted: startup_error "
            "is not in restart.on: it would fail the same way again; fix it and resume, or name "
            "startup_error in restart.on if it can pass)");
  p.on.insert(EndReason::kStartupError);
  EXPECT_EQ(DecideAfterAttempt(p, EndReason::kStartupError, "x", 1, 0).action,
            AfterAttempt::kRestart);
}

TEST(RestartPolicyTest, TheBudgetEndsRestarts) {
  RestartPolicy p;
  p.max_restarts = 2;
  EXPECT_EQ(DecideAfterAttempt(p, EndReason::kTimeout, "t", 2, 1).action, AfterAttempt::kRestart);
  AfterAttempt next = DecideAfterAttempt(p, EndReason::kTimeout, "t", 3, 2);
  EXPECT_EQ(next.action, AfterAttempt::kFail);
  EXPECT_NE(next.why.find("(max_restarts 2 reached)"), std::string::npos) << next.why;
}

TEST(RestartPolicyTest, BackoffDoublesPerRestartUpToTenMinutes) {
  RestartPolicy p;
  p.max_restarts = 100;
  p.backoff_s = 10;
  EXPECT_EQ(DecideAfterAttempt(p, EndReason::kNodeFail, "n", 1, 0).delay_ms, 10'000);
  EXPECT_EQ(DecideAfterAttempt(p, EndReason::kNodeFail, "n", 2, 1).delay_ms, 20'000);
  EXPECT_EQ(DecideAfterAttempt(p, EndReason::kNodeFail, "n", 4, 3).delay_ms, 80'000);
  EXPECT_EQ(DecideAfterAttempt(p, EndReason::kNodeFail, "n", 7, 6).delay_ms, 600'000);
  EXPECT_EQ(DecideAfterAttempt(p, EndReason::kNodeFail, "n", 50, 49).delay_ms, 600'000);
  AfterAttempt next = DecideAfterAttempt(p, EndReason::kNodeFail, "node2 died", 2, 1);
  EXPECT_EQ(next.why, "attempt 2 node_fail: node2 died; restart 2 of 100 in 20 s");
  EXPECT_EQ(next.why_in_place, "attempt 2 node_fail: node2 died; restart 2 of 100, at once")
      << "in the same job there is no backoff to wait";
}

TEST(RestartPolicyTest, AnUnknownEndRestartsWhenThePolicyRestartsAnything) {
  RestartPolicy p;
  p.on = {EndReason::kPreempted};
  AfterAttempt next = DecideAfterAttempt(p, EndReason::kUnknown, "job ended while down", 1, 0);
  EXPECT_EQ(next.action, AfterAttempt::kRestart);
  EXPECT_NE(next.why.find("an unknown end is restarted"), std::string::npos) << next.why;
  p.on.clear();
  next = DecideAfterAttempt(p, EndReason::kUnknown, "job ended while down", 1, 0);
  EXPECT_EQ(next.action, AfterAttempt::kFail);
  EXPECT_NE(next.why.find("restart.on is empty"), std::string::npos) << next.why;
}

}  // namespace
}  // namespace tfslurm
