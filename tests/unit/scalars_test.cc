// Training scalars: what the store keeps (appending, replacing, thinning,
// the tag limit, reading) on a real SQLite file, and core's pure pieces
// (ScalarProblem, StepsPerSecond).
#include "service/core/scalars.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "base/unsafe_text.h"
#include "service/core/ports/store.h"
#include "service/store/sqlite_store.h"
#include "tests/unit/test_dir.h"

namespace tfslurm {
namespace {

namespace fs = std::filesystem;

class ScalarStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("scalars-test");
    store_ = std::move(store::OpenSqliteStore((dir_ / "db").string())).value();
    Changes c;
    c.create_experiment = true;
    ExperimentRecord e;
    e.id = "exp";
    e.owner = "alice";
    e.spec_json = "{}";
    e.model_dir = "/m/exp";
    c.experiment = e;
    ASSERT_TRUE(store_->Apply(c).ok());
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }

  // Points step_from..step_to of `tag`, value = step / 10, a second apart.
  static std::vector<ScalarPoint> Steps(const std::string& tag, int64_t from, int64_t to) {
    std::vector<ScalarPoint> points;
    for (int64_t s = from; s <= to; ++s)
      points.push_back({tag, s, 1.7e9 + static_cast<double>(s), static_cast<double>(s) / 10});
    return points;
  }

  std::vector<ScalarSeries> Read(std::vector<std::string> tags = {}) {
    return store_->ReadScalars("exp", tags).value();
  }

  fs::path dir_;
  std::unique_ptr<Store> store_;
  ScalarLimits limits_;
};

TEST_F(ScalarStoreTest, KeepsPointsByTagInAttemptAndStepOrder) {
  std::vector<ScalarPoint> mixed = Steps("loss", 3, 4);
  mixed.push_back({"accuracy", 3, 1.7e9, 0.5});
  mixed.push_back({"loss", 1, 1.7e9, std::nullopt});  // a diverged value
  ASSERT_TRUE(store_->AppendScalars("exp", 1, mixed, limits_).ok());
  ASSERT_TRUE(store_->AppendScalars("exp", 2, Steps("loss", 2, 2), limits_).ok());

  std::vector<ScalarSeries> all = Read();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].tag, "accuracy");
  EXPECT_EQ(all[1].tag, "loss");
  EXPECT_EQ(all[1].reported, 4);
  ASSERT_EQ(all[1].points.size(), 4u);
  std::vector<std::pair<int, int64_t>> order;
  for (const auto& p : all[1].points) order.emplace_back(p.attempt, p.step);
  EXPECT_EQ(order, (std::vector<std::pair<int, int64_t>>{{1, 1}, {1, 3}, {1, 4}, {2, 2}}));
  EXPECT_FALSE(all[1].points[0].value.has_value()) << "NaN is kept as no value";
  EXPECT_DOUBLE_EQ(*all[1].points[1].value, 0.3);
  EXPECT_DOUBLE_EQ(all[1].points[1].wall_time, 1.7e9 + 3);

  std::vector<ScalarSeries> only = Read({"accuracy", "absent"});
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0].tag, "accuracy");
}

TEST_F(ScalarStoreTest, ASameStepOfTheSameAttemptReplacesTheKeptPoint) {
  ASSERT_TRUE(store_->AppendScalars("exp", 1, Steps("loss", 1, 1), limits_).ok());
  std::vector<ScalarPoint> again = {{"loss", 1, 1.8e9, 9.0}};
  ASSERT_TRUE(store_->AppendScalars("exp", 1, again, limits_).ok());
  std::vector<ScalarSeries> all = Read();
  ASSERT_EQ(all[0].points.size(), 1u);
  EXPECT_DOUBLE_EQ(*all[0].points[0].value, 9.0);
  EXPECT_EQ(all[0].reported, 2);
}

TEST_F(ScalarStoreTest, ATagPastItsBoundIsThinnedEvenlyKeepingTheNewestAndEachAttemptsFirst) {
  limits_.points_per_tag = 100;
  ASSERT_TRUE(store_->AppendScalars("exp", 1, Steps("loss", 0, 59), limits_).ok());
  ASSERT_TRUE(store_->AppendScalars("exp", 2, Steps("loss", 40, 99), limits_).ok());
  std::vector<ScalarSeries> all = Read();
  const auto& points = all[0].points;
  EXPECT_EQ(all[0].reported, 120);
  EXPECT_LE(points.size(), 100u);
  EXPECT_GE(points.size(), 50u);
  EXPECT_EQ(points.front().attempt, 1);
  EXPECT_EQ(points.front().step, 0);
  EXPECT_EQ(points.back().attempt, 2);
  EXPECT_EQ(points.back().step, 99) << "the newest point stays";
  bool attempt2_first = false;
  for (const auto& p : points) attempt2_first |= p.attempt == 2 && p.step == 40;
  EXPECT_TRUE(attempt2_first) << "where attempt 2 began stays (a chart marks it)";
  // Evenly: no gap between kept points wider than 2 steps within an attempt.
  for (size_t i = 1; i < points.size(); ++i) {
    if (points[i].attempt == points[i - 1].attempt)
      EXPECT_LE(points[i].step - points[i - 1].step, 2) << "at step " << points[i].step;
  }

  // A long run keeps thinning: the bound holds, the span stays whole.
  for (int64_t from = 100; from < 2000; from += 100)
    ASSERT_TRUE(store_->AppendScalars("exp", 2, Steps("loss", from, from + 99), limits_).ok());
  all = Read();
  EXPECT_LE(all[0].points.size(), 100u);
  EXPECT_EQ(all[0].points.front().step, 0);
  EXPECT_EQ(all[0].points.back().step, 1999);
  EXPECT_EQ(all[0].reported, 2020);
}

TEST_F(ScalarStoreTest, TagsPastTheLimitAreRefusedAndNamedOnce) {
  limits_.tags = 2;
  std::vector<ScalarPoint> points = {{"a", 1, 1.7e9, 1.0},
                                     {"b", 1, 1.7e9, 1.0},
                                     {"c", 1, 1.7e9, 1.0},
                                     {"c", 2, 1.7e9, 1.0},
                                     {"a", 2, 1.7e9, 2.0}};
  auto appended = store_->AppendScalars("exp", 1, points, limits_);
  ASSERT_TRUE(appended.ok());
  EXPECT_EQ(appended->refused_tags, std::vector<std::string>{"c"});
  std::vector<ScalarSeries> all = Read();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].points.size(), 2u);
}

TEST_F(ScalarStoreTest, AnUnknownExperimentIsAnErrorAndWritesNothing) {
  EXPECT_FALSE(store_->AppendScalars("nobody", 1, Steps("loss", 1, 3), limits_).ok());
  EXPECT_TRUE(store_->ReadScalars("nobody", {}).value().empty());
}

TEST(ScalarProblemTest, TagsMustBePrintableUtf8OfBoundedLength) {
  EXPECT_EQ(ScalarProblem({"train/epoch_loss", 1, 0, 1.0}), std::nullopt);
  EXPECT_EQ(ScalarProblem({"température/δ", 1, 0, 1.0}), std::nullopt);
  EXPECT_EQ(ScalarProblem({"", 1, 0, 1.0}), "its tag is empty");
  EXPECT_EQ(ScalarProblem({std::string(257, 'x'), 1, 0, 1.0}),
            "its tag is 257 bytes long; at most 256 are allowed");
  const std::string rule = std::string("; a tag must be ") + kSafeTextRule;
  EXPECT_EQ(ScalarProblem({"a\nb", 1, 0, 1.0}),
            "its tag has U+000A, a control character, at byte 1" + rule);
  EXPECT_EQ(ScalarProblem({"a\x7f", 1, 0, 1.0}),
            "its tag has U+007F, a control character, at byte 1" + rule);
  EXPECT_EQ(ScalarProblem({"bad\xff", 1, 0, 1.0}),
            "its tag has a byte that is not UTF-8 (0xFF) at byte 3" + rule);
}

// Issue 41, point 11: a tag with U+200B looked like another tag.
TEST(ScalarProblemTest, TagsRefuseInvisibleCharactersAndLineSeparators) {
  EXPECT_EQ(ScalarProblem({"loss\u200b", 1, 0, 1.0}),
            std::string("its tag has U+200B, a character that shows nothing, at byte 4; a tag "
                        "must be ") +
                kSafeTextRule);
  EXPECT_NE(ScalarProblem({"a\u2028b", 1, 0, 1.0}), std::nullopt);
  EXPECT_NE(ScalarProblem({"a\U000E0041", 1, 0, 1.0}), std::nullopt);
}

TEST(ScalarProblemTest, TagsRefuseC1AndBidiControlsAsTheyRefuseC0) {
  // U+009B is the 8-bit CSI; U+202E (RLO) would reverse the dashboard's own
  // event text around the tag; U+2066 starts an isolate.
  for (std::string tag : {"a\xc2\x9b"
                          "2J",
                          "loss\xe2\x80\xae"
                          "tset",
                          "x\xe2\x81\xa6y",
                          "a\xc2\x85"
                          "b",
                          "rlm\xe2\x80\x8f"})
    EXPECT_NE(ScalarProblem({tag, 1, 0, 1.0}), std::nullopt) << tag;
  EXPECT_EQ(ScalarProblem({"loss\xe2\x80\xae"
                           "tset",
                           1, 0, 1.0})
                ->substr(0, 41),
            "its tag has U+202E, a bidi control, at by");
  EXPECT_EQ(ScalarProblem({"a\xc2\xa0"
                           "b",
                           1, 0, 1.0}),
            std::nullopt)
      << "U+00A0 is printable";
}

ScalarSeries Series(const std::string& tag, std::vector<ScalarSeries::Point> points) {
  ScalarSeries s;
  s.tag = tag;
  s.points = std::move(points);
  return s;
}

TEST(StepsPerSecondTest, FromTheMostFinelySteppedTagWithinEachAttempt) {
  std::vector<ScalarSeries> series = {
      Series("epoch_loss", {{1, 0, 100, 1.0}, {1, 1, 200, 0.5}}),
      Series("batch_loss", {{1, 0, 100, 1.0},
                            {1, 50, 110, 0.9},
                            {1, 60, 110.5, 0.9},  // read in the same poll: too close
                            {1, 150, 120, 0.8},
                            {2, 100, 300, 0.8},  // a restart from step 100
                            {2, 200, 350, 0.7}}),
  };
  std::optional<StepRate> rate = StepsPerSecond(series);
  ASSERT_TRUE(rate);
  EXPECT_EQ(rate->tag, "batch_loss");
  EXPECT_EQ(rate->wall_time, (std::vector<double>{110, 120, 350}));
  EXPECT_EQ(rate->value, (std::vector<double>{5, 10, 2}));
  EXPECT_EQ(rate->attempt, (std::vector<int>{1, 1, 2}));
}

TEST(StepsPerSecondTest, NoneWithoutTwoPointsOfOneAttempt) {
  EXPECT_FALSE(StepsPerSecond({}));
  EXPECT_FALSE(StepsPerSecond({Series("loss", {{1, 1, 100, 1.0}, {2, 2, 200, 1.0}})}));
  EXPECT_FALSE(StepsPerSecond({Series("loss", {{1, 1, 100, 1.0}, {1, 2, 100.5, 1.0}})}))
      << "less than a second between them";
}

}  // namespace
}  // namespace tfslurm
