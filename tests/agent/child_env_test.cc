#include "agent/child_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "schema/tf_config_wire.h"

namespace tfslurm::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::map<std::string, std::string> AsMap(const std::vector<std::string>& entries) {
  std::map<std::string, std::string> vars;
  for (const std::string& entry : entries) {
    size_t eq = entry.find('=');
    EXPECT_NE(eq, std::string::npos) << entry;
    EXPECT_FALSE(vars.contains(entry.substr(0, eq))) << "duplicate " << entry;
    vars[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return vars;
}

ChildEnvInputs Inputs(const v1::Assignment* assignment) {
  ChildEnvInputs inputs;
  inputs.inherited = {"PATH=/usr/bin:/bin", "HOME=/home/alice",          "TFSLURM_SECRET=hunter2",
                      "SLURM_PROCID=3",     "WEIRD==starts with equals", "=no name",
                      "TFSLURM_PORT=1111",  "EXPERIMENT_ID=stale"};
  inputs.assignment = assignment;
  inputs.experiment_id = "exp-1";
  inputs.attempt = 2;
  inputs.port = 40000;
  return inputs;
}

TEST(BuildChildEnvTest, AssignmentOverlaysTheAgentEnvironment) {
  v1::Assignment assignment;
  (*assignment.mutable_env())["TF_CONFIG"] = R"({"cluster": {}, "task": {"type": "ps"}})";
  (*assignment.mutable_env())["HOME"] = "/scratch/alice";
  (*assignment.mutable_env())["MULTI"] = "a\nb $(x) 'q' \"d\" ünï";
  ChildEnv env = BuildChildEnv(Inputs(&assignment));
  auto vars = AsMap(env.entries);
  EXPECT_EQ(vars["PATH"], "/usr/bin:/bin");
  EXPECT_EQ(vars["HOME"], "/scratch/alice");
  EXPECT_EQ(vars["SLURM_PROCID"], "3");
  EXPECT_EQ(vars["WEIRD"], "=starts with equals");
  EXPECT_EQ(vars["TF_CONFIG"], R"({"cluster": {}, "task": {"type": "ps"}})");
  EXPECT_EQ(vars["MULTI"], "a\nb $(x) 'q' \"d\" ünï");
  EXPECT_THAT(env.rejected, IsEmpty());
  EXPECT_TRUE(std::is_sorted(env.entries.begin(), env.entries.end()));
}

TEST(BuildChildEnvTest, SecretNeverReachesTheProgram) {
  v1::Assignment assignment;
  (*assignment.mutable_env())["TFSLURM_SECRET"] = "from the service";
  auto vars = AsMap(BuildChildEnv(Inputs(&assignment)).entries);
  EXPECT_FALSE(vars.contains("TFSLURM_SECRET"));
  EXPECT_FALSE(AsMap(BuildChildEnv(Inputs(nullptr)).entries).contains("TFSLURM_SECRET"));
}

TEST(BuildChildEnvTest, AgentFillsWhatTheAssignmentLacks) {
  v1::Assignment assignment;
  assignment.set_tf_config(R"({"task": {"type": "chief", "index": 0}})");
  assignment.set_model_dir("/out/exp-1");
  assignment.set_role("chief");
  assignment.set_index(0);
  auto vars = AsMap(BuildChildEnv(Inputs(&assignment)).entries);
  EXPECT_EQ(vars["TF_CONFIG"], R"({"task": {"type": "chief", "index": 0}})");
  EXPECT_EQ(vars["MODEL_DIR"], "/out/exp-1");
  EXPECT_EQ(vars["TFSLURM_ROLE"], "chief");
  EXPECT_EQ(vars["TFSLURM_INDEX"], "0");
  EXPECT_EQ(vars["TFSLURM_PORT"], "40000");  // the reserved port, not the inherited one
  EXPECT_EQ(vars["EXPERIMENT_ID"], "exp-1");
  EXPECT_EQ(vars["TFSLURM_ATTEMPT"], "2");
}

TEST(BuildChildEnvTest, PytorchRanksGetNoRoleAndNoTfConfig) {
  v1::Assignment assignment;
  assignment.set_framework("pytorch");
  assignment.set_role("rank");
  assignment.set_index(3);
  assignment.set_model_dir("/out/ddp");
  (*assignment.mutable_env())["RANK"] = "3";
  (*assignment.mutable_env())["MASTER_PORT"] = "41000";
  ChildEnv env = BuildChildEnv(Inputs(&assignment));
  auto vars = AsMap(env.entries);
  EXPECT_FALSE(env.tf_config_unreadable);
  EXPECT_FALSE(vars.contains("TF_CONFIG"));
  EXPECT_FALSE(vars.contains("TFSLURM_ROLE"));
  EXPECT_FALSE(vars.contains("TFSLURM_INDEX"));
  EXPECT_EQ(vars["RANK"], "3");
  EXPECT_EQ(vars["MASTER_PORT"], "41000");
  EXPECT_EQ(vars["MODEL_DIR"], "/out/ddp");
}

TEST(BuildChildEnvTest, JaxProcessesGetLocalDeviceIdsForTheGpusSlurmBound) {
  v1::Assignment assignment;
  assignment.set_framework("jax");
  assignment.set_role("rank");
  assignment.set_index(3);
  (*assignment.mutable_env())["JAX_PROCESS_ID"] = "3";
  // Slurm bound GPUs 2 and 3 of the node: CUDA numbers them 0 and 1.
  ChildEnvInputs inputs = Inputs(&assignment);
  inputs.inherited.push_back("CUDA_VISIBLE_DEVICES=2,3");
  inputs.inherited.push_back("JAX_LOCAL_DEVICE_IDS=7");  // not from this task's GPUs
  auto vars = AsMap(BuildChildEnv(inputs).entries);
  EXPECT_EQ(vars["JAX_LOCAL_DEVICE_IDS"], "0,1");
  EXPECT_EQ(vars["CUDA_VISIBLE_DEVICES"], "2,3");
  EXPECT_EQ(vars["JAX_PROCESS_ID"], "3");
  EXPECT_FALSE(vars.contains("TFSLURM_ROLE"));
  EXPECT_FALSE(vars.contains("TFSLURM_INDEX"));
  // AMD's GPUs, named by ROCR_VISIBLE_DEVICES.
  inputs = Inputs(&assignment);
  inputs.inherited.push_back("ROCR_VISIBLE_DEVICES=5");
  EXPECT_EQ(AsMap(BuildChildEnv(inputs).entries)["JAX_LOCAL_DEVICE_IDS"], "0");
  // No GPU (or Slurm's NoDevFiles): no ids, so JAX uses every device it sees.
  for (const char* none : {"PATH=/bin", "CUDA_VISIBLE_DEVICES=", "CUDA_VISIBLE_DEVICES=NoDevFiles",
                           "JAX_LOCAL_DEVICE_IDS=0"}) {
    inputs = Inputs(&assignment);
    inputs.inherited.push_back(none);
    EXPECT_FALSE(AsMap(BuildChildEnv(inputs).entries).contains("JAX_LOCAL_DEVICE_IDS")) << none;
  }
  // Another framework's task gets none.
  assignment.set_framework("pytorch");
  inputs = Inputs(&assignment);
  inputs.inherited.push_back("CUDA_VISIBLE_DEVICES=2,3");
  EXPECT_FALSE(AsMap(BuildChildEnv(inputs).entries).contains("JAX_LOCAL_DEVICE_IDS"));
}

TEST(BuildChildEnvTest, TfConfigFromTheCompressedClusterOfTheGrpcStream) {
  const std::string cluster = R"({"ps":["n1:1"],"worker":["n1:2","n2:3"]})";
  v1::Assignment assignment;
  assignment.set_role("worker");
  assignment.set_index(1);
  assignment.set_cluster_zlib(wire::CompressCluster(cluster));
  ASSERT_LT(assignment.cluster_zlib().size(), cluster.size() + 16);
  ChildEnv env = BuildChildEnv(Inputs(&assignment));
  EXPECT_FALSE(env.tf_config_unreadable);
  EXPECT_EQ(
      AsMap(env.entries)["TF_CONFIG"],
      R"({"cluster":{"ps":["n1:1"],"worker":["n1:2","n2:3"]},"task":{"type":"worker","index":1}})");

  assignment.set_cluster_zlib("not zlib");
  env = BuildChildEnv(Inputs(&assignment));
  EXPECT_TRUE(env.tf_config_unreadable);
  EXPECT_FALSE(AsMap(env.entries).contains("TF_CONFIG"));
}

TEST(BuildChildEnvTest, AssignmentEnvWinsOverFields) {
  v1::Assignment assignment;
  assignment.set_tf_config("from the field");
  (*assignment.mutable_env())["TF_CONFIG"] = "from env";
  (*assignment.mutable_env())["TFSLURM_PORT"] = "5555";
  (*assignment.mutable_env())["EXPERIMENT_ID"] = "exp-from-service";
  auto vars = AsMap(BuildChildEnv(Inputs(&assignment)).entries);
  EXPECT_EQ(vars["TF_CONFIG"], "from env");
  EXPECT_EQ(vars["TFSLURM_PORT"], "5555");
  EXPECT_EQ(vars["EXPERIMENT_ID"], "exp-from-service");
}

TEST(BuildChildEnvTest, EmptyValuesAreKept) {
  v1::Assignment assignment;
  (*assignment.mutable_env())["DATA_DIR"] = "";
  auto vars = AsMap(BuildChildEnv(Inputs(&assignment)).entries);
  ASSERT_TRUE(vars.contains("DATA_DIR"));
  EXPECT_EQ(vars["DATA_DIR"], "");
}

// slurmstepd binds GPUs in the task's environment (CUDA_VISIBLE_DEVICES and
// its siblings); the agent hands them to the program exactly as set, and the
// service sends no value of its own.
TEST(BuildChildEnvTest, SlurmsGpuBindingReachesTheProgramUntouched) {
  v1::Assignment assignment;
  (*assignment.mutable_env())["MODEL_DIR"] = "/out/exp";
  ChildEnvInputs inputs = Inputs(&assignment);
  for (const char* e : {"CUDA_VISIBLE_DEVICES=2,3", "SLURM_STEP_GPUS=2,3", "GPU_DEVICE_ORDINAL=2,3",
                        "SLURM_JOB_GPUS=0,1,2,3"})
    inputs.inherited.push_back(e);
  auto vars = AsMap(BuildChildEnv(inputs).entries);
  EXPECT_EQ(vars["CUDA_VISIBLE_DEVICES"], "2,3");
  EXPECT_EQ(vars["SLURM_STEP_GPUS"], "2,3");
  EXPECT_EQ(vars["GPU_DEVICE_ORDINAL"], "2,3");
  EXPECT_EQ(vars["SLURM_JOB_GPUS"], "0,1,2,3");

  // A task Slurm gave no GPU has no CUDA_VISIBLE_DEVICES: none is made up.
  auto none = AsMap(BuildChildEnv(Inputs(&assignment)).entries);
  EXPECT_FALSE(none.contains("CUDA_VISIBLE_DEVICES"));
}

TEST(BuildChildEnvTest, UnrepresentableVariablesAreRejected) {
  v1::Assignment assignment;
  (*assignment.mutable_env())[""] = "no name";
  (*assignment.mutable_env())["A=B"] = "equals in name";
  (*assignment.mutable_env())["NUL"] = std::string("a\0b", 3);
  (*assignment.mutable_env())["GOOD"] = "yes";
  ChildEnv env = BuildChildEnv(Inputs(&assignment));
  EXPECT_THAT(env.rejected, ElementsAre("", "A=B", "NUL"));
  auto vars = AsMap(env.entries);
  EXPECT_EQ(vars["GOOD"], "yes");
  EXPECT_FALSE(vars.contains("NUL"));
  EXPECT_FALSE(vars.contains("A"));
}

}  // namespace
}  // namespace tfslurm::agent
