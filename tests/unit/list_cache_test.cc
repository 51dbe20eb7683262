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

std::shared_ptr<const std::string> Text(const char* s) {
  return std::make_shared<const std::string>(s);
}

TEST(ListItemCacheTest, AnswersOnlyForTheIdAndVersionItWasMadeAt) {
  ListItemCache cache;
  EXPECT_EQ(cache.Find("a", 0), nullptr);
  cache.Put("a", 3, Text("a3"));
  ASSERT_NE(cache.Find("a", 3), nullptr);
  EXPECT_EQ(*cache.Find("a", 3), "a3");
  EXPECT_EQ(cache.Find("a", 4), nullptr) << "a changed since: the item is stale";
  EXPECT_EQ(cache.Find("b", 3), nullptr);
  cache.Put("a", 4, Text("a4"));
  EXPECT_EQ(*cache.Find("a", 4), "a4");
  EXPECT_EQ(cache.Find("a", 3), nullptr);
}

TEST(ListItemCacheTest, AnItemFromBeforeTheLastChangeIsNotKept) {
  ListItemCache cache;
  cache.Put("a", 9, Text("a9"));
  cache.Put("a", 7, Text("a7"));  // a slower list that read a's row earlier
  EXPECT_EQ(*cache.Find("a", 9), "a9");
}

TEST(ListItemCacheTest, StaysBoundedWhateverTheNumberOfExperiments) {
  ListItemCache cache;
  for (size_t i = 0; i < 3 * ListItemCache::kMaxItems; ++i)
    cache.Put("e" + std::to_string(i), 1, Text("item"));
  EXPECT_LE(cache.size(), ListItemCache::kMaxItems);
  EXPECT_NE(cache.Find("e" + std::to_string(3 * ListItemCache::kMaxItems - 1), 1), nullptr)
      << "the newest item is kept";
}

}  // namespace
}  // namespace tfslurm::api
