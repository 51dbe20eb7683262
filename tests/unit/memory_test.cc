#include "service/core/memory.h"

#include <gtest/gtest.h>

namespace tfslurm {
namespace {

Resources Res(int nodes, int tpn, int cpt, std::optional<int64_t> mem = std::nullopt) {
  Resources r;
  r.nodes = nodes;
  r.tasks_per_node = tpn;
  r.cpus_per_task = cpt;
  r.mem_per_task_mb = mem;
  return r;
}

PartitionShape Uniform(int n, int cpus, int64_t mem) {
  PartitionShape p{"debug"};
  for (int i = 1; i <= n; ++i) p.nodes.push_back({"node" + std::to_string(i), cpus, mem});
  return p;
}

TEST(ComputeMemPerTask, ExclusivePartitionUsesRealMemoryPerCpu) {
  auto plan = ComputeMemPerTask(Uniform(3, 4, 8000), Res(3, 2, 1));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->mem_per_cpu_mb, 2000);
  EXPECT_EQ(plan->mem_per_task_mb, 2000);
  EXPECT_NE(plan->explanation.find("8000 MB / 4 CPUs"), std::string::npos) << plan->explanation;
}

TEST(ComputeMemPerTask, SpareNodesMustFitThePartitionToo) {
  Resources r = Res(2, 2, 1);
  r.spare_nodes = 1;
  EXPECT_TRUE(ComputeMemPerTask(Uniform(3, 4, 8000), r).ok());
  r.spare_nodes = 2;
  auto plan = ComputeMemPerTask(Uniform(3, 4, 8000), r);
  ASSERT_FALSE(plan.ok());
  ASSERT_EQ(plan.status().fields().size(), 1u);
  EXPECT_EQ(plan.status().fields()[0].field, "resources.nodes");
  EXPECT_NE(plan.status().fields()[0].reason.find(
                "asks for 4 nodes (2 and 2 spare_nodes) but partition debug has 3"),
            std::string::npos)
      << plan.status().fields()[0].reason;
}

TEST(ComputeMemPerTask, CpusPerTaskMultiplies) {
  auto plan = ComputeMemPerTask(Uniform(3, 4, 8000), Res(2, 2, 2));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->mem_per_task_mb, 4000);
}

TEST(ComputeMemPerTask, SharedPartitionUsesDefMemPerCpu) {
  PartitionShape p = Uniform(3, 4, 8000);
  p.def_mem_per_cpu_mb = 1500;
  auto plan = ComputeMemPerTask(p, Res(3, 2, 2));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->mem_per_cpu_mb, 1500);
  EXPECT_EQ(plan->mem_per_task_mb, 3000);
  EXPECT_NE(plan->explanation.find("DefMemPerCPU=1500"), std::string::npos) << plan->explanation;
}

TEST(ComputeMemPerTask, ClusterWideDefMemPerCpuSaysWhereItCameFrom) {
  PartitionShape p = Uniform(3, 4, 8000);
  p.def_mem_per_cpu_mb = 1000;
  p.def_mem_per_cpu_cluster_wide = true;
  auto plan = ComputeMemPerTask(p, Res(3, 2, 2));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->mem_per_task_mb, 2000);
  EXPECT_NE(plan->explanation.find("cluster-wide DefMemPerCPU=1000 MB (partition debug sets none)"),
            std::string::npos)
      << plan->explanation;
}

TEST(ComputeMemPerTask, UnequalNodesTakeTheSmallestRatio) {
  PartitionShape p{"mixed"};
  p.nodes = {{"big", 32, 256000}, {"small", 8, 16000}, {"mid", 16, 64000}};
  auto plan = ComputeMemPerTask(p, Res(2, 2, 1));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->mem_per_cpu_mb, 2000);  // small: 16000 / 8
  EXPECT_NE(plan->explanation.find("small"), std::string::npos);
}

TEST(ComputeMemPerTask, ExplicitMemoryRoundsUpPerCpu) {
  auto plan = ComputeMemPerTask(Uniform(3, 4, 8000), Res(1, 1, 3, 1000));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->mem_per_cpu_mb, 334);
  EXPECT_EQ(plan->mem_per_task_mb, 1002);
}

TEST(ComputeMemPerTask, RefusesTooManyCpusWithNumbers) {
  auto plan = ComputeMemPerTask(Uniform(3, 4, 8000), Res(3, 3, 2));
  ASSERT_FALSE(plan.ok());
  ASSERT_FALSE(plan.status().fields().empty());
  const FieldError& e = plan.status().fields().front();
  EXPECT_EQ(e.field, "resources.tasks_per_node");
  EXPECT_NE(e.reason.find("6 CPUs per node"), std::string::npos) << e.reason;
  EXPECT_NE(e.reason.find("most: 4"), std::string::npos) << e.reason;
}

TEST(ComputeMemPerTask, RefusesTooMuchMemoryWithNumbers) {
  auto plan = ComputeMemPerTask(Uniform(3, 4, 8000), Res(3, 2, 1, 5000));
  ASSERT_FALSE(plan.ok());
  const FieldError& e = plan.status().fields().front();
  EXPECT_EQ(e.field, "resources.mem_per_task_mb");
  EXPECT_NE(e.reason.find("10000 MB per node"), std::string::npos) << e.reason;
  EXPECT_NE(e.reason.find("8000 MB"), std::string::npos) << e.reason;
}

TEST(ComputeMemPerTask, RefusesMoreNodesThanThePartitionHas) {
  auto plan = ComputeMemPerTask(Uniform(3, 4, 8000), Res(4, 1, 1));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().fields().front().field, "resources.nodes");
  EXPECT_NE(plan.status().fields().front().reason.find("has 3"), std::string::npos);
}

TEST(ComputeMemPerTask, CountsOnlyNodesThatFit) {
  PartitionShape p{"mixed"};
  p.nodes = {{"a", 8, 32000}, {"b", 2, 32000}, {"c", 8, 32000}};
  EXPECT_TRUE(ComputeMemPerTask(p, Res(2, 4, 1, 1000)).ok());
  auto plan = ComputeMemPerTask(p, Res(3, 4, 1, 1000));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().fields().front().reason.find("only 2 nodes"), std::string::npos);
}

TEST(ComputeMemPerTask, RefusesTimeLimitOverMaxTime) {
  PartitionShape p = Uniform(3, 4, 8000);
  p.max_time_minutes = 60;
  Resources r = Res(1, 1, 1);
  r.time_limit_minutes = 120;
  auto plan = ComputeMemPerTask(p, r);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().fields().front().field, "resources.time_limit");
  EXPECT_NE(plan.status().fields().front().reason.find("MaxTime 01:00:00"), std::string::npos);
}

}  // namespace
}  // namespace tfslurm
