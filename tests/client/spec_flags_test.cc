#include "client/spec_flags.h"

#include <gtest/gtest.h>

namespace tfslurm::client {
namespace {

using nlohmann::json;

TEST(ComposeSpecTest, FlagsAloneMakeASpecWithOneTaskPerNode) {
  SpecFlags flags;
  flags.id = "hello";
  flags.ps = 1;
  flags.workers = 2;
  flags.partition = "debug";
  flags.time_limit = "00:10:00";
  flags.command = {"/bin/sh", "-c", "echo hi"};
  auto spec = ComposeSpec(nullptr, flags);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(*spec, json::parse(R"({
    "id": "hello",
    "command": ["/bin/sh", "-c", "echo hi"],
    "cluster": {"ps": 1, "worker": 2},
    "resources": {"partition": "debug", "time_limit": "00:10:00", "nodes": 3, "tasks_per_node": 1}
  })"));
}

TEST(ComposeSpecTest, FlagsOverrideTheFileAndKeepItsOtherFields) {
  json file = json::parse(R"({
    "id": "from-file", "command": ["python3", "train.py"], "env": {"A": "1"},
    "cluster": {"ps": 2, "worker": 4},
    "resources": {"nodes": 3, "tasks_per_node": 2, "partition": "debug"}
  })");
  SpecFlags flags;
  flags.id = "from-flag";
  flags.workers = 1;
  flags.nodes = 1;
  flags.tasks_per_node = 3;
  auto spec = ComposeSpec(file, flags);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ((*spec)["id"], "from-flag");
  EXPECT_EQ((*spec)["command"], json::parse(R"(["python3", "train.py"])"));
  EXPECT_EQ((*spec)["env"], json::parse(R"({"A": "1"})"));
  EXPECT_EQ((*spec)["cluster"], json::parse(R"({"ps": 2, "worker": 1})"));
  EXPECT_EQ((*spec)["resources"],
            json::parse(R"({"nodes": 1, "tasks_per_node": 3, "partition": "debug"})"));
}

TEST(ComposeSpecTest, EnvFlagsJoinTheFilesEnv) {
  SpecFlags flags;
  flags.env = {"LR=0.1", "DATA=/scratch/a=b", "EMPTY="};
  auto spec = ComposeSpec(json{{"env", {{"KEEP", "1"}, {"LR", "0.5"}}}}, flags);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ((*spec)["env"],
            (json{{"KEEP", "1"}, {"LR", "0.1"}, {"DATA", "/scratch/a=b"}, {"EMPTY", ""}}));
  flags.env = {"LR"};
  auto bad = ComposeSpec(json(nullptr), flags);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--env takes NAME=VALUE, e.g. --env LR=0.1; got 'LR'");
}

TEST(ComposeSpecTest, CommandAfterDashesReplacesTheFilesCommand) {
  SpecFlags flags;
  flags.command = {"python3", "other.py"};
  auto spec = ComposeSpec(json::parse(R"({"command": ["python3", "train.py"]})"), flags);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ((*spec)["command"], json::parse(R"(["python3", "other.py"])"));
}

TEST(ComposeSpecTest, WorkdirIsTheFlagsElseTheSpecsElseWhereTfctlRuns) {
  SpecFlags flags;
  flags.default_workdir = "/home/alice/proj";
  auto from_cwd = ComposeSpec(nullptr, flags);
  ASSERT_TRUE(from_cwd.ok());
  EXPECT_EQ((*from_cwd)["workdir"], "/home/alice/proj") << "as sbatch: where it was submitted";

  auto from_file = ComposeSpec(json::parse(R"({"workdir": "/data/w"})"), flags);
  ASSERT_TRUE(from_file.ok());
  EXPECT_EQ((*from_file)["workdir"], "/data/w") << "the spec's own workdir wins over the cwd";

  flags.workdir = "/other";
  auto from_flag = ComposeSpec(json::parse(R"({"workdir": "/data/w"})"), flags);
  ASSERT_TRUE(from_flag.ok());
  EXPECT_EQ((*from_flag)["workdir"], "/other") << "--workdir wins over the file";
}

TEST(ComposeSpecTest, DerivesTheMissingHalfOfTheLayoutWhenTasksDivideEvenly) {
  auto per_node = ComposeSpec(
      json::parse(R"({"cluster": {"ps": 2, "worker": 4}, "resources": {"nodes": 3}})"), {});
  ASSERT_TRUE(per_node.ok());
  EXPECT_EQ((*per_node)["resources"]["tasks_per_node"], 2);

  auto nodes = ComposeSpec(
      json::parse(R"({"cluster": {"worker": 4}, "resources": {"tasks_per_node": 2}})"), {});
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ((*nodes)["resources"]["nodes"], 2);
}

TEST(ComposeSpecTest, LeavesAnUnevenOrInvalidLayoutForTheServiceToReport) {
  auto uneven =
      ComposeSpec(json::parse(R"({"cluster": {"worker": 5}, "resources": {"nodes": 2}})"), {});
  ASSERT_TRUE(uneven.ok());
  EXPECT_FALSE((*uneven)["resources"].contains("tasks_per_node"));

  auto bad_count = ComposeSpec(json::parse(R"({"cluster": {"worker": "many"}})"), {});
  ASSERT_TRUE(bad_count.ok());
  EXPECT_FALSE(bad_count->contains("resources"));

  auto no_cluster = ComposeSpec(json::parse(R"({"command": ["x"]})"), {});
  ASSERT_TRUE(no_cluster.ok());
  EXPECT_EQ(*no_cluster, json::parse(R"({"command": ["x"]})"));
}

TEST(ComposeSpecTest, RefusesToMergeFlagsIntoANonObject) {
  SpecFlags flags;
  flags.workers = 2;
  auto spec = ComposeSpec(json::parse(R"({"cluster": [1, 2]})"), flags);
  ASSERT_FALSE(spec.ok());
  ASSERT_EQ(spec.status().fields().size(), 1u);
  EXPECT_EQ(spec.status().fields()[0].field, "cluster");

  auto list = ComposeSpec(json::parse("[1]"), {});
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("mapping"), std::string::npos);
}

TEST(SetSpecFieldTest, DottedPathsMakeAMergePatchWithJsonValuesButStringsInEnv) {
  json changes = nullptr;
  for (const char* set : {"restart.max_restarts=5", "env.LR=0.1", "env.OLD=null",
                          "resources.time_limit=02:00:00", "restart.on=[\"timeout\"]"})
    ASSERT_TRUE(SetSpecField(changes, set).ok()) << set;
  EXPECT_EQ(changes, json::parse(R"({
    "restart": {"max_restarts": 5, "on": ["timeout"]},
    "env": {"LR": "0.1", "OLD": null},
    "resources": {"time_limit": "02:00:00"}})"));
}

TEST(SetSpecFieldTest, AnAssignmentWithoutPathOrValueIsRefusedSayingTheForm) {
  json changes = nullptr;
  for (const char* bad : {"restart.max_restarts", "=5", "restart..max_restarts=5", "env.=x"}) {
    Status s = SetSpecField(changes, bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(SetSpecField(changes, "x").message().find("PATH=VALUE"), std::string::npos);
  EXPECT_TRUE(changes.is_null()) << "nothing written by a refused assignment";
}

}  // namespace
}  // namespace tfslurm::client
