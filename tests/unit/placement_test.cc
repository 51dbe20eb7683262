#include "service/core/placement.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "service/core/tf_config.h"

namespace tfslurm {
namespace {

ExperimentSpec Spec(int chief, int ps, int worker, int evaluator, int nodes, int tpn,
                    PlacementKind kind) {
  ExperimentSpec s;
  s.cluster = {chief, ps, worker, evaluator};
  s.resources.nodes = nodes;
  s.resources.tasks_per_node = tpn;
  s.placement.kind = kind;
  return s;
}

std::vector<std::string> Roles(const std::vector<TaskRole>& r) {
  std::vector<std::string> out;
  for (const auto& t : r) out.push_back(t.role + std::to_string(t.index));
  return out;
}

TEST(AssignRoles, PackFillsNodeZeroFirst) {
  auto r = AssignRoles(Spec(0, 2, 4, 0, 3, 2, PlacementKind::kPack));
  EXPECT_EQ(Roles(r),
            (std::vector<std::string>{"ps0", "ps1", "worker0", "worker1", "worker2", "worker3"}));
}

TEST(AssignRoles, SpreadPutsPsOnDifferentNodes) {
  auto r = AssignRoles(Spec(0, 2, 4, 0, 3, 2, PlacementKind::kSpread));
  // Node n holds tasks 2n and 2n+1.
  EXPECT_EQ(Roles(r),
            (std::vector<std::string>{"ps0", "worker0", "ps1", "worker1", "worker2", "worker3"}));
}

TEST(AssignRoles, SpreadPutsChiefOnNodeZero) {
  auto r = AssignRoles(Spec(1, 2, 2, 1, 3, 2, PlacementKind::kSpread));
  EXPECT_EQ(r[0].role, "chief");
  EXPECT_EQ(r[2].role, "ps");
  EXPECT_EQ(r[4].role, "ps");
  EXPECT_EQ(r[5].role, "evaluator");
}

TEST(AssignRoles, ExplicitListIsTaken) {
  ExperimentSpec s = Spec(0, 2, 4, 0, 3, 2, PlacementKind::kExplicit);
  s.placement.roles = {"worker", "worker", "worker", "ps", "worker", "ps"};
  auto r = AssignRoles(s);
  EXPECT_EQ(Roles(r),
            (std::vector<std::string>{"worker0", "worker1", "worker2", "ps0", "worker3", "ps1"}));
}

TEST(BuildTfConfig, TensorFlowFormatWithEvaluatorOutsideCluster) {
  std::vector<TaskRole> roles = {
      {"chief", 0}, {"ps", 0}, {"worker", 0}, {"worker", 1}, {"evaluator", 0}};
  std::vector<std::string> addrs = {"n1:1", "n1:2", "n2:3", "n2:4", "n3:5"};
  auto worker1 = nlohmann::json::parse(BuildTfConfig(roles, addrs, 3));
  EXPECT_EQ(worker1,
            nlohmann::json::parse(
                R"({"cluster": {"chief": ["n1:1"], "ps": ["n1:2"], "worker": ["n2:3", "n2:4"]},
                             "task": {"type": "worker", "index": 1}})"));
  auto eval = nlohmann::json::parse(BuildTfConfig(roles, addrs, 4));
  EXPECT_FALSE(eval["cluster"].contains("evaluator"));
  EXPECT_EQ(eval["task"], nlohmann::json::parse(R"({"type": "evaluator", "index": 0})"));
  // Deterministic text: cluster first, roles in a fixed order.
  EXPECT_EQ(BuildTfConfig(roles, addrs, 0).rfind("{\"cluster\":{\"chief\"", 0), 0u);
}

}  // namespace
}  // namespace tfslurm
