// Where a model_dir may be (service/core/model_dir.h), and the spec's path
// fields refusing control and bidi characters (core/spec_checker.h).
#include "service/core/model_dir.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "service/core/spec.h"

namespace tfslurm {
namespace {

using nlohmann::json;

TEST(NormalizePathTest, ResolvesDotsAndSlashesAsText) {
  EXPECT_EQ(NormalizePath("/a//b/./c/../"), "/a/b");
  EXPECT_EQ(NormalizePath("/out/bob/../alice/model"), "/out/alice/model");
  EXPECT_EQ(NormalizePath("/../../etc"), "/etc") << "'..' at the root stays there";
  EXPECT_EQ(NormalizePath("/"), "/");
  EXPECT_EQ(NormalizePath("/a/..."), "/a/...") << "'...' is a name";
}

TEST(PathIsWithinTest, ComparesWholeComponents) {
  EXPECT_TRUE(PathIsWithin("/out/a", "/out"));
  EXPECT_TRUE(PathIsWithin("/out", "/out"));
  EXPECT_FALSE(PathIsWithin("/outside", "/out")) << "a prefix of a name is not a parent";
  EXPECT_TRUE(PathIsWithin("/anything", "/"));
}

class CheckModelDirTest : public ::testing::Test {
 protected:
  Status Check(const std::string& model_dir, const std::string& owner = "bob",
               bool as_root = false) {
    return CheckModelDir({model_dir, "b1", owner, "/out/", as_root},
                         [this](const std::string& id) -> std::optional<std::string> {
                           auto it = owners_.find(id);
                           if (it == owners_.end()) return std::nullopt;
                           return it->second;
                         });
  }
  std::map<std::string, std::string> owners_ = {{"a1", "alice"}, {"b0", "bob"}};
};

TEST_F(CheckModelDirTest, OwnDirectoryAndTheOwnersOtherExperimentsAreAllowed) {
  EXPECT_TRUE(Check("").ok()) << "the default, <output_root>/<id>";
  EXPECT_TRUE(Check("/out/b1").ok());
  EXPECT_TRUE(Check("/out/b1/model").ok());
  EXPECT_TRUE(Check("/out/b0/model").ok()) << "continuing from bob's own earlier experiment";
  EXPECT_TRUE(Check("/home/bob/models/x").ok()) << "outside: the job's account decides";
}

TEST_F(CheckModelDirTest, AnotherUsersExperimentIsRefusedLikeAMissingOne) {
  Status theirs = Check(NormalizePath("/out/b1/../a1/model"));
  ASSERT_EQ(theirs.code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(theirs.fields().size(), 1u);
  EXPECT_EQ(theirs.fields()[0].field, "model_dir");
  EXPECT_NE(theirs.fields()[0].reason.find("'/out/a1/model'"), std::string::npos)
      << "names the value: " << theirs.fields()[0].reason;
  EXPECT_NE(theirs.fields()[0].reason.find("under the experiment's own directory /out/b1"),
            std::string::npos)
      << "says what is allowed: " << theirs.fields()[0].reason;
  Status missing = Check("/out/zz/model");
  ASSERT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(theirs.message(),
            "model_dir '/out/a1/model' is not allowed: is in /out/a1, which is "
            "not one of your experiments");
  EXPECT_EQ(missing.message(),
            "model_dir '/out/zz/model' is not allowed: is in /out/zz, which is "
            "not one of your experiments")
      << "the same words whether the id is someone else's or nobody's";
  EXPECT_TRUE(Check("/out/a1/model", "alice").ok()) << "alice's own";
}

TEST_F(CheckModelDirTest, TheOutputRootItselfOrAParentOfItIsRefused) {
  EXPECT_EQ(Check("/out").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Check("/").code(), StatusCode::kInvalidArgument);
}

TEST_F(CheckModelDirTest, AsRootNothingOutsideTheOutputRoot) {
  Status s = Check("/etc/x", "bob", /*as_root=*/true);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.fields().at(0).reason.find("would create it as root"), std::string::npos)
      << s.fields().at(0).reason;
  EXPECT_TRUE(Check("/out/b1/model", "bob", /*as_root=*/true).ok());
}

json Spec(const std::string& field, const std::string& value) {
  return {{"command", {"true"}}, {"cluster", {{"worker", 1}}}, {field, value}};
}

TEST(SpecPathsTest, ControlAndBidiCharactersAreRefusedNamingTheField) {
  for (const char* field : {"model_dir", "workdir"}) {
    for (std::string value : {"/out/x\x1b]0;TITLE\x07",
                              "/out/\xc2\x9b"
                              "2J",
                              "/out/a\xe2\x80\xae"
                              "b",
                              "/out/a\nb", "/out/a\x7f", "/out/\xff"}) {
      auto parsed = ParseSpec(Spec(field, value));
      ASSERT_FALSE(parsed.ok()) << field << " " << value;
      ASSERT_EQ(parsed.status().fields().size(), 1u) << parsed.status().message();
      EXPECT_EQ(parsed.status().fields()[0].field, field);
      EXPECT_NE(parsed.status().fields()[0].reason.find("without control characters"),
                std::string::npos)
          << parsed.status().fields()[0].reason;
    }
  }
  auto bidi = ParseSpec(Spec("model_dir",
                             "/out/a\xe2\x80\xae"
                             "b"));
  EXPECT_NE(bidi.status().fields()[0].reason.find("U+202E, a bidi control, at byte 6"),
            std::string::npos)
      << bidi.status().fields()[0].reason;
}

// Issue 41, point 11: U+2028 broke a line where none showed, and U+200B
// made two paths look the same.
TEST(SpecPathsTest, RefuseInvisibleCharactersAndLineSeparators) {
  struct Case {
    std::string value;
    std::string why;
  };
  for (const Case& c : {Case{"/out/a\u2028b", "U+2028, a line separator, at byte 6"},
                        Case{"/out/a\u200bb", "U+200B, a character that shows nothing, at byte 6"},
                        Case{"/out/a\ufeffb", "U+FEFF, a character that shows nothing"},
                        Case{"/out/a\U000E0041b", "U+E0041, a character that shows nothing"}}) {
    auto parsed = ParseSpec(Spec("model_dir", c.value));
    ASSERT_FALSE(parsed.ok()) << c.value;
    ASSERT_EQ(parsed.status().fields().size(), 1u) << parsed.status().message();
    EXPECT_NE(parsed.status().fields()[0].reason.find(c.why), std::string::npos)
        << parsed.status().fields()[0].reason;
  }
  EXPECT_TRUE(ParseSpec(Spec("model_dir", "/out/caf\u00e9-\u4e2d\u6587")).ok())
      << "other characters are text";
}

TEST(SpecPathsTest, PathsAreNormalized) {
  auto parsed = ParseSpec(Spec("model_dir", "/out//b1/./x/../model/"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->model_dir, "/out/b1/model");
  auto workdir = ParseSpec(Spec("workdir", "/home/bob/../bob/run/"));
  ASSERT_TRUE(workdir.ok()) << workdir.status().message();
  EXPECT_EQ(workdir->workdir, "/home/bob/run");
}

}  // namespace
}  // namespace tfslurm
