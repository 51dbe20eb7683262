// Per-role resources (issue 19): the spec's roles block, the job's
// components, placement across them, a heterogeneous job's script and
// request, and how its component records are folded into one job. The
// golden scripts are exact: a plain spec's was produced by the code before
// per-role resources existed (commit 7bce63c), byte for byte.
#include <gtest/gtest.h>

#include "service/core/components.h"
#include "service/core/placement.h"
#include "service/core/sbatch_script.h"
#include "service/core/spec.h"
#include "tests/unit/job_plans.h"
#include "tests/unit/spec_parsing.h"

namespace tfslurm {
namespace {

using testing::ParsedSpec;

using nlohmann::json;

json HetSpec() {
  return json::parse(R"({"id": "mnist-ps-01", "command": ["python3", "train.py"],
    "cluster": {"chief": 1, "ps": 2, "worker": 4},
    "resources": {"partition": "gpu", "nodes": 2, "tasks_per_node": 2, "gpus_per_node": 2,
                  "time_limit": "02:00:00"},
    "roles": {"chief": {"partition": "cpu", "nodes": 1, "tasks_per_node": 1},
              "ps": {"partition": "bigmem", "nodes": 2, "tasks_per_node": 1, "cpus_per_task": 4,
                     "gpus_per_node": 0, "mem_per_task_mb": 32000, "constraint": "ib"}}})");
}

bool HasError(const json& spec, const std::string& field, const std::string& needle) {
  auto r = ParseSpec(spec);
  if (r.ok()) return false;
  for (const auto& e : r.status().fields())
    if (e.field == field && e.reason.find(needle) != std::string::npos) return true;
  std::string all;
  for (const auto& e : r.status().fields()) all += e.field + ": " + e.reason + "\n";
  ADD_FAILURE() << "no error at " << field << " with '" << needle << "'; got:\n" << all;
  return false;
}

TEST(HetSpec, RolesInheritFromResourcesAndRoundTrip) {
  ExperimentSpec s = ParsedSpec(HetSpec());
  ASSERT_EQ(s.roles.size(), 2u);
  const RoleResources& chief = s.roles.at("chief");
  EXPECT_EQ(chief.partition, "cpu");
  EXPECT_EQ(chief.gpus_per_node, 2) << "gpus_per_node is inherited from resources";
  EXPECT_EQ(chief.cpus_per_task, 1);
  EXPECT_FALSE(chief.mem_per_task_mb.has_value());
  const RoleResources& ps = s.roles.at("ps");
  EXPECT_EQ(ps.constraint, "ib");
  EXPECT_EQ(ps.mem_per_task_mb, 32000);
  ExperimentSpec again = ParsedSpec(s.ToJson());
  EXPECT_EQ(again.ToJson(), s.ToJson());
}

TEST(HetSpec, TasksPerNodeDefaultsToTheRoleSpreadOverItsNodes) {
  json j = HetSpec();
  j["roles"]["ps"] = {{"partition", "bigmem"}, {"nodes", 1}};
  EXPECT_EQ(ParsedSpec(j).roles.at("ps").tasks_per_node, 2);
  j["roles"]["ps"] = {{"partition", "bigmem"}};
  EXPECT_EQ(ParsedSpec(j).roles.at("ps").nodes, 1);
  EXPECT_EQ(ParsedSpec(j).roles.at("ps").partition, "bigmem");
}

TEST(HetSpec, RefusesBadFieldsNamingFieldValueAndWhatIsAllowed) {
  json j = HetSpec();
  j["roles"]["ps"]["nodes"] = 0;
  EXPECT_TRUE(HasError(j, "roles.ps.nodes", "must be from 1 to 10000, got 0"));
  j = HetSpec();
  j["roles"]["ps"]["partition"] = "bad name";
  EXPECT_TRUE(HasError(j, "roles.ps.partition", "must be a Slurm partition name"));
  j = HetSpec();
  j["roles"]["ps"]["constraint"] = "a b";
  EXPECT_TRUE(HasError(j, "roles.ps.constraint", "Slurm feature expression"));
  j = HetSpec();
  j["roles"]["ps"]["mem_per_task_mb"] = "lots";
  EXPECT_TRUE(HasError(j, "roles.ps.mem_per_task_mb", "must be \"auto\" or a whole number"));
  j = HetSpec();
  j["roles"]["ps"]["time_limit"] = "01:00:00";
  EXPECT_TRUE(HasError(j, "roles.ps.time_limit", "unknown field; allowed here: partition, nodes"));
  j = HetSpec();
  j["roles"]["master"] = json::object();
  EXPECT_TRUE(HasError(j, "roles.master", "unknown field; allowed here: chief, ps, worker"));
  j = HetSpec();
  j["roles"] = json::array();
  EXPECT_TRUE(HasError(j, "roles", "must be an object, got an array"));
}

TEST(HetSpec, RoleTaskCountsMustMatchCluster) {
  json j = HetSpec();
  j["roles"]["ps"]["nodes"] = 3;
  EXPECT_TRUE(
      HasError(j, "roles.ps", "gives 3 tasks (nodes 3 x tasks_per_node 1) but cluster.ps is 2"));
  j = HetSpec();
  j["roles"]["evaluator"] = {{"nodes", 1}};
  EXPECT_TRUE(HasError(j, "roles.evaluator", "cluster.evaluator is 0"));
  j = HetSpec();
  j["resources"]["nodes"] = 3;
  EXPECT_TRUE(HasError(j, "cluster",
                       "has 4 tasks without a block in roles (worker 4) but resources give 6"));
}

TEST(HetSpec, RefusedForPytorchAndWithAnExplicitPlacement) {
  json torch = {
      {"framework", "pytorch"}, {"command", {"true"}}, {"roles", {{"ps", {{"nodes", 1}}}}}};
  EXPECT_TRUE(HasError(torch, "roles",
                       "per-role resources (a heterogeneous job) are for framework tensorflow"));
  json j = HetSpec();
  j["placement"] = {"worker", "worker", "worker", "worker"};
  EXPECT_TRUE(HasError(j, "placement", "cannot be combined with roles"));
}

TEST(JobComponents, PlainSpecIsOneComponent) {
  json j = HetSpec();
  j.erase("roles");
  j["cluster"] = {{"ps", 1}, {"worker", 3}};
  auto c = JobComponents(ParsedSpec(j));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].shared);
  EXPECT_EQ(c[0].roles, (std::vector<std::string>{"ps", "worker"}));
}

TEST(JobComponents, ResourcesFirstThenRoleGroupsAndSameShapesShareOne) {
  json j = HetSpec();
  // chief and evaluator ask for the same shape: one component, 1 + 1 nodes.
  j["cluster"]["evaluator"] = 1;
  j["roles"]["evaluator"] = j["roles"]["chief"];
  auto c = JobComponents(ParsedSpec(j));
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].roles, (std::vector<std::string>{"worker"}));
  EXPECT_EQ(c[1].roles, (std::vector<std::string>{"chief", "evaluator"}));
  EXPECT_EQ(c[1].resources.nodes, 2);
  EXPECT_EQ(c[1].field, "roles.chief");
  EXPECT_EQ(c[2].roles, (std::vector<std::string>{"ps"}));
  EXPECT_EQ((std::vector<int>{c[0].first_task, c[1].first_task, c[2].first_task}),
            (std::vector<int>{0, 4, 6}));
  EXPECT_EQ((std::vector<int>{c[0].first_node, c[1].first_node, c[2].first_node}),
            (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(ComponentOfTask(c, TaskIndex(5)), 1);
  EXPECT_EQ(ComponentOfTask(c, TaskIndex(7)), 2);
}

TEST(AssignRoles, AcrossComponentsInComponentOrderWithPlacementInsideResources) {
  json j = HetSpec();
  j["cluster"] = {{"chief", 1}, {"ps", 2}, {"worker", 2}, {"evaluator", 1}};
  j["roles"].erase("chief");
  j["resources"]["nodes"] = 2;
  j["placement"] = "spread";
  std::vector<std::string> got;
  for (const TaskRole& r : AssignRoles(ParsedSpec(j)))
    got.push_back(r.role + std::to_string(r.index));
  // Component 0 (resources): chief, worker, worker, evaluator spread over
  // 2 nodes x 2 slots (slot 0 of each node, then slot 1), indexes in task
  // order; component 1: the ps.
  EXPECT_EQ(got,
            (std::vector<std::string>{"chief0", "worker0", "worker1", "evaluator0", "ps0", "ps1"}));
}

TEST(AssignRoles, EveryRoleOfAGroupHasWholeNodesOfItsOwn) {
  json j = HetSpec();
  j["cluster"]["evaluator"] = 1;
  j["roles"]["evaluator"] = j["roles"]["chief"];
  std::vector<std::string> got;
  for (const TaskRole& r : AssignRoles(ParsedSpec(j)))
    got.push_back(r.role + std::to_string(r.index));
  EXPECT_EQ(got, (std::vector<std::string>{"worker0", "worker1", "worker2", "worker3", "chief0",
                                           "evaluator0", "ps0", "ps1"}));
}

const char kPlainScript[] = R"SCRIPT(#!/bin/bash
#SBATCH --job-name=tfx-mnist-ps-01-a2
#SBATCH --partition=debug
#SBATCH --nodes=3
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=2
#SBATCH --mem-per-cpu=2000
#SBATCH --gpus-per-node=1
#SBATCH --exclude=node4,node7
#SBATCH --time=02:00:00
#SBATCH --signal=USR1@120
#SBATCH --no-requeue
#SBATCH --chdir=/out/mnist-ps-01/logs/attempt-2
#SBATCH --output=/out/mnist-ps-01/logs/attempt-2/batch.out
#
# Generated by tfslurmd for experiment mnist-ps-01, attempt 2.
# Memory per task: auto: smallest RealMemory/CPUs in partition debug is node1 (8000 MB / 4 CPUs = 2000 MB per CPU) x 2 CPUs per task = 4000 MB per task.
# Each task runs tfslurm-agent, which registers with the service, receives its
# role, index and TF_CONFIG, and runs the command below (argv, no shell):
#   command: ["python3","train.py","--steps","20000"]
#   workdir: "/home/alice/mnist"
#   env: {"DATA_DIR":"/scratch/mnist"}
# The attempt secret reaches the agents in a file only the job's user reads
# (TFSLURM_SECRET_FILE), never through this file. --no-requeue: after a preemption or
# a node failure tfslurm starts a new attempt itself (see restart in the spec).
# Slurm sends SIGUSR1 to every task 120 s before the time limit; the agent forwards it so the program can checkpoint.

export TFSLURM_STEP_LAUNCHED_AT_MS="$(date +%s%3N)"
exec srun --kill-on-bad-exit=0 --output='/out/mnist-ps-01/logs/attempt-2/task-%t.out' \
  '/usr/bin/tfslurm-agent' \
  --service 'svc.example:7070' \
  --experiment 'mnist-ps-01' \
  --attempt 2 \
  --address 'hostname'
)SCRIPT";

const char kHetScript[] = R"SCRIPT(#!/bin/bash
#SBATCH --job-name=tfx-mnist-ps-01-a1
#SBATCH --partition=gpu
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
#SBATCH --mem-per-cpu=2000
#SBATCH --gpus-per-node=2
#SBATCH --time=02:00:00
#SBATCH --signal=USR1@120
#SBATCH --no-requeue
#SBATCH --chdir=/out/mnist-ps-01/logs/attempt-1
#SBATCH --output=/out/mnist-ps-01/logs/attempt-1/batch.out
#SBATCH hetjob
#SBATCH --partition=cpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=1
#SBATCH --mem-per-cpu=1000
#SBATCH --gpus-per-node=2
#SBATCH --time=02:00:00
#SBATCH --signal=USR1@120
#SBATCH --no-requeue
#SBATCH hetjob
#SBATCH --partition=bigmem
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=4
#SBATCH --mem-per-cpu=8000
#SBATCH --constraint=ib
#SBATCH --time=02:00:00
#SBATCH --signal=USR1@120
#SBATCH --no-requeue
#
# Generated by tfslurmd for experiment mnist-ps-01, attempt 1.
# A heterogeneous job of 3 components (one per distinct resource group), and one step over all of
# them: SLURM_PROCID and SLURM_NODEID count across the components in order.
#   component 0: worker (resources), tasks 0-3; memory per task: auto: partition gpu DefMemPerCPU=2000 MB x 1 CPUs per task = 2000 MB per task
#   component 1: chief (roles.chief), task 4; memory per task: auto: partition cpu DefMemPerCPU=1000 MB x 1 CPUs per task = 1000 MB per task
#   component 2: ps (roles.ps), tasks 5-6; memory per task: mem_per_task_mb 32000 given in the spec; 8000 MB per CPU x 4 CPUs = 32000 MB per task
# Each task runs tfslurm-agent, which registers with the service, receives its
# role, index and TF_CONFIG, and runs the command below (argv, no shell):
#   command: ["python3","train.py"]
# The attempt secret reaches the agents in a file only the job's user reads
# (TFSLURM_SECRET_FILE), never through this file. --no-requeue: after a preemption or
# a node failure tfslurm starts a new attempt itself (see restart in the spec).
# Slurm sends SIGUSR1 to every task 120 s before the time limit; the agent forwards it so the program can checkpoint.

# Each agent writes its task's output to task-<SLURM_PROCID>.out itself (--log-dir):
# srun's %t names component k's files SLURM_PROCID + k in a heterogeneous step.
export TFSLURM_STEP_LAUNCHED_AT_MS="$(date +%s%3N)"
exec srun --het-group=0,1,2 --kill-on-bad-exit=0 \
  '/usr/bin/tfslurm-agent' \
  --log-dir '/out/mnist-ps-01/logs/attempt-1' \
  --service 'svc.example:7070' \
  --experiment 'mnist-ps-01' \
  --attempt 1 \
  --address 'hostname'
)SCRIPT";

TEST(HetScript, APlainSpecRendersExactlyAsBeforePerRoleResources) {
  ExperimentSpec s;
  s.id = "mnist-ps-01";
  s.command = {"python3", "train.py", "--steps", "20000"};
  s.env = {{"DATA_DIR", "/scratch/mnist"}};
  s.workdir = "/home/alice/mnist";
  s.cluster = {1, 2, 2, 1};
  s.resources.partition = "debug";
  s.resources.nodes = 3;
  s.resources.tasks_per_node = 2;
  s.resources.cpus_per_task = 2;
  s.resources.gpus_per_node = 1;
  s.resources.time_limit_minutes = 120;
  MemoryPlan mem{2000, 4000,
                 "auto: smallest RealMemory/CPUs in partition debug is node1 (8000 MB / 4 CPUs = "
                 "2000 MB per CPU) x 2 CPUs per task = 4000 MB per task"};
  auto r =
      BuildSubmitRequest(s, testing::PlanOf(s, mem),
                         {2, {"/out/mnist-ps-01/logs/attempt-2"}, "secret", {"node4", "node7"}},
                         {"/usr/bin/tfslurm-agent", "svc.example:7070"}, {"PATH=/usr/bin"});
  EXPECT_EQ(r.script, kPlainScript);
  EXPECT_TRUE(r.more_components.empty());
  EXPECT_EQ(r.constraint, "");
  EXPECT_EQ(r.environment,
            (std::vector<std::string>{"PATH=/usr/bin", "TFSLURM_SECRET_FILE=secret"}));
  EXPECT_EQ(r.exclude_nodes, "node4,node7");
  EXPECT_EQ(r.mem_per_cpu_mb, 2000);
}

TEST(HetScript, ComponentsAreRenderedWithHetjobSeparatorsAndOneStep) {
  MemoryPlan m0{2000, 2000,
                "auto: partition gpu DefMemPerCPU=2000 MB x 1 CPUs per task = 2000 MB per task"};
  MemoryPlan m1{1000, 1000,
                "auto: partition cpu DefMemPerCPU=1000 MB x 1 CPUs per task = 1000 MB per task"};
  MemoryPlan m2{8000, 32000,
                "mem_per_task_mb 32000 given in the spec; 8000 MB per CPU x 4 CPUs = 32000 MB per "
                "task"};
  const ExperimentSpec het = ParsedSpec(HetSpec());
  auto r = BuildSubmitRequest(het, testing::PlanOf(het, m0, {m1, m2}),
                              {1, {"/out/mnist-ps-01/logs/attempt-1"}, "secret", {}},
                              {"/usr/bin/tfslurm-agent", "svc.example:7070"}, {"PATH=/usr/bin"});
  EXPECT_EQ(r.script, kHetScript);
  ASSERT_EQ(r.more_components.size(), 2u);
  EXPECT_EQ(r.partition, "gpu");
  EXPECT_EQ(r.more_components[0].partition, "cpu");
  EXPECT_EQ(r.more_components[1].mem_per_cpu_mb, 8000);
  EXPECT_EQ(r.more_components[1].constraint, "ib");
  for (const char* e : {"SLURM_NTASKS_HET_GROUP_0=4", "SLURM_NTASKS_PER_NODE_HET_GROUP_2=1",
                        "SLURM_CPUS_PER_TASK_HET_GROUP_2=4", "TFSLURM_SECRET_FILE=secret"})
    EXPECT_NE(std::find(r.environment.begin(), r.environment.end(), e), r.environment.end()) << e;
}

TEST(GroupHetJobs, FoldsComponentsIntoTheLeaderInOffsetOrder) {
  // Field by field: designated initializers that leave `components` out
  // draw -Wmissing-field-initializers.
  auto job = [](int64_t id, std::string name, std::string nodes,
                std::vector<std::string> node_names, int64_t het_job_id, int offset) {
    JobInfo j;
    j.job_id = id;
    j.name = std::move(name);
    j.state = JobState::kRunning;
    j.nodes = std::move(nodes);
    j.node_names = std::move(node_names);
    j.het_job_id = het_job_id;
    j.het_job_offset = offset;
    return j;
  };
  JobInfo plain = job(3, "p", "", {}, 0, 0);
  JobInfo c1 = job(11, "h", "node1", {"node1"}, 10, 1);
  JobInfo c0 = job(10, "h", "node[2-3]", {"node2", "node3"}, 10, 0);
  auto jobs = GroupHetJobs({c1, plain, c0});
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].job_id, 3);
  EXPECT_TRUE(jobs[0].components.empty());
  const JobInfo& h = jobs[1];
  EXPECT_EQ(h.job_id, 10);
  EXPECT_EQ(h.nodes, "node[2-3],node1");
  EXPECT_EQ(h.node_names, (std::vector<std::string>{"node2", "node3", "node1"}));
  ASSERT_EQ(h.components.size(), 2u);
  EXPECT_EQ(h.components[1].job_id, 11);

  // The leader ended but a component still runs: not over yet.
  c0.state = JobState::kCompleted;
  auto later = GroupHetJobs({c0, c1});
  EXPECT_EQ(later[0].state, JobState::kCompleted);
  EXPECT_TRUE(later[0].completing) << "finished only when every component is";
  // A component's node failure is the job's.
  c1.state = JobState::kNodeFail;
  auto failed = GroupHetJobs({c0, c1});
  EXPECT_EQ(failed[0].state, JobState::kNodeFail);
  EXPECT_FALSE(failed[0].completing);
}

}  // namespace
}  // namespace tfslurm
