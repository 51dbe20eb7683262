#include "client/tfctl/sweep_text.h"

#include <gtest/gtest.h>

namespace tfslurm::tfctl {
namespace {

using nlohmann::json;

json Sweep(const std::string& goal) {
  return json::parse(R"({
    "id": "lr", "state": "running", "reason": "2 of 3 trials running, 3 started",
    "objective": {"tag": "loss", "goal": ")" +
                     goal + R"(", "at": "end"},
    "node_seconds": 7200,
    "best_trial": {"index": 2, "experiment_id": "lr-2", "objective": 0.25},
    "trials": [
      {"index": 1, "experiment_id": "lr-1", "state": "ended", "experiment_state": "cancelled",
       "end_reason": "stopped_early", "objective": 0.5, "objective_step": 15, "last_step": 17, "params": {"arg.--lr": 0.001}},
      {"index": 2, "experiment_id": "lr-2", "state": "running", "experiment_state": "running",
       "end_reason": "", "objective": 0.25, "objective_step": 30, "params": {"arg.--lr": 0.1}},
      {"index": 3, "experiment_id": "lr-3", "state": "running", "experiment_state": "queued",
       "end_reason": "", "objective": null, "objective_step": null, "params": {"arg.--lr": 0.01}}
    ]})");
}

TEST(SweepTextTest, TrialsAreSortedByTheObjectiveBestFirstAndMarked) {
  const std::string text = FormatSweepStatus(Sweep("min"));
  EXPECT_NE(text.find("best: lr-2 (loss 0.25)"), std::string::npos) << text;
  EXPECT_NE(text.find("node-hours: 2"), std::string::npos) << text;
  const size_t table = text.find("TRIAL");
  const size_t best = text.find("lr-2", table), stopped = text.find("lr-1", table),
               none = text.find("lr-3", table);
  ASSERT_NE(best, std::string::npos) << text;
  EXPECT_EQ(text.substr(text.rfind('\n', best) + 1, 1), "*") << "the best trial is marked\n"
                                                             << text;
  EXPECT_EQ(text.substr(text.rfind('\n', stopped) + 1, 1), " ") << text;
  EXPECT_LT(best, stopped) << "0.25 before 0.5 for min";
  EXPECT_LT(stopped, none) << "no objective last";
  EXPECT_NE(text.find("stopped_early  0.5"), std::string::npos) << text;
  // The rung it was judged at, and the step its programs stopped at.
  EXPECT_NE(text.find("LAST STEP"), std::string::npos) << text;
  EXPECT_NE(text.find("15    17"), std::string::npos) << text;
  const std::string max = FormatSweepStatus(Sweep("max"));
  const size_t max_table = max.find("TRIAL");
  EXPECT_LT(max.find("lr-1", max_table), max.find("lr-2", max_table)) << "0.5 before 0.25 for max\n"
                                                                      << max;
}

TEST(SweepTextTest, ATrialWhoseExperimentWasDeletedSaysSo) {
  json s = Sweep("min");
  s["trials"][0]["experiment_state"] = nullptr;  // ended, its experiment deleted
  const std::string text = FormatSweepStatus(s);
  const size_t row = text.find("lr-1", text.find("TRIAL"));
  ASSERT_NE(row, std::string::npos) << text;
  EXPECT_NE(text.substr(row, 30).find("deleted"), std::string::npos) << text;
  s["trials"][0]["state"] = "not_started";
  EXPECT_EQ(FormatSweepStatus(s).find("deleted"), std::string::npos) << "never had one";
}

TEST(SweepTextTest, WhatUsersWroteReachesTheTerminalEscaped) {
  json s = Sweep("min");
  s["trials"][0]["params"] = {{"env.X", "\x1b]0;owned\x07"}};
  s["reason"] = "line\nbreak";
  const std::string text = FormatSweepStatus(s);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  EXPECT_EQ(text.find("line\nbreak"), std::string::npos) << text;
}

}  // namespace
}  // namespace tfslurm::tfctl
