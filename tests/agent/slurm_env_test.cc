#include "agent/slurm_env.h"

#include <gtest/gtest.h>

#include <map>

namespace tfslurm::agent {
namespace {

EnvLookup FromMap(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::map<std::string, std::string> FullTask() {
  return {{"SLURM_JOB_ID", "123456789012"},
          {"SLURM_PROCID", "7"},
          {"SLURM_NODEID", "2"},
          {"SLURM_LOCALID", "1"},
          {"SLURMD_NODENAME", "gpu-node-03"}};
}

TEST(ReadTaskIdentityTest, ReadsEveryField) {
  auto identity = ReadTaskIdentity(FromMap(FullTask()), 0);
  ASSERT_TRUE(identity.ok()) << identity.status().message();
  EXPECT_EQ(identity->slurm_job_id, 123456789012);
  EXPECT_EQ(identity->proc_id, 7);
  EXPECT_EQ(identity->node_id, 2);
  EXPECT_EQ(identity->local_id, 1);
  EXPECT_EQ(identity->node_name, "gpu-node-03");
}

TEST(ReadTaskIdentityTest, NamesEveryMissingVariable) {
  auto vars = FullTask();
  vars.erase("SLURM_PROCID");
  vars.erase("SLURMD_NODENAME");
  auto identity = ReadTaskIdentity(FromMap(vars), 0);
  ASSERT_FALSE(identity.ok());
  const std::string& message = identity.status().message();
  EXPECT_NE(message.find("SLURM_PROCID"), std::string::npos);
  EXPECT_NE(message.find("SLURMD_NODENAME"), std::string::npos);
  EXPECT_EQ(message.find("SLURM_NODEID"), std::string::npos);
  EXPECT_NE(message.find("srun"), std::string::npos);
}

TEST(ReadTaskIdentityTest, RejectsNonNumericValues) {
  for (const char* bad : {"", "x", "-1", "3 ", "1e3", "99999999999"}) {
    auto vars = FullTask();
    vars["SLURM_LOCALID"] = bad;
    auto identity = ReadTaskIdentity(FromMap(vars), 0);
    ASSERT_FALSE(identity.ok()) << bad;
    EXPECT_NE(identity.status().message().find("SLURM_LOCALID='" + std::string(bad) + "'"),
              std::string::npos);
  }
}

TEST(ReadTaskIdentityTest, TheStartAfterTheStepsLaunchIsReadAndNeverNegative) {
  auto vars = FullTask();
  EXPECT_EQ(ReadTaskIdentity(FromMap(vars), 1'000'000)->started_after_launch_ms, std::nullopt)
      << "no launch time: a job script of another tool";
  vars["TFSLURM_STEP_LAUNCHED_AT_MS"] = "1764400000000";
  EXPECT_EQ(ReadTaskIdentity(FromMap(vars), 1764400003250)->started_after_launch_ms, 3250);
  EXPECT_EQ(ReadTaskIdentity(FromMap(vars), 1764399999990)->started_after_launch_ms, 0)
      << "a node's clock a little behind the batch host's";
  vars["TFSLURM_STEP_LAUNCHED_AT_MS"] = "%3N";  // a date without GNU's %N
  auto identity = ReadTaskIdentity(FromMap(vars), 1764400003250);
  ASSERT_TRUE(identity.ok()) << "a figure for /metrics, not the task's identity";
  EXPECT_EQ(identity->started_after_launch_ms, std::nullopt);
}

}  // namespace
}  // namespace tfslurm::agent
