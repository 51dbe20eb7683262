// GPUs in the spec (resources and roles.<role>: gpus_per_node, gpus_per_task)
// and what reaches Slurm: the SubmitRequest, the script's #SBATCH lines, and
// SLURM_GPUS_PER_TASK in the job's environment, which srun in the script needs
// to bind each task to GPUs of its own. CUDA_VISIBLE_DEVICES is Slurm's alone:
// tfslurm sets it nowhere.
#include <gtest/gtest.h>

#include <algorithm>

#include "service/core/attempt_run.h"
#include "service/core/sbatch_script.h"
#include "service/core/spec.h"
#include "tests/unit/job_plans.h"
#include "tests/unit/spec_parsing.h"

namespace tfslurm {
namespace {

using testing::ParsedSpec;

using nlohmann::json;

json GpuSpec(const json& resources) {
  json s = json::parse(R"({"id": "gpu-1", "command": ["python3", "train.py"],
    "cluster": {"worker": 4},
    "resources": {"nodes": 2, "tasks_per_node": 2}})");
  s["resources"].update(resources);
  return s;
}

std::string Errors(const json& spec) {
  auto r = ParseSpec(spec);
  if (r.ok()) return "(no errors)";
  std::string all;
  for (const auto& e : r.status().fields()) all += e.field + ": " + e.reason + "\n";
  return all;
}

bool Contains(const std::vector<std::string>& v, const std::string& e) {
  return std::find(v.begin(), v.end(), e) != v.end();
}

bool AnyStartsWith(const std::vector<std::string>& v, const std::string& prefix) {
  return std::any_of(v.begin(), v.end(),
                     [&](const std::string& e) { return e.starts_with(prefix); });
}

SubmitRequest Build(const ExperimentSpec& s, const std::vector<MemoryPlan>& more = {}) {
  MemoryPlan mem{2000, 2000, "auto: test"};
  return BuildSubmitRequest(s, testing::PlanOf(s, mem, more),
                            {1, {"/out/gpu-1/logs/attempt-1"}, "secret", {}},
                            {"/usr/bin/tfslurm-agent", "svc:7070"}, {"PATH=/usr/bin"});
}

TEST(GpusSpec, GpusPerTaskIsParsedAndRoundTrips) {
  ExperimentSpec s = ParsedSpec(GpuSpec({{"gpus_per_task", 2}}));
  EXPECT_EQ(s.resources.gpus_per_task, 2);
  EXPECT_EQ(s.resources.gpus_per_node, 0);
  EXPECT_EQ(s.ToJson()["resources"]["gpus_per_task"], 2);
  EXPECT_EQ(ParsedSpec(s.ToJson()).ToJson(), s.ToJson());
  EXPECT_EQ(ParsedSpec(GpuSpec(json::object())).resources.gpus_per_task, 0)
      << "default: no GPUs per task";
  EXPECT_EQ(
      ParsedSpec(GpuSpec({{"gpus_per_task", 0}, {"gpus_per_node", 4}})).resources.gpus_per_node, 4)
      << "0 is not a request: it combines with gpus_per_node";
}

TEST(GpusSpec, BadGpusPerTaskNamesTheFieldTheValueAndWhatIsAllowed) {
  for (const json& bad : {json(-1), json(65), json("1"), json(1.5), json(nullptr)}) {
    std::string errors = Errors(GpuSpec({{"gpus_per_task", bad}}));
    EXPECT_NE(errors.find("resources.gpus_per_task: "), std::string::npos) << bad << "\n" << errors;
    EXPECT_NE(errors.find(bad.dump()), std::string::npos) << "the value: " << errors;
  }
  std::string range = Errors(GpuSpec({{"gpus_per_task", 65}}));
  EXPECT_NE(range.find("64"), std::string::npos) << "what is allowed: " << range;
}

TEST(GpusSpec, GpusPerNodeAndGpusPerTaskTogetherAreRefused) {
  std::string errors = Errors(GpuSpec({{"gpus_per_task", 1}, {"gpus_per_node", 2}}));
  EXPECT_NE(errors.find("resources.gpus_per_task: cannot be combined with gpus_per_node (got "
                        "gpus_per_task 1 and gpus_per_node 2)"),
            std::string::npos)
      << errors;
}

json HetGpuSpec() {
  return json::parse(R"({"id": "gpu-1", "command": ["python3", "train.py"],
    "cluster": {"chief": 1, "ps": 2, "worker": 4},
    "resources": {"nodes": 2, "tasks_per_node": 2, "gpus_per_task": 1},
    "roles": {"chief": {"nodes": 1},
              "ps": {"nodes": 1, "tasks_per_node": 2, "gpus_per_node": 0}}})");
}

TEST(GpusSpec, ARoleInheritsGpusPerTaskUnlessItNamesAGpuField) {
  ExperimentSpec s = ParsedSpec(HetGpuSpec());
  EXPECT_EQ(s.roles.at("chief").gpus_per_task, 1) << "inherited from resources";
  EXPECT_EQ(s.roles.at("ps").gpus_per_task, 0) << "gpus_per_node: 0 says the ps have no GPUs";
  EXPECT_EQ(s.roles.at("ps").gpus_per_node, 0);

  json per_node = HetGpuSpec();
  per_node["roles"]["ps"]["gpus_per_node"] = 2;
  ExperimentSpec t = ParsedSpec(per_node);
  EXPECT_EQ(t.roles.at("ps").gpus_per_node, 2);
  EXPECT_EQ(t.roles.at("ps").gpus_per_task, 0) << "not combined with the inherited gpus_per_task";

  json both = HetGpuSpec();
  both["roles"]["ps"] = {{"nodes", 1}, {"gpus_per_node", 2}, {"gpus_per_task", 1}};
  EXPECT_NE(Errors(both).find("roles.ps.gpus_per_task: cannot be combined with gpus_per_node"),
            std::string::npos)
      << Errors(both);
  json bad = HetGpuSpec();
  bad["roles"]["chief"]["gpus_per_task"] = 99;
  EXPECT_NE(Errors(bad).find("roles.chief.gpus_per_task: "), std::string::npos) << Errors(bad);
}

TEST(GpusSubmit, GpusPerTaskReachesTheRequestTheHeaderAndSrunsEnvironment) {
  auto r = Build(ParsedSpec(GpuSpec({{"gpus_per_task", 2}})));
  EXPECT_EQ(r.gpus_per_task, 2);
  EXPECT_EQ(r.gpus_per_node, 0);
  EXPECT_NE(r.script.find("#SBATCH --gpus-per-task=2\n"), std::string::npos) << r.script;
  EXPECT_EQ(r.script.find("--gpus-per-node"), std::string::npos) << r.script;
  EXPECT_TRUE(Contains(r.environment, "SLURM_GPUS_PER_TASK=2"));
  EXPECT_EQ(r.script.find("CUDA_VISIBLE_DEVICES="), std::string::npos)
      << "the script sets no CUDA_VISIBLE_DEVICES:\n"
      << r.script;
  EXPECT_FALSE(AnyStartsWith(r.environment, "CUDA_VISIBLE_DEVICES="));
}

TEST(GpusSubmit, GpusPerNodeIsSharedWithoutAPerTaskBinding) {
  auto r = Build(ParsedSpec(GpuSpec({{"gpus_per_node", 2}})));
  EXPECT_EQ(r.gpus_per_node, 2);
  EXPECT_EQ(r.gpus_per_task, 0);
  EXPECT_NE(r.script.find("#SBATCH --gpus-per-node=2\n"), std::string::npos) << r.script;
  EXPECT_EQ(r.script.find("--gpus-per-task"), std::string::npos) << r.script;
  EXPECT_FALSE(AnyStartsWith(r.environment, "SLURM_GPUS_PER_TASK"));
  EXPECT_FALSE(AnyStartsWith(r.environment, "CUDA_VISIBLE_DEVICES="));
}

TEST(GpusSubmit, EachComponentOfAHeterogeneousJobHasItsOwnGpusPerTask) {
  MemoryPlan m{2000, 2000, "auto: test"};
  auto r = Build(ParsedSpec(HetGpuSpec()), {m, m});
  // Components: resources (worker 4 tasks), then chief, then ps.
  ASSERT_EQ(r.more_components.size(), 2u) << r.script;
  EXPECT_EQ(r.gpus_per_task, 1);
  EXPECT_EQ(r.more_components[0].gpus_per_task, 1);  // chief inherits
  EXPECT_EQ(r.more_components[1].gpus_per_task, 0);  // ps: gpus_per_node 0
  EXPECT_TRUE(Contains(r.environment, "SLURM_GPUS_PER_TASK_HET_GROUP_0=1"));
  EXPECT_TRUE(Contains(r.environment, "SLURM_GPUS_PER_TASK_HET_GROUP_1=1"));
  EXPECT_FALSE(AnyStartsWith(r.environment, "SLURM_GPUS_PER_TASK_HET_GROUP_2="));
  EXPECT_FALSE(AnyStartsWith(r.environment, "SLURM_GPUS_PER_TASK="))
      << "a plain SLURM_GPUS_PER_TASK would apply to every component";
  // Two #SBATCH lines: component 0's and the chief's hetjob section.
  size_t first = r.script.find("#SBATCH --gpus-per-task=1\n");
  ASSERT_NE(first, std::string::npos) << r.script;
  size_t second = r.script.find("#SBATCH --gpus-per-task=1\n", first + 1);
  ASSERT_NE(second, std::string::npos) << r.script;
  EXPECT_EQ(r.script.find("#SBATCH --gpus-per-task", second + 1), std::string::npos) << r.script;
}

TEST(GpusEnv, NoTaskGetsCudaVisibleDevicesFromTfslurm) {
  for (const json& gpus : {json{{"gpus_per_node", 4}}, json{{"gpus_per_task", 2}}}) {
    ExperimentSpec s = ParsedSpec(GpuSpec(gpus));
    AttemptRun run(s, 1);
    for (int task = 0; task < run.size(); ++task)
      for (const auto& [name, value] : run.TaskEnv(TaskIndex(task), "/out/gpu-1"))
        EXPECT_NE(name, "CUDA_VISIBLE_DEVICES") << gpus << " task " << task << ": " << value;
  }
}

}  // namespace
}  // namespace tfslurm
