#include "agent/scalars_jsonl.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tfslurm::agent {
namespace {

constexpr double kReadAt = 1'700'000'000.5;

TEST(ParseScalarsLineTest, EveryNumberIsATagInTheOrderWritten) {
  auto points =
      ParseScalarsLine(R"({"step": 120, "loss": 0.31, "accuracy": 0.9, "n": 7})", kReadAt);
  ASSERT_TRUE(points.ok()) << points.status().message();
  EXPECT_EQ(*points, (std::vector<ScalarPoint>{{"loss", 120, kReadAt, 0.31},
                                               {"accuracy", 120, kReadAt, 0.9},
                                               {"n", 120, kReadAt, 7}}));
}

TEST(ParseScalarsLineTest, WallTimeWhenGivenElseNow) {
  auto given = ParseScalarsLine(R"({"wall_time": 1717000000.25, "step": 1, "loss": 2})", kReadAt);
  ASSERT_TRUE(given.ok());
  ASSERT_EQ(given->size(), 1u);
  EXPECT_EQ((*given)[0].wall_time, 1717000000.25);
  auto missing = ParseScalarsLine(R"({"step": 1, "loss": 2})", kReadAt);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ((*missing)[0].wall_time, kReadAt);
}

TEST(ParseScalarsLineTest, OtherValuesAreIgnored) {
  auto points = ParseScalarsLine(
      R"({"step": -3, "phase": "train", "ok": true, "none": null, "nested": {"a": 1}, "x": 1e3})",
      kReadAt);
  ASSERT_TRUE(points.ok());
  EXPECT_EQ(*points, (std::vector<ScalarPoint>{{"x", -3, kReadAt, 1000}}));
}

TEST(ParseScalarsLineTest, PythonsNanAndInfinityAreNumbers) {
  // json.dumps({"step": 5, "loss": float("nan"), ...}) writes these tokens.
  auto points = ParseScalarsLine(
      R"({"step": 5, "loss": NaN, "grad": Infinity, "low": -Infinity, "s": "NaN Infinity"})",
      kReadAt);
  ASSERT_TRUE(points.ok()) << points.status().message();
  ASSERT_EQ(points->size(), 3u) << "the string stays a string";
  EXPECT_TRUE(std::isnan((*points)[0].value));
  EXPECT_EQ((*points)[1].value, INFINITY);
  EXPECT_EQ((*points)[2].value, -INFINITY);
}

TEST(ParseScalarsLineTest, NanOrInfinityAsAKeyIsNotJson) {
  // Found by scalars_jsonl_fuzzer: the bare token in a key's place became a
  // tag starting with the quoting marker, a NUL.
  for (const char* line : {R"({"step": -4, "b": true, Infinity: 1})", R"({"step": 1, NaN: 2})",
                           R"({"step": 1, -Infinity: 2, "loss": 3})"}) {
    auto points = ParseScalarsLine(line, kReadAt);
    ASSERT_FALSE(points.ok()) << line;
    EXPECT_EQ(points.status().message(), "not valid JSON") << line;
  }
}

TEST(ParseScalarsLineTest, BlankLineIsValidAndEmpty) {
  auto points = ParseScalarsLine("  \r", kReadAt);
  ASSERT_TRUE(points.ok());
  EXPECT_TRUE(points->empty());
}

TEST(ParseScalarsLineTest, InvalidLinesSayWhy) {
  struct Case {
    const char* line;
    const char* reason;
  };
  for (const Case& c : {
           Case{R"({"step": 1, "loss": )", "not valid JSON"},
           Case{R"([1, 2])", "not a JSON object"},
           Case{R"({"loss": 0.5})", "no \"step\""},
           Case{R"({"step": 1.5, "loss": 0.5})", "\"step\" must be an integer, got 1.5"},
           Case{R"({"step": "7", "loss": 0.5})", "\"step\" must be an integer, got \"7\""},
           Case{R"({"step": 18446744073709551615})", "\"step\" is out of range"},
           Case{R"({"step": 1, "wall_time": "today"})", "\"wall_time\" must be a number"},
           Case{R"({"step": 1, "wall_time": NaN})", "\"wall_time\" must be a number"},
       }) {
    auto points = ParseScalarsLine(c.line, kReadAt);
    ASSERT_FALSE(points.ok()) << c.line;
    EXPECT_NE(points.status().message().find(c.reason), std::string::npos)
        << c.line << " -> " << points.status().message();
  }
}

}  // namespace
}  // namespace tfslurm::agent
