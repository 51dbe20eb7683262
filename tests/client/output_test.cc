#include "client/tfctl/output.h"

#include <gtest/gtest.h>

#include <sstream>

#include "client/spec_file.h"
#include "client/tfctl/command.h"

namespace tfslurm::tfctl {
namespace {

using nlohmann::json;

TEST(ToYamlTest, QuotesStringsAYamlReaderWouldTakeForOtherTypes) {
  json value = {{"state", "running"}, {"on", "on"},   {"yes", "yes"},   {"number", "12"},
                {"time", "02:00:00"}, {"empty", ""},  {"null", "null"}, {"path", "/m/model.ckpt-1"},
                {"sentence", "a: b"}, {"step", 1200}, {"age", 0.8},     {"done", true},
                {"nothing", nullptr}};
  std::string yaml = ToYaml(value);
  EXPECT_NE(yaml.find("state: running\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("\"on\": \"on\"\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("number: \"12\"\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("time: \"02:00:00\"\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("age: 0.8\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("path: /m/model.ckpt-1\n"), std::string::npos) << yaml;
}

TEST(ToYamlTest, ReadsBackAsTheSameJson) {
  json value = json::parse(R"({
    "id": "x", "tasks": [{"role": "worker", "index": 0, "exit_code": null, "heartbeat_age_s": 1.25}],
    "empty_list": [], "empty_map": {}, "env": {"A": "true", "B": "line1\nline2", "C": "~"},
    "big": 12345678901, "negative": -3, "flag": false
  })");
  auto back = client::YamlToJson(ToYaml(value), "out.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, value);
}

TEST(PrintStructuredTest, PrettyJsonEndsWithNewline) {
  std::ostringstream out;
  PrintStructured(json{{"a", 1}}, OutputFormat::kJson, out);
  EXPECT_EQ(out.str(), "{\n  \"a\": 1\n}\n");
}

TEST(PrintErrorTest, MessageThenOneLinePerField) {
  std::ostringstream out;
  PrintError(InvalidArgument(
                 "the experiment spec has 2 invalid fields",
                 {{"cluster.worker", "must be from 0 to 4096, got -1"}, {"", "must be an object"}}),
             out);
  EXPECT_EQ(out.str(),
            "tfctl: the experiment spec has 2 invalid fields\n"
            "  cluster.worker: must be from 0 to 4096, got -1\n"
            "  (the spec): must be an object\n");
}

TEST(PrintErrorTest, UnauthenticatedSaysWhereTheTokenComesFrom) {
  std::ostringstream out;
  PrintError(Status(StatusCode::kUnauthenticated, "unknown token"), out);
  EXPECT_EQ(out.str(),
            "tfctl: unknown token\n"
            "tfctl sends the token given with --token, in TFSLURM_TOKEN or as `token = ...` in "
            "~/.config/tfslurm/config\n");
  std::ostringstream other;
  PrintError(Unavailable("cannot reach tfslurmd"), other);
  EXPECT_EQ(other.str(), "tfctl: cannot reach tfslurmd\n");
}

}  // namespace
}  // namespace tfslurm::tfctl
