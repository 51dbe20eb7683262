// A PyTorch rank's and a JAX process's Assignment carry what the rank needs
// (its rank, the world size, rank 0's address), never the cluster: their
// size does not grow with the number of ranks, so the barrier of a large
// job, and of each restart in place, writes N small messages.
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "service/core/core.h"
#include "service/store/sqlite_store.h"
#include "tests/unit/core_test.h"

namespace tfslurm {
namespace {

using testing::FakeSlurm;
using testing::RecordingChannel;

class RankAssignmentTest : public testing::CoreTest {
 protected:
  RankAssignmentTest() : CoreTest("rank-assignment-test") {}
  void SetUp() override {
    CoreTest::SetUp();
    experiments_ = NewCore(Ports(), config_);
  }
  void TearDown() override {
    experiments_.reset();
    CoreTest::TearDown();
  }

  // Submits `id` with `ranks` tasks on the fake partition's 3 nodes, as
  // `framework` ("pytorch", "jax", or "tensorflow": one ps, the rest
  // workers), registers every task and returns each one's Assignment.
  std::vector<AssignmentMsg> Assignments(const std::string& id, const std::string& framework,
                                         int ranks) {
    nlohmann::json spec = {
        {"id", id},
        {"command", {"python3", "train.py"}},
        {"resources", {{"partition", "debug"}, {"nodes", 3}, {"tasks_per_node", ranks / 3}}}};
    if (framework == "tensorflow")
      spec["cluster"] = {{"ps", 1}, {"worker", ranks - 1}};
    else
      spec["framework"] = framework;
    const size_t job = slurm_.submitted.size();
    EXPECT_TRUE(experiments_->Submit(spec, "alice", false).ok());
    std::vector<std::shared_ptr<RecordingChannel>> channels;
    for (int p = 0; p < ranks; ++p) {
      RegisterInfo info;
      info.node_id = p / (ranks / 3);
      info.local_id = p % (ranks / 3);
      info.node_name = "node" + std::to_string(info.node_id + 1);
      info.address = "host" + std::to_string(info.node_id + 1);
      info.port = 5000 + p;
      channels.push_back(std::make_shared<RecordingChannel>());
      experiments_->OnRegister({id, 1, FakeSlurm::SecretOf(slurm_.submitted.at(job)), ProcId(p)},
                               info, channels.back());
    }
    std::vector<AssignmentMsg> out;
    for (auto& ch : channels) {
      auto got = ch->All<AssignmentMsg>();
      EXPECT_EQ(got.size(), 1u);
      if (!got.empty()) out.push_back(got[0]);
    }
    return out;
  }

  // The bytes of the environment, the part of an Assignment that differs
  // between frameworks.
  static size_t EnvBytes(const AssignmentMsg& m) {
    size_t bytes = 0;
    for (const auto& [k, v] : m.env) bytes += k.size() + v.size();
    return bytes;
  }
  static std::set<std::string> EnvKeys(const AssignmentMsg& m) {
    std::set<std::string> keys;
    for (const auto& [k, v] : m.env) keys.insert(k);
    return keys;
  }

  std::unique_ptr<Core> experiments_;
};

TEST_F(RankAssignmentTest, ARanksAssignmentCarriesNoClusterWhateverTheWorldSize) {
  for (const std::string framework : {"pytorch", "jax"}) {
    auto small = Assignments(framework + "-s", framework, 3);
    auto large = Assignments(framework + "-l", framework, 12);
    ASSERT_EQ(small.size(), 3u) << framework;
    ASSERT_EQ(large.size(), 12u) << framework;
    for (const auto& m : large) {
      EXPECT_EQ(m.cluster, nullptr) << framework << " rank " << m.index << " carries the cluster";
      EXPECT_EQ(m.role, "rank");
      // Rank 0 also has TFSLURM_SCALARS_FILE: it reports for the attempt.
      if (m.index > 0) {
        EXPECT_EQ(EnvKeys(m), EnvKeys(large[1])) << framework << ": the same for every rank";
      }
    }
    // 12 ranks against 3: a few more digits (WORLD_SIZE 12, a two-digit
    // rank), nothing per other rank.
    EXPECT_EQ(EnvKeys(large[1]), EnvKeys(small[1])) << framework;
    EXPECT_LE(EnvBytes(large[11]), EnvBytes(small[1]) + 8) << framework;
  }
}

TEST_F(RankAssignmentTest, TensorflowsAssignmentCarriesTheClusterOncePerAttempt) {
  // The other side of the rule: TF_CONFIG needs every task's address, built
  // and compressed once, the same object for every task.
  auto tf = Assignments("tf", "tensorflow", 6);
  ASSERT_EQ(tf.size(), 6u);
  ASSERT_NE(tf[0].cluster, nullptr);
  for (const auto& m : tf) EXPECT_EQ(m.cluster, tf[0].cluster) << m.role << " " << m.index;
  EXPECT_NE(tf[0].cluster->json.find("host3:5005"), std::string::npos) << tf[0].cluster->json;
}

}  // namespace
}  // namespace tfslurm
