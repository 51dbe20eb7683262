// Sweeps and their trials in the real SQLite store, on a file in a temp
// directory.
#include <gtest/gtest.h>

#include <filesystem>

#include "service/core/ports/store.h"
#include "service/store/sqlite_store.h"
#include "tests/unit/test_dir.h"

namespace tfslurm::store {
namespace {

namespace fs = std::filesystem;

class SweepStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("sweep-store-test");
    auto s = OpenSqliteStore((dir_ / "t.db").string());
    ASSERT_TRUE(s.ok()) << s.status().message();
    store_ = std::move(s).value();
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }

  static SweepRecord Sweep(const std::string& id, const std::string& owner, int64_t at) {
    SweepRecord r;
    r.id = id;
    r.owner = owner;
    r.spec_json = "{\"id\":\"" + id + "\"}";
    r.trials = 8;
    r.created_at = r.updated_at = at;
    return r;
  }

  // Trial `index` of `sweep` with its experiment, in one transaction, as
  // core starts one.
  static Changes StartTrial(const std::string& sweep, int index) {
    Changes c;
    c.create_experiment = true;
    ExperimentRecord e;
    e.id = sweep + "-" + std::to_string(index);
    e.owner = "alice";
    e.spec_json = "{}";
    e.model_dir = "/m/" + e.id;
    c.experiment = e;
    SweepTrialRecord t;
    t.sweep_id = sweep;
    t.index = index;
    t.experiment_id = e.id;
    t.params_json = "{\"env.LR\":0.01}";
    t.started_at = 5;
    c.sweep_trials.push_back(t);
    return c;
  }

  fs::path dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(SweepStoreTest, SweepsRoundTripAndListNewestFirstByOwner) {
  Changes a;
  a.sweep = Sweep("a", "alice", 1);
  a.create_sweep = true;
  ASSERT_TRUE(store_->Apply(a).ok());
  Changes b;
  b.sweep = Sweep("b", "bob", 2);
  b.create_sweep = true;
  ASSERT_TRUE(store_->Apply(b).ok());
  EXPECT_EQ(store_->Apply(a).code(), StatusCode::kAlreadyExists);
  auto got = store_->GetSweep("a");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->owner, "alice");
  EXPECT_EQ(got->spec_json, "{\"id\":\"a\"}");
  EXPECT_EQ(got->trials, 8);
  EXPECT_EQ(got->state, SweepState::kRunning);
  EXPECT_EQ(store_->GetSweep("zz").status().code(), StatusCode::kNotFound);
  auto all = store_->ListSweeps({});
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ(all->at(0).id, "b") << "newest first";
  auto alices = store_->ListSweeps({"alice", false});
  ASSERT_EQ(alices->size(), 1u);
  EXPECT_EQ(alices->at(0).id, "a");

  Changes done;
  done.sweep = *got;
  done.sweep->state = SweepState::kCompleted;
  done.sweep->reason = "8 trials ended";
  done.sweep->updated_at = 9;
  ASSERT_TRUE(store_->Apply(done).ok());
  EXPECT_EQ(store_->GetSweep("a")->state, SweepState::kCompleted);
  EXPECT_EQ(store_->GetSweep("a")->reason, "8 trials ended");
  EXPECT_EQ(store_->ListSweeps({"", true})->size(), 1u) << "only b is open";
}

TEST_F(SweepStoreTest, ATrialIsWrittenWithItsExperimentOrNotAtAll) {
  Changes s;
  s.sweep = Sweep("s", "alice", 1);
  s.create_sweep = true;
  ASSERT_TRUE(store_->Apply(s).ok());
  ASSERT_TRUE(store_->Apply(StartTrial("s", 1)).ok());
  // The experiment id is taken: neither the experiment nor the trial row.
  Changes again = StartTrial("s", 1);
  again.sweep_trials[0].index = 2;
  EXPECT_EQ(store_->Apply(again).code(), StatusCode::kAlreadyExists);
  auto trials = store_->ListSweepTrials("s");
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 1u) << "trial 2 was not written without its experiment";
  const SweepTrialRecord& t = trials->at(0);
  EXPECT_EQ(t.experiment_id, "s-1");
  EXPECT_EQ(t.params_json, "{\"env.LR\":0.01}");
  EXPECT_EQ(t.state, SweepTrialState::kRunning);
  EXPECT_FALSE(t.end_reason);
  EXPECT_FALSE(t.objective);
  EXPECT_EQ(store_->ListSweeps({"", true})->size(), 1u);
}

TEST_F(SweepStoreTest, AnEndedTrialKeepsItsOutcomeAndIsCounted) {
  Changes s;
  s.sweep = Sweep("s", "alice", 1);
  s.sweep->state = SweepState::kCancelled;
  s.create_sweep = true;
  ASSERT_TRUE(store_->Apply(s).ok());
  ASSERT_TRUE(store_->Apply(StartTrial("s", 1)).ok());
  ASSERT_TRUE(store_->Apply(StartTrial("s", 2)).ok());
  EXPECT_EQ(store_->ListSweeps({"", true})->size(), 1u)
      << "a cancelled sweep is open while a trial runs";
  SweepTrialRecord t = store_->ListSweepTrials("s")->at(0);
  t.state = SweepTrialState::kEnded;
  t.end_reason = EndReason::kStoppedEarly;
  t.objective = 0.125;
  t.objective_step = 40;
  t.last_step = 43;
  t.rungs_passed = 1;
  t.node_seconds = 12.5;
  t.note = "loss 0.5 is worse than the cut 0.25";
  t.ended_at = 50;
  Changes end;
  end.sweep_trials.push_back(t);
  ASSERT_TRUE(store_->Apply(end).ok());
  SweepTrialRecord back = store_->ListSweepTrials("s")->at(0);
  EXPECT_EQ(back.state, SweepTrialState::kEnded);
  EXPECT_EQ(back.end_reason, EndReason::kStoppedEarly);
  EXPECT_EQ(back.objective, 0.125) << "a real, not truncated to an integer";
  EXPECT_EQ(back.objective_step, 40);
  EXPECT_EQ(back.last_step, 43) << "where its programs stopped, past its rung";
  EXPECT_FALSE(store_->ListSweepTrials("s")->at(1).last_step) << "none reported";
  EXPECT_EQ(back.rungs_passed, 1);
  EXPECT_EQ(back.node_seconds, 12.5);
  EXPECT_EQ(back.note, t.note);
  EXPECT_EQ(back.ended_at, 50);
  auto counts = store_->CountTrialsByEndReason();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(*counts, (std::vector<std::pair<std::string, int64_t>>{{"stopped_early", 1}}));
  SweepTrialRecord other = store_->ListSweepTrials("s")->at(1);
  other.state = SweepTrialState::kEnded;
  other.end_reason = EndReason::kSucceeded;
  Changes end2;
  end2.sweep_trials.push_back(other);
  ASSERT_TRUE(store_->Apply(end2).ok());
  EXPECT_TRUE(store_->ListSweeps({"", true})->empty()) << "cancelled, and no trial runs";
  // Deleting a trial's experiment keeps the sweep's record of it.
  Changes gone;
  gone.delete_experiment = "s-1";
  ASSERT_TRUE(store_->Apply(gone).ok());
  EXPECT_EQ(store_->ListSweepTrials("s")->size(), 2u);
}

}  // namespace
}  // namespace tfslurm::store
