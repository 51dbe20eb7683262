// Sweeps through core's facade, with a fake Slurm and clock and the real
// SQLite store: trials started up to max_concurrent, stopped early by ASHA,
// the next started once a job has left Slurm, nothing lost or repeated by
// a restart, a bad sweep leaving nothing behind.
#include <gtest/gtest.h>

#include "service/core/core.h"
#include "service/store/sqlite_store.h"
#include "service/sweeps/sweep_space.h"
#include "service/sweeps/sweep_spec.h"
#include "service/sweeps/sweeps.h"
#include "tests/unit/core_test.h"

namespace tfslurm::sweeps {
namespace {

using nlohmann::json;
using testing::FakeSlurm;

json Sweep() {
  return json::parse(R"({
    "id": "s",
    "experiment": {
      "command": ["python3", "train.py"],
      "cluster": {"worker": 1},
      "resources": {"partition": "debug", "nodes": 1}
    },
    "parameters": {"env.LR": {"values": [1, 2, 3, 4]}},
    "search": {"type": "grid", "order": "listed"},
    "max_concurrent": 2,
    "objective": {"tag": "loss", "goal": "min"},
    "early_stopping": {"rule": "asha", "rungs": [10], "reduction_factor": 2}
  })");
}

class SweepRunnerTest : public testing::CoreTest {
 protected:
  SweepRunnerTest() : CoreTest("sweep-runner-test") {}
  void SetUp() override {
    CoreTest::SetUp();
    config_.poll_interval_ms = 1000;
    Restart();
  }
  void TearDown() override {
    sweeps_.reset();
    experiments_.reset();
    CoreTest::TearDown();
  }
  void Restart() {
    sweeps_.reset();
    // As the daemon wires them: a trial's id is kept for it.
    config_.kept_ids = [this](const std::string& id, const std::string& owner) {
      return CheckIdNotKept(*store_, id, owner);
    };
    experiments_ = NewCore(Ports(), config_);
    sweeps_ = NewSweeps(*experiments_, *store_, clock_, random_,
                        {config_.limits, config_.poll_interval_ms});
    ASSERT_TRUE(experiments_->Recover().ok());
  }
  void Poll() {
    clock_.Advance(config_.poll_interval_ms);
    experiments_->Tick();
    sweeps_->Tick();
  }
  void Report(const std::string& id, int64_t step, double loss, const std::string& tag = "loss") {
    ScalarPoint p{tag, step, 1.0, loss};
    ASSERT_TRUE(store_->AppendScalars(id, 1, {&p, 1}, {}).ok());
  }
  // Jobs in Slurm now that have not finished.
  int InSlurm() {
    int n = 0;
    for (const auto& [id, j] : slurm_.jobs) n += !IsFinished(j.state);
    return n;
  }
  SweepView View() { return sweeps_->Get("s").value(); }

  std::unique_ptr<Core> experiments_;
  std::unique_ptr<Sweeps> sweeps_;
};

TEST_F(SweepRunnerTest, AGridStoredBeforeSearchOrderExistedGoesOnInItsListedOrder) {
  ASSERT_TRUE(sweeps_->Submit(Sweep(), "alice").ok());
  // The canonical form as it was stored before search.order: the grid ran in
  // its listed order, and its trials 3 and 4 must keep LR 3 and 4 though a
  // grid with early stopping is now shuffled by default.
  SweepRecord old = View().sweep;
  json spec = json::parse(old.spec_json);
  spec["search"] = {{"type", "grid"}};
  auto today = ParseSweepSpec(spec);
  ASSERT_TRUE(today.ok());
  ASSERT_NE(SweepPoints(*today)[2]["env.LR"], 3) << "this test needs an order that differs";
  old.spec_json = spec.dump();
  Changes c;
  c.sweep = old;
  ASSERT_TRUE(store_->Apply(c).ok());
  Restart();
  slurm_.SetState(100, JobState::kCompleted);
  slurm_.SetState(101, JobState::kCompleted);
  Poll();
  Poll();
  for (int index : {3, 4}) {
    auto trial = experiments_->GetExperiment("s-" + std::to_string(index));
    ASSERT_TRUE(trial.ok()) << index;
    EXPECT_NE(trial->spec_json.find("\"LR\":\"" + std::to_string(index) + "\""), std::string::npos)
        << trial->spec_json;
  }
}

TEST_F(SweepRunnerTest, RunsMaxConcurrentStopsTheWorseAndStartsTheNextAsAJobLeaves) {
  auto created = sweeps_->Submit(Sweep(), "alice");
  ASSERT_TRUE(created.ok()) << created.status().message();
  EXPECT_EQ(created->sweep.trials, 4);
  ASSERT_EQ(slurm_.submitted.size(), 2u) << "max_concurrent trials start at once";
  EXPECT_EQ(slurm_.submitted[0].job_name, "tfx-s-1-a1");
  auto trial1 = experiments_->GetExperiment("s-1");
  ASSERT_TRUE(trial1.ok());
  EXPECT_EQ(trial1->owner, "alice") << "a trial is the sweep's owner's";
  EXPECT_NE(trial1->spec_json.find("\"LR\":\"1\""), std::string::npos) << trial1->spec_json;

  slurm_.SetState(100, JobState::kRunning);
  slurm_.SetState(101, JobState::kRunning);
  Poll();
  Report("s-1", 10, 0.5);
  Report("s-2", 10, 0.9);
  Poll();
  auto stopped = experiments_->Get("s-2");
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->experiment.state, ExperimentState::kCancelled);
  EXPECT_EQ(stopped->attempts.back().end_reason, EndReason::kStoppedEarly);
  EXPECT_EQ(slurm_.cancelled, (std::vector<int64_t>{101})) << "stopped in Slurm too";
  bool event = false;
  for (const EventRecord& e : stopped->events)
    if (e.what == EventCode::kStoppedEarly) {
      event = true;
      EXPECT_NE(e.why.find("loss 0.9 at step 10 is worse than rung 1's cut 0.5"), std::string::npos)
          << e.why;
    }
  EXPECT_TRUE(event) << "the event gives the value against the rung's cut";
  EXPECT_FALSE(IsTerminal(experiments_->GetExperiment("s-1")->state)) << "the better one goes on";
  Poll();
  EXPECT_EQ(slurm_.submitted.size(), 2u) << "s-2's job is still in Slurm: no third trial yet";

  // Points it reported while its programs were being stopped: they are where
  // it stopped, not a value at a rung it was never allowed to reach.
  Report("s-2", 12, 0.85);
  EXPECT_EQ(View().trials[1].trial.last_step, 12) << "while it ends: where it is";
  slurm_.SetState(101, JobState::kCancelled);
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 3u) << "s-2's job has left: trial 3 starts";
  EXPECT_EQ(slurm_.submitted[2].job_name, "tfx-s-3-a1");
  EXPECT_EQ(InSlurm(), 2);

  // A restart of the service: nothing lost, nothing started twice.
  Restart();
  Poll();
  Poll();
  EXPECT_EQ(slurm_.submitted.size(), 3u);
  SweepView v = View();
  ASSERT_EQ(v.trials.size(), 3u);
  EXPECT_EQ(v.trials[1].trial.state, SweepTrialState::kEnded);
  EXPECT_EQ(v.trials[1].trial.end_reason, EndReason::kStoppedEarly);
  EXPECT_NE(v.trials[1].trial.note.find("worse than rung 1's cut 0.5"), std::string::npos);
  EXPECT_EQ(v.trials[1].trial.objective_step, 10) << "judged at its rung";
  EXPECT_EQ(v.trials[1].trial.last_step, 12) << "stopped at the last step it reported";

  // Trial 1 succeeds; 3 and then 4 run to the end.
  slurm_.SetState(100, JobState::kCompleted);
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 4u);
  EXPECT_EQ(InSlurm(), 2);
  Report("s-3", 10, 0.4);
  Report("s-4", 10, 0.45);
  Poll();
  slurm_.SetState(102, JobState::kCompleted);
  slurm_.SetState(103, JobState::kCompleted);
  Poll();
  Poll();
  v = View();
  EXPECT_EQ(v.sweep.state, SweepState::kCompleted) << v.sweep.reason;
  ASSERT_TRUE(v.best_trial);
  EXPECT_EQ(*v.best_trial, 3) << "0.4 is the best objective of the trials that succeeded";
  EXPECT_NE(v.sweep.reason.find("best trial s-3"), std::string::npos) << v.sweep.reason;
  EXPECT_EQ(slurm_.submitted.size(), 4u) << "4 trials, each once";
  auto gauges = experiments_->ReadGauges();
  ASSERT_TRUE(gauges.ok());
  std::map<std::string, int64_t> by_reason(gauges->sweep_trials_by_end_reason.begin(),
                                           gauges->sweep_trials_by_end_reason.end());
  EXPECT_EQ(by_reason["stopped_early"], 1);
  EXPECT_EQ(by_reason["succeeded"], 3);
}

// The issue-48 trial: objective.tag misspelled. The trials report
// held_out_loss; the sweep waits for heldout_loss, which never comes.
TEST_F(SweepRunnerTest, AMisspelledObjectiveIsNamedWithTheTagsReportedAndStopsTheSweep) {
  json spec = Sweep();
  spec["objective"]["tag"] = "heldout_loss";
  ASSERT_TRUE(sweeps_->Submit(spec, "alice").ok());
  slurm_.SetState(100, JobState::kRunning);
  slurm_.SetState(101, JobState::kRunning);
  Poll();
  Report("s-1", 10, 0.5, "held_out_loss");
  Report("s-1", 10, 0.7, "loss");
  Poll();
  SweepRecord sweep = View().sweep;
  EXPECT_EQ(sweep.state, SweepState::kRunning);
  EXPECT_NE(sweep.reason.find("warning: trial s-1 reported held_out_loss, loss but not "
                              "heldout_loss, the sweep's objective (did you mean "
                              "'held_out_loss'?): it cannot be judged or ranked"),
            std::string::npos)
      << sweep.reason;
  // Trial 1 runs to its end without it: no trial could ever be ranked.
  slurm_.SetState(100, JobState::kCompleted);
  Poll();
  sweep = View().sweep;
  EXPECT_EQ(sweep.state, SweepState::kCancelled) << sweep.reason;
  EXPECT_NE(sweep.reason.find("stopped: trial s-1 reported held_out_loss, loss but not "
                              "heldout_loss"),
            std::string::npos)
      << sweep.reason;
  EXPECT_NE(sweep.reason.find("fix objective.tag"), std::string::npos) << sweep.reason;
  EXPECT_EQ(experiments_->GetExperiment("s-2")->state, ExperimentState::kCancelled)
      << "its running trials end with it";
  slurm_.SetState(101, JobState::kCancelled);
  Poll();
  Poll();
  EXPECT_EQ(slurm_.submitted.size(), 2u) << "no more trials start";
}

TEST_F(SweepRunnerTest, ADeletedTrialKeepsItsPlaceAsTheBestAndTheSweepGoesWhole) {
  json spec = Sweep();
  spec["parameters"]["env.LR"]["values"] = {1, 2};
  spec.erase("early_stopping");
  ASSERT_TRUE(sweeps_->Submit(spec, "alice").ok());
  slurm_.SetState(100, JobState::kRunning);
  slurm_.SetState(101, JobState::kRunning);
  Poll();
  Report("s-1", 10, 0.25);
  Report("s-2", 10, 0.5);
  EXPECT_EQ(sweeps_->Delete("s", false).status().code(), StatusCode::kFailedPrecondition)
      << "a running sweep";
  slurm_.SetState(100, JobState::kCompleted);
  slurm_.SetState(101, JobState::kCompleted);
  Poll();
  Poll();
  ASSERT_EQ(View().sweep.state, SweepState::kCompleted) << View().sweep.reason;
  ASSERT_TRUE(experiments_->Delete("s-1", false).ok());
  SweepView v = View();
  ASSERT_TRUE(v.best_trial);
  EXPECT_EQ(*v.best_trial, 1) << "its record says it succeeded with the best value";
  EXPECT_FALSE(v.trials[0].state) << "its experiment is gone";
  auto deleted = sweeps_->Delete("s", true);
  ASSERT_TRUE(deleted.ok()) << deleted.status().message();
  ASSERT_EQ(deleted->experiments.size(), 1u) << "s-1 was deleted already";
  EXPECT_EQ(deleted->experiments[0].id, "s-2");
  EXPECT_EQ(sweeps_->Get("s").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(experiments_->GetExperiment("s-2").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->ListSweepTrials("s")->empty()) << "its trials' rows went with it";
  // The ids are free again.
  ASSERT_TRUE(sweeps_->Submit(spec, "alice").ok());
}

// tfslurmd killed between a trial's intent (its row, its experiment and the
// attempt `submitting`, one transaction) and Slurm's answer: Slurm either
// has the job (adopted by name) or not (submitted now), and either way the
// trial runs once.
TEST_F(SweepRunnerTest, ACrashBetweenATrialsIntentAndSlurmLosesNothingAndRepeatsNothing) {
  for (bool slurm_has_it : {true, false}) {
    SCOPED_TRACE(slurm_has_it ? "Slurm took the job" : "Slurm never saw the job");
    TearDown();
    slurm_ = FakeSlurm();
    SetUp();
    ASSERT_TRUE(sweeps_->Submit(Sweep(), "alice").ok());
    ASSERT_EQ(slurm_.submitted.size(), 2u);
    // As the store stood before Slurm's answer for trial 2 was recorded.
    AttemptRecord intent = store_->ListAttempts("s-2")->at(0);
    intent.state = AttemptState::kSubmitting;
    intent.slurm_job_id = 0;
    Changes c;
    c.attempts.push_back(intent);
    ASSERT_TRUE(store_->Apply(c).ok());
    if (!slurm_has_it) {
      slurm_.jobs.erase(101);
      slurm_.submitted.pop_back();
    }
    Restart();
    Poll();
    Poll();
    int submissions = 0;
    for (const SubmitRequest& r : slurm_.submitted) submissions += r.job_name == "tfx-s-2-a1";
    EXPECT_EQ(submissions, 1) << "trial 2 is in Slurm exactly once";
    auto attempt = store_->ListAttempts("s-2")->at(0);
    EXPECT_NE(attempt.state, AttemptState::kSubmitting);
    EXPECT_GT(attempt.slurm_job_id, 0);
    EXPECT_EQ(View().trials.size(), 2u) << "no trial started twice, none lost";
    EXPECT_EQ(slurm_.submitted.size(), 2u) << "max_concurrent still holds";
  }
}

TEST_F(SweepRunnerTest, ABadSweepIsRefusedWholeAndNothingIsStored) {
  json bad = Sweep();
  bad["max_concurrent"] = 0;
  // The partition's nodes have 4 CPUs: a valid spec, but no node fits it.
  bad["parameters"]["resources.cpus_per_task"] = {{"values", {1, 64}}};
  auto r = sweeps_->Submit(bad, "alice");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  ASSERT_FALSE(r.status().fields().empty());
  EXPECT_EQ(r.status().fields()[0].field, "max_concurrent");
  bad["max_concurrent"] = 2;
  auto trial = sweeps_->Submit(bad, "alice");
  ASSERT_FALSE(trial.ok()) << "a trial with 64 CPUs per task does not fit";
  EXPECT_EQ(trial.status().code(), StatusCode::kInvalidArgument);
  ASSERT_FALSE(trial.status().fields().empty());
  const FieldError& f = trial.status().fields()[0];
  EXPECT_EQ(f.field.rfind("experiment.resources", 0), 0u) << f.field << ": " << f.reason;
  EXPECT_NE(f.reason.find("in trial 2"), std::string::npos) << f.reason;
  EXPECT_TRUE(sweeps_->List("")->empty());
  EXPECT_TRUE(slurm_.submitted.empty());
  EXPECT_EQ(experiments_->GetExperiment("s-1").status().code(), StatusCode::kNotFound);
}

TEST_F(SweepRunnerTest, ATakenTrialIdRefusesTheSweep) {
  json spec = Sweep()["experiment"];
  spec["id"] = "s-3";
  ASSERT_TRUE(experiments_->Submit(spec, "alice", false).ok());
  auto r = sweeps_->Submit(Sweep(), "alice");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(r.status().fields().at(0).field, "id");
  EXPECT_TRUE(sweeps_->List("")->empty());
}

// Issue 41: bob took alice's trial id "s-3" before her trial 3 started,
// and her sweep then showed his experiment's state and reason, never ran its
// trial 3, and her cancel cancelled his experiment.
TEST_F(SweepRunnerTest, ATrialsIdIsKeptForItWhileItsSweepLives) {
  ASSERT_TRUE(sweeps_->Submit(Sweep(), "alice").ok());
  json spec = Sweep()["experiment"];
  spec["id"] = "s-3";
  auto bob = experiments_->Submit(spec, "bob", false);
  ASSERT_FALSE(bob.ok());
  EXPECT_EQ(bob.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(bob.status().message(), "experiment id 's-3' is taken; choose another id")
      << "bob learns only that it is taken, as for any id";
  auto alice = experiments_->Submit(spec, "alice", false);
  ASSERT_FALSE(alice.ok());
  EXPECT_NE(alice.status().message().find("kept for trial 3 of your sweep 's'"), std::string::npos)
      << alice.status().message();
  for (const char* free_id : {"s-5", "s-03", "s-0", "s-x"}) {
    spec["id"] = free_id;
    EXPECT_TRUE(experiments_->Submit(spec, "bob", true).ok()) << free_id << " is no trial's";
  }
}

// The same, had bob's experiment of a trial's id come first anyway (his
// submission racing the sweep's, whose dry run found the id free): the
// trial shows nothing of it and acts on nothing of it.
TEST_F(SweepRunnerTest, ATrialNeverShowsOrActsOnAnotherOwnersExperimentOfItsId) {
  json spec = Sweep()["experiment"];
  spec["id"] = "s-3";
  ASSERT_TRUE(experiments_->Submit(spec, "bob", false).ok());
  slurm_.SetState(100, JobState::kRunning);
  // Alice's sweep, stored as SweepRunner::Submit stores it after its checks.
  auto parsed = ParseSweepSpec(Sweep());
  ASSERT_TRUE(parsed.ok());
  SweepRecord sweep;
  sweep.id = "s";
  sweep.owner = "alice";
  sweep.spec_json = parsed->ToJson().dump();
  sweep.state = SweepState::kRunning;
  sweep.trials = 4;
  sweep.created_at = sweep.updated_at = clock_.NowMs();
  Changes row;
  row.sweep = sweep;
  row.create_sweep = true;
  ASSERT_TRUE(store_->Apply(row).ok());
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 3u) << "bob's job and alice's trials 1 and 2";
  slurm_.SetState(101, JobState::kCompleted);
  slurm_.SetState(102, JobState::kCompleted);
  Poll();
  Poll();
  SweepView v = View();
  ASSERT_GE(v.trials.size(), 3u);
  EXPECT_EQ(v.trials[2].trial.state, SweepTrialState::kNotStarted) << v.trials[2].trial.note;
  EXPECT_FALSE(v.trials[2].state.has_value()) << "bob's experiment's state is not shown";
  EXPECT_EQ(v.trials[2].reason, "") << "nor its reason";

  // Had trial 3 started and its experiment been deleted, its row would name
  // the id as running: bob's experiment is still not the trial's.
  SweepTrialRecord t = v.trials[2].trial;
  t.state = SweepTrialState::kRunning;
  t.note = "";
  Changes running;
  running.sweep_trials.push_back(t);
  ASSERT_TRUE(store_->Apply(running).ok());
  v = View();
  EXPECT_FALSE(v.trials[2].state.has_value()) << "bob's experiment's state is not shown";
  ASSERT_TRUE(sweeps_->Cancel("s", "cancelled by alice").ok());
  EXPECT_FALSE(IsTerminal(store_->GetExperiment("s-3")->state))
      << "alice's cancel does not reach bob's experiment";
  EXPECT_EQ(slurm_.cancelled, (std::vector<int64_t>{103})) << "only alice's trial 4";
  Poll();
  v = View();
  EXPECT_EQ(v.trials[2].trial.state, SweepTrialState::kEnded);
  EXPECT_NE(v.trials[2].trial.note.find("is gone"), std::string::npos) << v.trials[2].trial.note;
}

TEST_F(SweepRunnerTest, CancellingASweepCancelsItsRunningTrialsAndStartsNoMore) {
  ASSERT_TRUE(sweeps_->Submit(Sweep(), "alice").ok());
  ASSERT_TRUE(sweeps_->Cancel("s", "cancelled by alice").ok());
  EXPECT_EQ(experiments_->GetExperiment("s-1")->state, ExperimentState::kCancelled);
  EXPECT_EQ(experiments_->GetExperiment("s-2")->state, ExperimentState::kCancelled);
  EXPECT_EQ(slurm_.cancelled.size(), 2u);
  slurm_.SetState(100, JobState::kCancelled);
  slurm_.SetState(101, JobState::kCancelled);
  Poll();
  Poll();
  EXPECT_EQ(slurm_.submitted.size(), 2u) << "no trial starts after the cancel";
  SweepView v = View();
  EXPECT_EQ(v.sweep.state, SweepState::kCancelled);
  EXPECT_EQ(v.trials.at(0).trial.state, SweepTrialState::kEnded);
  EXPECT_EQ(v.trials.at(0).trial.end_reason, EndReason::kCancelled);
  EXPECT_EQ(sweeps_->Cancel("s", "again").code(), StatusCode::kFailedPrecondition);
}

TEST_F(SweepRunnerTest, TheNodeHoursCapEndsTheSweep) {
  json capped = Sweep();
  capped["max_node_hours"] = 1;
  capped["early_stopping"] = {{"rule", "none"}};
  ASSERT_TRUE(sweeps_->Submit(capped, "alice").ok());
  slurm_.SetState(100, JobState::kRunning);
  slurm_.SetState(101, JobState::kRunning);
  Poll();
  clock_.Advance(31 * 60 * 1000);  // two one-node trials for 31 minutes: past 1 node-hour
  Poll();
  SweepView v = View();
  EXPECT_EQ(v.sweep.state, SweepState::kCompleted);
  EXPECT_NE(v.sweep.reason.find("node-hours cap"), std::string::npos) << v.sweep.reason;
  EXPECT_EQ(experiments_->GetExperiment("s-1")->state, ExperimentState::kCancelled);
  EXPECT_EQ(slurm_.submitted.size(), 2u);
}

}  // namespace
}  // namespace tfslurm::sweeps
