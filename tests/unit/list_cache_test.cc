#include "service/api/list_cache.h"

#include <gtest/gtest.h>

namespace tfslurm::api {
namespace {

TEST(ListCacheTest, AnswersOnlyForTheVersionAndQueryItWasComputedFor) {
  ListCache cache;
  EXPECT_EQ(cache.Find(7, "alice"), nullptr);
  cache.Put(7, "alice", "A7");
  ASSERT_NE(cache.Find(7, "alice"), nullptr);
  EXPECT_EQ(*cache.Find(7, "alice"), "A7");
  EXPECT_EQ(cache.Find(7, "bob"), nullptr) << "another owner's query is another answer";
  EXPECT_EQ(cache.Find(8, "alice"), nullptr) << "after a write the body is stale";
}

TEST(ListCacheTest, ANewerVersionDropsEveryOlderBody) {
  ListCache cache;
  cache.Put(7, "alice", "A7");
  cache.Put(7, "bob", "B7");
  cache.Put(9, "alice", "A9");
  EXPECT_EQ(cache.Find(7, "bob"), nullptr);
  EXPECT_EQ(*cache.Find(9, "alice"), "A9");
}

TEST(ListCacheTest, ABodyFromBeforeTheLastWriteIsNotKept) {
  // A slow request read version 7, a write made it 9 and a faster request
  // cached its body at 9: the slow one's body must not replace it.
  ListCache cache;
  cache.Put(9, "alice", "A9");
  cache.Put(7, "alice", "A7");
  EXPECT_EQ(*cache.Find(9, "alice"), "A9");
  EXPECT_EQ(cache.Find(7, "alice"), nullptr);
}

TEST(ListCacheTest, StaysBoundedWhateverTheNumberOfQueries) {
  ListCache cache;
  for (size_t i = 0; i < 10 * ListCache::kMaxEntries; ++i)
    cache.Put(1, "offset=" + std::to_string(i), "body");
  size_t kept = 0;
  for (size_t i = 0; i < 10 * ListCache::kMaxEntries; ++i)
    kept += cache.Find(1, "offset=" + std::to_string(i)) != nullptr;
  EXPECT_LE(kept, ListCache::kMaxEntries);
  EXPECT_GE(kept, 1u) << "the newest body is kept";
}

}  // namespace
}  // namespace tfslurm::api
