// Per-role resources through the service's core (issue 19), with a fake
// Slurm of two partitions: each component's memory and fit from its own
// partition, the heterogeneous request, each task's component, and polling
// a job whose components Slurm lists as records of their own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "service/core/core.h"
#include "service/store/sqlite_store.h"
#include "tests/unit/fakes.h"
#include "tests/unit/test_dir.h"

namespace tfslurm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json HetSpec(const std::string& id) {
  return {{"id", id},
          {"command", {"python3", "train.py"}},
          {"cluster", {{"ps", 2}, {"worker", 4}}},
          {"resources", {{"partition", "debug"}, {"nodes", 2}, {"tasks_per_node", 2}}},
          {"roles",
           {{"ps",
             {{"partition", "psmem"},
              {"nodes", 1},
              {"mem_per_task_mb", 3000},
              {"constraint", "bigmem"}}}}},
          {"restart", {{"max_restarts", 0}}}};
}

class HetExperimentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("het-experiments-test");
    store_ = std::move(store::OpenSqliteStore((dir_ / "db").string())).value();
    config_.output_root = (dir_ / "out").string();
    config_.launch = {"/opt/tfslurm-agent", "svc:1"};
    config_.poll_interval_ms = 1000;
    PartitionShape psmem;
    psmem.name = "psmem";
    psmem.nodes.push_back({"node9", 8, 16000});
    slurm_.more_partitions["psmem"] = psmem;
    experiments_ =
        NewCore({*store_, slurm_, clock_, random_, files_, accounts_}, config_, metrics_);
  }
  void TearDown() override {
    experiments_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }
  void Poll() {
    clock_.Advance(config_.poll_interval_ms);
    experiments_->Tick();
  }

  fs::path dir_;
  std::unique_ptr<Store> store_;
  testing::FakeSlurm slurm_;
  testing::FakeClock clock_;
  testing::FakeRandomness random_;
  testing::FakeFiles files_;
  testing::FakeAccounts accounts_;
  CoreConfig config_;
  Metrics* metrics_ = nullptr;  // a test that counts sets it before Restart()
  std::unique_ptr<Core> experiments_;
};

TEST_F(HetExperimentsTest, SubmitsOneHeterogeneousJobWithEachComponentsMemory) {
  ASSERT_TRUE(experiments_->Submit(HetSpec("h1"), "alice", false).ok());
  ASSERT_EQ(slurm_.submitted.size(), 1u);
  const SubmitRequest& r = slurm_.submitted[0];
  EXPECT_EQ(r.partition, "debug");
  EXPECT_EQ(r.mem_per_cpu_mb, 2000) << "debug's 8000 MB / 4 CPUs";
  ASSERT_EQ(r.more_components.size(), 1u);
  EXPECT_EQ(r.more_components[0].partition, "psmem");
  EXPECT_EQ(r.more_components[0].nodes, 1);
  EXPECT_EQ(r.more_components[0].tasks_per_node, 2);
  EXPECT_EQ(r.more_components[0].mem_per_cpu_mb, 3000);
  EXPECT_EQ(r.more_components[0].constraint, "bigmem");
  EXPECT_NE(r.script.find("#SBATCH hetjob\n#SBATCH --partition=psmem\n"), std::string::npos);
  EXPECT_NE(r.script.find("#   component 0: worker (resources), tasks 0-3; memory per task: auto: "
                          "smallest RealMemory/CPUs in partition debug"),
            std::string::npos)
      << r.script;

  ExperimentView v = experiments_->Get("h1").value();
  std::vector<std::pair<std::string, int>> got;
  for (const TaskView& t : v.tasks) got.push_back({t.role, t.component});
  EXPECT_EQ(got,
            (std::vector<std::pair<std::string, int>>{
                {"worker", 0}, {"worker", 0}, {"worker", 0}, {"worker", 0}, {"ps", 1}, {"ps", 1}}));
  EXPECT_EQ(v.experiment.mem_per_task_mb, 2000);
  EXPECT_NE(v.experiment.mem_explanation.find("component 1 (ps): mem_per_task_mb 3000"),
            std::string::npos)
      << v.experiment.mem_explanation;
}

TEST_F(HetExperimentsTest, AComponentThatCannotFitIsRefusedWithItsNumbersAndNothingStored) {
  json spec = HetSpec("h2");
  spec["roles"]["ps"] = {{"partition", "psmem"}, {"nodes", 2}, {"tasks_per_node", 1}};
  auto r = experiments_->Submit(spec, "alice", false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(r.status().fields().size(), 1u) << r.status().message();
  EXPECT_EQ(r.status().fields()[0].field, "roles.ps.nodes");
  EXPECT_EQ(r.status().fields()[0].reason,
            "component 1 (ps): asks for 2 nodes but partition psmem has 1");
  EXPECT_TRUE(slurm_.submitted.empty());
  EXPECT_FALSE(store_->GetExperiment("h2").ok()) << "a refused spec stores nothing";

  spec["roles"]["ps"] = {{"partition", "nowhere"}};
  r = experiments_->Submit(spec, "alice", false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().fields().at(0).field, "roles.ps.partition");
}

TEST_F(HetExperimentsTest, TheJobEndsWhenEveryComponentHasEnded) {
  ASSERT_TRUE(experiments_->Submit(HetSpec("h3"), "alice", false).ok());
  // Slurm lists each component as a record of its own.
  JobInfo& leader = slurm_.jobs[100];
  leader.het_job_id = 100;
  JobInfo ps = leader;
  ps.job_id = 101;
  ps.het_job_offset = 1;
  leader.state = ps.state = JobState::kRunning;
  leader.nodes = "node[1-2]";
  leader.node_names = {"node1", "node2"};
  ps.nodes = "node9";
  ps.node_names = {"node9"};
  slurm_.jobs[101] = ps;
  Poll();
  ExperimentView v = experiments_->Get("h3").value();
  EXPECT_EQ(v.attempts.back().nodes, "node[1-2],node9");
  EXPECT_EQ(v.attempts.back().state, AttemptState::kRunning);

  slurm_.jobs[100].state = JobState::kCompleted;
  Poll();
  EXPECT_EQ(experiments_->Get("h3").value().attempts.back().state, AttemptState::kRunning)
      << "the ps component still runs";
  slurm_.jobs[101].state = JobState::kCompleted;
  Poll();
  v = experiments_->Get("h3").value();
  EXPECT_EQ(v.attempts.back().state, AttemptState::kEnded);
  EXPECT_EQ(v.experiment.state, ExperimentState::kSucceeded);
}

TEST_F(HetExperimentsTest, AnUnconfirmedReapEndsTheStepInEveryComponent) {
  config_.shutdown_grace_ms = 2000;
  config_.reap_timeout_margin_ms = 1000;
  experiments_ = NewCore({*store_, slurm_, clock_, random_, files_, accounts_}, config_, metrics_);
  ASSERT_TRUE(experiments_->Submit(HetSpec("h4"), "alice", false).ok());
  JobInfo& leader = slurm_.jobs[100];
  leader.het_job_id = 100;
  leader.state = JobState::kRunning;
  JobInfo ps = leader;
  ps.job_id = 101;
  ps.het_job_offset = 1;
  slurm_.jobs[101] = ps;
  Poll();
  const std::string secret = testing::FakeSlurm::SecretOf(slurm_.submitted[0]);
  for (int p = 0; p < 6; ++p) {
    RegisterInfo info;
    info.node_name = p < 4 ? "node" + std::to_string(p / 2 + 1) : "node9";
    info.address = info.node_name;
    info.port = 5000 + p;
    info.local_id = p % 2;
    experiments_->OnRegister({"h4", 1, secret, ProcId(p)}, info,
                             std::make_shared<testing::RecordingChannel>());
  }
  // The workers (component 0) succeed; the ps (component 1) never confirm.
  for (int p = 0; p < 4; ++p)
    EXPECT_TRUE(experiments_->OnExited({"h4", 1, secret, ProcId(p)}, 0, std::nullopt, false).ok());
  Poll();
  EXPECT_TRUE(slurm_.signalled_steps.empty());
  clock_.Advance(config_.shutdown_grace_ms + config_.reap_timeout_margin_ms);
  Poll();
  EXPECT_EQ(slurm_.signalled_steps, (std::vector<int64_t>{100, 101}))
      << "each component's record holds its part of the step";
}

}  // namespace
}  // namespace tfslurm
