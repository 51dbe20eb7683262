#include "client/tfctl/command.h"

#include <gtest/gtest.h>

namespace tfslurm::tfctl {
namespace {

const std::vector<std::string> kSubcommands = {"submit",  "status", "list",   "events", "logs",
                                               "metrics", "cancel", "resume", "token"};

TEST(NearestTest, ASwapOrATypoFindsTheSubcommand) {
  EXPECT_EQ(Nearest("stauts", kSubcommands), "status");
  EXPECT_EQ(Nearest("sumbit", kSubcommands), "submit");
  EXPECT_EQ(Nearest("lgos", kSubcommands), "logs");
  EXPECT_EQ(Nearest("cancle", kSubcommands), "cancel");
  EXPECT_EQ(Nearest("resum", kSubcommands), "resume");
}

TEST(NearestTest, NothingIsSuggestedForAWordFarFromEveryChoice) {
  EXPECT_EQ(Nearest("frobnicate", kSubcommands), "");
  EXPECT_EQ(Nearest("x", kSubcommands), "");
  EXPECT_EQ(Nearest("", kSubcommands), "");
  EXPECT_EQ(Nearest("status", {}), "");
}

TEST(NearestTest, TagsMatchByTheirLastPartOrBecauseTheyHoldTheWord) {
  EXPECT_EQ(Nearest("los", {"loss", "accuracy"}), "loss");
  EXPECT_EQ(Nearest("los", {"train/loss", "train/accuracy"}), "train/loss");
  EXPECT_EQ(Nearest("epoch_los", {"train/epoch_loss", "train/epoch_accuracy"}), "train/epoch_loss");
  EXPECT_EQ(Nearest("accuracy", {"train/loss", "eval/accuracy_top5"}), "eval/accuracy_top5");
}

}  // namespace
}  // namespace tfslurm::tfctl
