// wire::FrameBatcher (schema/frame_batcher.h): one write in flight, the
// frames queued meanwhile in the next message, and a hold that keeps every
// frame back until it is released.
#include "schema/frame_batcher.h"

#include <gtest/gtest.h>

#include <vector>

#include "agent.pb.h"

namespace tfslurm::wire {
namespace {

using agent::v1::NodeDown;
using agent::v1::ServiceFrame;

ServiceFrame LaneFrame(uint64_t lane) {
  ServiceFrame frame;
  frame.set_lane(lane);
  return frame;
}

std::vector<uint64_t> Lanes(const NodeDown* message) {
  std::vector<uint64_t> lanes;
  if (message)
    for (const ServiceFrame& f : message->frames()) lanes.push_back(f.lane());
  return lanes;
}

TEST(FrameBatcherTest, FramesQueuedDuringAWriteGoTogetherInTheNext) {
  FrameBatcher<NodeDown> writer;
  EXPECT_EQ(Lanes(writer.Queue(LaneFrame(1))), std::vector<uint64_t>{1}) << "nothing in flight";
  EXPECT_EQ(writer.Queue(LaneFrame(2)), nullptr);
  EXPECT_EQ(writer.Queue(LaneFrame(3)), nullptr);
  EXPECT_EQ(Lanes(writer.WriteDone()), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(writer.WriteDone(), nullptr);
  EXPECT_FALSE(writer.writing());
}

TEST(FrameBatcherTest, AHoldKeepsEveryFrameBackUntilItIsReleased) {
  FrameBatcher<NodeDown> writer;
  writer.Hold();
  EXPECT_EQ(writer.Queue(LaneFrame(1)), nullptr) << "nothing in flight, but held";
  EXPECT_EQ(writer.Queue(LaneFrame(2)), nullptr);
  EXPECT_FALSE(writer.writing());
  EXPECT_EQ(Lanes(writer.Release()), (std::vector<uint64_t>{1, 2}));
  EXPECT_TRUE(writer.writing());
  EXPECT_EQ(writer.WriteDone(), nullptr);
  EXPECT_EQ(writer.Release(), nullptr) << "nothing queued";
}

TEST(FrameBatcherTest, AWriteThatEndsDuringAHoldStartsNoOther) {
  FrameBatcher<NodeDown> writer;
  ASSERT_NE(writer.Queue(LaneFrame(1)), nullptr);
  writer.Hold();
  EXPECT_EQ(writer.Queue(LaneFrame(2)), nullptr);
  EXPECT_EQ(writer.WriteDone(), nullptr) << "frame 2 is held";
  EXPECT_FALSE(writer.writing());
  EXPECT_EQ(Lanes(writer.Release()), std::vector<uint64_t>{2});
}

TEST(FrameBatcherTest, AReleaseWithAWriteInFlightLeavesTheFramesForItsEnd) {
  FrameBatcher<NodeDown> writer;
  ASSERT_NE(writer.Queue(LaneFrame(1)), nullptr);
  writer.Hold();
  EXPECT_EQ(writer.Queue(LaneFrame(2)), nullptr);
  EXPECT_EQ(writer.Release(), nullptr) << "one write in flight at most";
  EXPECT_EQ(Lanes(writer.WriteDone()), std::vector<uint64_t>{2});
}

}  // namespace
}  // namespace tfslurm::wire
