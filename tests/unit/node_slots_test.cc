// NodeSlots (service/core/node_slots.h): where each SLURM_PROCID of a job
// with spare nodes runs, and how a spare takes a node's place.
#include "service/core/node_slots.h"

#include <gtest/gtest.h>

namespace tfslurm {
namespace {

TEST(NodeSlots, WithoutSparesEveryProcIsItsTask) {
  NodeSlots none;
  EXPECT_TRUE(none.IsIdentity());
  EXPECT_EQ(none.ToText(), "");
  EXPECT_EQ(none.Place(ProcId(3), 4).kind, ProcPlace::kTask);
  EXPECT_EQ(none.Place(ProcId(3), 4).task, TaskIndex(3));
  EXPECT_EQ(none.Place(ProcId(4), 4).kind, ProcPlace::kOut);
  EXPECT_EQ(none.ProcOfTask(TaskIndex(2)), ProcId(2));
  EXPECT_EQ(NodeSlots::ForNewJob(2, 0, 3), none) << "no spare: nothing to remember";
  EXPECT_FALSE(none.Replacing({1}, {}).has_value()) << "no spare can take a node's place";
  EXPECT_EQ(none.Replacing({}, {}), none);
}

TEST(NodeSlots, SparesComeAfterTheSlotsAndWaitWithNoTask) {
  // 2 nodes of 2 tasks, 1 spare: procs 0-3 run tasks 0-3, procs 4-5 wait.
  NodeSlots s = NodeSlots::ForNewJob(2, 1, 2);
  EXPECT_EQ(s.spares(), std::vector<int>{2});
  for (int p = 0; p < 4; ++p) {
    EXPECT_EQ(s.Place(ProcId(p), 4).kind, ProcPlace::kTask) << p;
    EXPECT_EQ(s.Place(ProcId(p), 4).task, TaskIndex(p)) << p;
  }
  EXPECT_EQ(s.Place(ProcId(4), 4).kind, ProcPlace::kSpare);
  EXPECT_EQ(s.Place(ProcId(5), 4).kind, ProcPlace::kSpare);
  EXPECT_EQ(s.Place(ProcId(6), 4).kind, ProcPlace::kOut);
  EXPECT_EQ(s.Place(ProcId(-1), 4).kind, ProcPlace::kOut);
}

TEST(NodeSlots, TheLowestReadySpareTakesAFailedNodesSlot) {
  NodeSlots s = NodeSlots::ForNewJob(3, 2, 2);  // slots on nodes 0-2, spares 3, 4
  auto next = s.Replacing({1}, {3, 4});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->JobNodeOfSlot(1), 3);
  EXPECT_EQ(next->spares(), std::vector<int>{4});
  // Node 1's procs (2, 3) are out; node 3's (6, 7) run tasks 2 and 3.
  EXPECT_EQ(next->Place(ProcId(2), 6).kind, ProcPlace::kOut);
  EXPECT_EQ(next->Place(ProcId(6), 6).kind, ProcPlace::kTask);
  EXPECT_EQ(next->Place(ProcId(6), 6).task, TaskIndex(2));
  EXPECT_EQ(next->Place(ProcId(7), 6).task, TaskIndex(3));
  EXPECT_EQ(next->ProcOfTask(TaskIndex(3)), ProcId(7));
  EXPECT_EQ(next->JobNodeOfTask(TaskIndex(3)), 3);
  EXPECT_EQ(next->Place(ProcId(8), 6).kind, ProcPlace::kSpare);
  // Only ready spares are taken: node 3's agents are not all waiting.
  auto skip = s.Replacing({0}, {4});
  ASSERT_TRUE(skip.has_value());
  EXPECT_EQ(skip->JobNodeOfSlot(0), 4);
  EXPECT_EQ(skip->spares(), std::vector<int>{3});
  // Two failures, two spares; three, too few.
  auto both = s.Replacing({2, 0}, {3, 4});
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->JobNodeOfSlot(2), 3);
  EXPECT_EQ(both->JobNodeOfSlot(0), 4);
  EXPECT_FALSE(s.Replacing({0, 1, 2}, {3, 4}).has_value());
  EXPECT_FALSE(next->Replacing({0, 2}, {4}).has_value());
  // A node that runs no slot (a spare, or one already out) needs no spare.
  EXPECT_EQ(s.Replacing({4}, {3}), s);
}

TEST(NodeSlots, RoundTripsThroughTheStoresText) {
  NodeSlots s = *NodeSlots::ForNewJob(2, 2, 4).Replacing({0}, {2, 3});
  EXPECT_EQ(s.ToText(), R"({"slots":[2,1],"spares":[3],"tasks_per_node":4})");
  auto back = NodeSlots::FromText(s.ToText());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, s);
  EXPECT_EQ(NodeSlots::FromText(""), NodeSlots());
  for (const char* bad :
       {"{", "[]", R"({"slots":[1]})", R"({"slots":[1],"spares":["x"],"tasks_per_node":1})",
        R"({"slots":[1],"spares":[],"tasks_per_node":0})"})
    EXPECT_FALSE(NodeSlots::FromText(bad).has_value()) << bad;
}

}  // namespace
}  // namespace tfslurm
