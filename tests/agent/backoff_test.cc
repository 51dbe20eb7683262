#include "agent/backoff.h"

#include <gtest/gtest.h>

namespace tfslurm::agent {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, DoublesUpToTheCapWithJitter) {
  Backoff backoff(milliseconds(200), milliseconds(5000), /*seed=*/42);
  const int64_t expected_caps[] = {200, 400, 800, 1600, 3200, 5000, 5000, 5000};
  for (int64_t cap : expected_caps) {
    milliseconds delay = backoff.Next();
    EXPECT_GE(delay.count(), cap / 2);
    EXPECT_LE(delay.count(), cap);
  }
  backoff.Reset();
  EXPECT_LE(backoff.Next().count(), 200);
}

TEST(BackoffTest, JitterSpreadsAgents) {
  Backoff a(milliseconds(5000), milliseconds(5000), 1);
  Backoff b(milliseconds(5000), milliseconds(5000), 2);
  bool differ = false;
  for (int i = 0; i < 10; ++i) differ |= a.Next() != b.Next();
  EXPECT_TRUE(differ);
}

}  // namespace
}  // namespace tfslurm::agent
