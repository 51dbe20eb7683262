#include "client/spec_file.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tfslurm::client {
namespace {

using nlohmann::json;

TEST(YamlToJsonTest, ASpecInYamlIsTheSameAsInJson) {
  auto j = YamlToJson(R"(
# comment
id: mnist-ps-01
command: [python3, train.py, --steps, "5000"]
env: {DATA_DIR: /scratch/mnist}
cluster: {chief: 1, ps: 2, worker: 4}
resources:
  partition: debug
  nodes: 4
  mem_per_task_mb: auto
  time_limit: "01:00:00"
restart: {max_restarts: 3, "on": [preempted, timeout]}
model_dir: auto
)",
                      "spec.yaml");
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(*j, json::parse(R"({
    "id": "mnist-ps-01",
    "command": ["python3", "train.py", "--steps", "5000"],
    "env": {"DATA_DIR": "/scratch/mnist"},
    "cluster": {"chief": 1, "ps": 2, "worker": 4},
    "resources": {"partition": "debug", "nodes": 4, "mem_per_task_mb": "auto", "time_limit": "01:00:00"},
    "restart": {"max_restarts": 3, "on": ["preempted", "timeout"]},
    "model_dir": "auto"
  })"));
}

TEST(YamlToJsonTest, PlainScalarsFollowTheYaml12CoreSchema) {
  auto j = YamlToJson(R"(
int: 42
negative: -7
octal: 0o17
hex: 0x1F
float: 2.5
exponent: 1e3
yes_is_a_string: yes
on_is_a_string: on
true_is_bool: true
False_is_bool: False
tilde: ~
empty:
time: 02:00:00
quoted_number: "42"
single_quoted: 'true'
huge: 123456789012345678901234567890
)",
                      "s.yaml");
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(*j, json::parse(R"({
    "int": 42, "negative": -7, "octal": 15, "hex": 31, "float": 2.5, "exponent": 1000.0,
    "yes_is_a_string": "yes", "on_is_a_string": "on", "true_is_bool": true, "False_is_bool": false,
    "tilde": null, "empty": null, "time": "02:00:00", "quoted_number": "42",
    "single_quoted": "true", "huge": 123456789012345678901234567890
  })"));
}

TEST(YamlToJsonTest, SyntaxErrorsNameTheFileAndLine) {
  // yaml-cpp notices at the end of the text; the cause is the `{` on line 2.
  auto j = YamlToJson("id: a\ncluster: {worker: 2\n", "bad.yaml");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message().rfind("bad.yaml:2:10: this `{` is never closed", 0), 0u)
      << j.status().message();
  EXPECT_NE(j.status().message().find("(YAML parser: end of map flow not found at 3:1)"),
            std::string::npos)
      << j.status().message();
}

TEST(YamlToJsonTest, RefusesEmptyAndMultiDocumentFiles) {
  auto empty = YamlToJson("# nothing\n", "e.yaml");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);
  auto two = YamlToJson("a: 1\n---\nb: 2\n", "two.yaml");
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("2 YAML documents"), std::string::npos);
}

TEST(LoadSpecFileTest, ReadsJsonByExtensionAndYamlOtherwise) {
  auto dir =
      std::filesystem::temp_directory_path() / ("spec_file_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "s.json") << R"({"cluster": {"worker": 2}})";
  std::ofstream(dir / "s.yml") << "cluster: {worker: 2}\n";
  std::ofstream(dir / "broken.json") << R"({"cluster": )";
  auto from_json = LoadSpecFile((dir / "s.json").string());
  auto from_yaml = LoadSpecFile((dir / "s.yml").string());
  auto broken = LoadSpecFile((dir / "broken.json").string());
  auto missing = LoadSpecFile((dir / "missing.yaml").string());
  std::filesystem::remove_all(dir);

  ASSERT_TRUE(from_json.ok());
  ASSERT_TRUE(from_yaml.ok());
  EXPECT_EQ(*from_json, *from_yaml);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("broken.json: not valid JSON"), std::string::npos);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing.yaml"), std::string::npos);
}

}  // namespace
}  // namespace tfslurm::client
