#include "service/core/core.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/sha256.h"
#include "base/unsafe_text.h"
#include "schema/tf_config_wire.h"
#include "service/store/sqlite_store.h"
#include "tests/unit/core_test.h"

namespace tfslurm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::FakeSlurm;
using testing::RecordingChannel;

json PsSpec(const std::string& id) {
  return {{"id", id},
          {"command", {"python3", "train.py"}},
          {"cluster", {{"ps", 2}, {"worker", 4}}},
          {"resources", {{"partition", "debug"}, {"nodes", 3}, {"tasks_per_node", 2}}},
          {"restart",
           {{"max_restarts", 1},
            {"on", {"retryable_exit"}},
            {"backoff_s", 5},
            {"in_allocation", false},
            // A killed worker restarts the attempt here; LoneRestartTest turns
            // lone restarts on.
            {"max_task_restarts", 0}}}};
}

class ExperimentsTest : public testing::CoreTest {
 protected:
  ExperimentsTest() : CoreTest("experiments-test") {}
  void SetUp() override {
    CoreTest::SetUp();
    config_.poll_interval_ms = 1000;
    config_.barrier_timeout_ms = 60000;
    config_.shutdown_grace_ms = 2000;
    config_.reap_timeout_margin_ms = 1000;
    Restart();
  }
  void TearDown() override {
    experiments_.reset();
    CoreTest::TearDown();
  }
  // A new service process on the same database (and the same Slurm).
  void Restart() { experiments_ = NewCore(Ports(), config_, metrics_); }

  void Poll() {
    clock_.Advance(config_.poll_interval_ms);
    experiments_->Tick();
  }

  TaskRef Ref(const std::string& id, int proc, int attempt = 1) {
    return {id, attempt, FakeSlurm::SecretOf(slurm_.submitted.at(attempt - 1 + attempt_offset_)),
            ProcId(proc)};
  }

  // Every task's agent heartbeats, as agents do while their programs run:
  // a task silent past the reconnect window is gone (docs/restarts.md,
  // "Network faults"), so tests that move the clock far say the agents are
  // there.
  void BeatAll(const std::string& id, int attempt = 1) {
    for (int p = 0; p < 6; ++p) (void)experiments_->OnHeartbeat(Ref(id, p, attempt));
  }

  // Registers every task of the job, each agent `started_after_launch_ms`
  // after its step's launch when given; returns their channels.
  std::vector<std::shared_ptr<RecordingChannel>> RegisterAll(
      const std::string& id, int attempt = 1,
      std::optional<int64_t> started_after_launch_ms = std::nullopt) {
    std::vector<std::shared_ptr<RecordingChannel>> channels;
    for (int p = 0; p < 6; ++p) {
      auto ch = std::make_shared<RecordingChannel>();
      RegisterInfo info;
      info.node_name = "node" + std::to_string(p / 2 + 1);
      info.address = "host" + std::to_string(p / 2 + 1);
      info.port = 5000 + p;
      info.local_id = p % 2;
      info.started_after_launch_ms = started_after_launch_ms;
      experiments_->OnRegister(Ref(id, p, attempt), info, ch);
      channels.push_back(ch);
    }
    return channels;
  }

  ExperimentView View(const std::string& id) { return experiments_->Get(id).value(); }

  // Submits `spec` as alice and has Slurm start its job (100, the first).
  void SubmitRunning(const json& spec) {
    ASSERT_TRUE(experiments_->Submit(spec, "alice", false).ok());
    slurm_.SetState(100, JobState::kRunning);
    Poll();
  }

  // Submits experiment `id` (PsSpec, Slurm job 100) and ends its attempt 1
  // with a retryable exit (137), so the next Tick after the backoff restarts it.
  void SubmitAndFailRetryably(const std::string& id) {
    ASSERT_TRUE(experiments_->Submit(PsSpec(id), "alice", false).ok());
    slurm_.SetState(100, JobState::kFailed, 137);
    Poll();
    ASSERT_EQ(View(id).experiment.state, ExperimentState::kRestarting);
  }

  Metrics* metrics_ = nullptr;  // a test that counts sets it before Restart()
  std::unique_ptr<Core> experiments_;
  int attempt_offset_ = 0;
};

TEST_F(ExperimentsTest, SubmitStoresAndSubmitsWithComputedMemory) {
  auto r = experiments_->Submit(PsSpec("a"), "alice", false);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(slurm_.submitted.size(), 1u);
  EXPECT_EQ(slurm_.submitted[0].job_name, "tfx-a-a1");
  EXPECT_EQ(slurm_.submitted[0].mem_per_cpu_mb, 2000);
  EXPECT_EQ(r->attempt.slurm_job_id, 100);
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kQueued);
  EXPECT_EQ(v.experiment.mem_per_task_mb, 2000);
  EXPECT_EQ(v.attempts.at(0).slurm_job_id, 100);
  EXPECT_EQ(v.tasks.size(), 6u);
  EXPECT_TRUE(files_.Created((dir_ / "out" / "a" / "logs" / "attempt-1").string()));
  EXPECT_TRUE(files_.Created(v.experiment.model_dir));
  // The secret is not stored, only its hash.
  EXPECT_EQ(v.attempts[0].secret_sha256, Sha256Hex(FakeSlurm::SecretOf(slurm_.submitted[0])));
}

TEST_F(ExperimentsTest, AQueuedExperimentSaysWhySlurmKeepsItWaiting) {
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  slurm_.SetState(100, JobState::kPending);
  slurm_.jobs[100].reason = "Resources";
  Poll();
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kQueued);
  EXPECT_EQ(View("a").experiment.reason, "pending in Slurm as job 100: Resources");
  slurm_.jobs[100].reason = "Priority";
  Poll();
  EXPECT_EQ(View("a").experiment.reason, "pending in Slurm as job 100: Priority")
      << "follows Slurm's reason as it changes";
  slurm_.SetState(100, JobState::kRunning);
  Poll();
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kStarting);
  EXPECT_EQ(View("a").experiment.reason.find("pending"), std::string::npos)
      << View("a").experiment.reason;
}

TEST_F(ExperimentsTest, SubmitRefusesAWorkdirTheOwnerCannotEnterNamingIt) {
  files_.missing_workdirs.insert("/home/alice/nope");
  json spec = PsSpec("a");
  spec["workdir"] = "/home/alice/nope";
  auto r = experiments_->Submit(spec, "alice", false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(r.status().fields().size(), 1u);
  EXPECT_EQ(r.status().fields()[0].field, "workdir");
  EXPECT_NE(r.status().fields()[0].reason.find("/home/alice/nope"), std::string::npos)
      << r.status().fields()[0].reason;
  EXPECT_NE(r.status().message().find("No such file or directory"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(slurm_.submitted.empty()) << "nothing submitted with an unusable workdir";
  EXPECT_FALSE(store_->GetExperiment("a").ok()) << "nothing stored";

  spec["workdir"] = "/home/alice/project";
  EXPECT_TRUE(experiments_->Submit(spec, "alice", false).ok()) << "an existing one is taken";
}

TEST_F(ExperimentsTest, TheJobAndItsDirectoriesAreTheOwnersAccount) {
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  ASSERT_TRUE(experiments_->Submit(PsSpec("b"), "bob", false).ok());
  auto alice = accounts_.ForOwner("alice");
  auto bob = accounts_.ForOwner("bob");
  ASSERT_NE(alice->uid, bob->uid);
  ASSERT_EQ(slurm_.submitted.size(), 2u);
  EXPECT_EQ(slurm_.submitted[0].user_id, alice->uid);
  EXPECT_EQ(slurm_.submitted[0].group_id, alice->gid);
  EXPECT_EQ(slurm_.submitted[1].user_id, bob->uid);
  EXPECT_EQ(files_.created_as.at((dir_ / "out" / "a").string()), "alice");
  EXPECT_EQ(files_.created_as.at((dir_ / "out" / "a" / "logs" / "attempt-1").string()), "alice");
  EXPECT_EQ(files_.created_as.at(View("b").experiment.model_dir), "bob");
}

TEST_F(ExperimentsTest, AnOwnerWithNoAccountIsRefusedAndNothingIsStoredOrSubmitted) {
  accounts_.refused.insert("ghost");
  auto r = experiments_->Submit(PsSpec("a"), "ghost", false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(r.status().message(), "no account ghost");
  EXPECT_TRUE(slurm_.submitted.empty());
  EXPECT_EQ(*store_->CountExperiments({}), 0);
  EXPECT_TRUE(files_.created.empty());
}

TEST_F(ExperimentsTest, InvalidOrTooLargeSpecsStoreAndSubmitNothing) {
  json bad = PsSpec("b");
  bad["resources"]["nodes"] = "three";
  auto r = experiments_->Submit(bad, "alice", false);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  json big = PsSpec("c");
  big["resources"]["mem_per_task_mb"] = 6000;
  auto r2 = experiments_->Submit(big, "alice", false);
  ASSERT_EQ(r2.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r2.status().fields().at(0).field, "resources.mem_per_task_mb");
  EXPECT_TRUE(slurm_.submitted.empty());
  EXPECT_EQ(*store_->CountExperiments({}), 0);
}

TEST_F(ExperimentsTest, DuplicateIdIsConflictWithResumeHint) {
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  auto r = experiments_->Submit(PsSpec("a"), "alice", false);
  EXPECT_EQ(r.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(r.status().message().find("/experiments/a/resume"), std::string::npos);
  EXPECT_EQ(slurm_.submitted.size(), 1u);
}

TEST_F(ExperimentsTest, AnotherOwnersIdIsConflictSayingOnlyThatItIsTaken) {
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  auto r = experiments_->Submit(PsSpec("a"), "bob", false);
  ASSERT_EQ(r.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(r.status().message(), "experiment id 'a' is taken; choose another id")
      << "neither alice's state nor how to resume her experiment";
  EXPECT_EQ(r.status().message().find("state"), std::string::npos);
  EXPECT_EQ(slurm_.submitted.size(), 1u);
}

TEST_F(ExperimentsTest, RefusedSubmissionLeavesNothing) {
  slurm_.refuse_submit = Unavailable("slurmctld down");
  auto r = experiments_->Submit(PsSpec("a"), "alice", false);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store_->GetExperiment("a").status().code(), StatusCode::kNotFound);
}

TEST_F(ExperimentsTest, ADirectoryThatCannotBeMadeStoresAndSubmitsNothing) {
  files_.refuse_create = Unavailable("cannot create /out/a: No space left on device");
  auto r = experiments_->Submit(PsSpec("a"), "alice", false);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("No space left"), std::string::npos);
  EXPECT_TRUE(slurm_.submitted.empty());
  EXPECT_EQ(store_->GetExperiment("a").status().code(), StatusCode::kNotFound);
}

TEST_F(ExperimentsTest, ARestartWhoseDirectoryCannotBeMadeIsRetriedLater) {
  SubmitAndFailRetryably("a");
  files_.refuse_create = Unavailable("cannot create the log directory: disk full");
  clock_.Advance(5000);
  Poll();
  EXPECT_EQ(slurm_.submitted.size(), 1u) << "nothing is submitted without its directories";
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kRestarting);
  files_.refuse_create = Status::Ok();
  clock_.Advance(config_.submit_retry_max_ms);
  Poll();
  EXPECT_EQ(slurm_.submitted.size(), 2u);
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kQueued);
}

TEST_F(ExperimentsTest, DryRunRendersWithoutStoringOrSubmitting) {
  auto r = experiments_->Submit(PsSpec("a"), "alice", true);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->attempt.sbatch_script.find("#SBATCH --mem-per-cpu=2000"), std::string::npos);
  EXPECT_TRUE(slurm_.submitted.empty());
  EXPECT_EQ(*store_->CountExperiments({}), 0);
}

// Issue 49, point 3: a TensorFlow cluster whose TF_CONFIG no program can
// be started with (Linux's MAX_ARG_STRLEN) goes through a file, and the
// barrier's event says so.
TEST_F(ExperimentsTest, ATfConfigTooLongForLinuxIsSaidAtTheBarrier) {
  for (auto& node : slurm_.partition.nodes) {
    node.cpus = 200;
    node.real_memory_mb = 200 * 100;
  }
  json spec = PsSpec("big");
  spec["cluster"] = {{"ps", 10}, {"worker", 590}};
  spec["resources"]["tasks_per_node"] = 200;
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(spec));
  // 600 addresses of 230 bytes: a cluster of 140 KB.
  const std::string host(226, 'h');
  std::vector<std::shared_ptr<RecordingChannel>> channels;
  for (int p = 0; p < 600; ++p) {
    RegisterInfo info;
    info.node_name = "node" + std::to_string(p / 200 + 1);
    info.address = host;
    info.port = 1000 + p;
    info.local_id = p % 200;
    channels.push_back(std::make_shared<RecordingChannel>());
    experiments_->OnRegister(Ref("big", p), info, channels.back());
  }
  ASSERT_EQ(channels[0]->All<AssignmentMsg>().size(), 1u);
  std::string assigned;
  for (const EventRecord& e : View("big").events)
    if (e.what == EventCode::kAssigned) assigned = e.why;
  EXPECT_NE(assigned.find("; TF_CONFIG is 1"), std::string::npos) << assigned;
  EXPECT_NE(assigned.find("more than Linux passes to a program in one environment variable "
                          "(131061 bytes)"),
            std::string::npos)
      << assigned;
  EXPECT_NE(assigned.find("TFSLURM_TF_CONFIG_FILE"), std::string::npos) << assigned;
}

TEST_F(ExperimentsTest, RendezvousSuccessAndReaping) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kStarting);

  auto ch = RegisterAll("a");
  for (int p = 0; p < 6; ++p) {
    auto a = ch[p]->All<AssignmentMsg>();
    ASSERT_EQ(a.size(), 1u) << "task " << p;
    ASSERT_TRUE(a[0].cluster) << "task " << p;
    auto tf = json::parse(a[0].cluster->json);
    EXPECT_EQ(a[0].cluster, ch[0]->All<AssignmentMsg>()[0].cluster) << "one cluster per attempt";
    EXPECT_EQ(wire::InflateCluster(a[0].cluster->zlib), a[0].cluster->json);
    EXPECT_EQ(tf["ps"], json({"host1:5000", "host2:5002"}));
    EXPECT_EQ(tf["worker"], json({"host1:5001", "host2:5003", "host3:5004", "host3:5005"}));
    EXPECT_EQ(a[0].command, (std::vector<std::string>{"python3", "train.py"}));
    EXPECT_EQ(a[0].env.at("MODEL_DIR"), (dir_ / "out" / "a").string());
    EXPECT_EQ(a[0].report_checkpoints, p == 1);  // worker 0 checkpoints
  }
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kRunning);

  // Workers finish; the ps are told to shut down.
  for (int p : {1, 3, 4, 5})
    ASSERT_TRUE(experiments_->OnExited(Ref("a", p), 0, std::nullopt, false).ok());
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kSucceeded);
  for (int p : {0, 2}) EXPECT_EQ(ch[p]->All<ShutdownMsg>().size(), 1u);
  EXPECT_TRUE(ch[1]->All<ShutdownMsg>().empty());
  for (int p : {0, 2})
    ASSERT_TRUE(experiments_->OnExited(Ref("a", p), std::nullopt, 15, true).ok());
  auto v = View("a");
  EXPECT_EQ(v.tasks[0].state, TaskState::kReaped);
  EXPECT_EQ(v.tasks[1].state, TaskState::kSucceeded);

  slurm_.SetState(100, JobState::kCompleted);
  Poll();
  v = View("a");
  EXPECT_EQ(v.attempts[0].state, AttemptState::kEnded);
  EXPECT_EQ(v.attempts[0].slurm_state, "COMPLETED");
  EXPECT_TRUE(slurm_.signalled_steps.empty()) << "every reaped task confirmed";
}

// Issue 41: a stranger's guesses learned which experiments exist, which
// had ended and which attempt was current. Without the attempt's secret,
// every message gets the answer of an experiment that does not exist.
TEST_F(ExperimentsTest, WithoutTheSecretEveryRefusalIsThatOfAMissingExperiment) {
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  const std::string secret1 = Ref("a", 0).secret;
  auto refusal = [&](const TaskRef& ref) {
    auto ch = std::make_shared<RecordingChannel>();
    experiments_->OnRegister(ref, {}, ch);
    auto refused = ch->All<RefusedMsg>();
    EXPECT_EQ(refused.size(), 1u);
    Status beat = experiments_->OnHeartbeat(ref);
    return std::make_tuple(refused.empty() ? RefusedMsg{} : refused[0], beat.code(),
                           beat.message());
  };
  auto missing = [&](const std::string& id, int attempt) {
    const std::string reason =
        "no experiment '" + id + "' with attempt " + std::to_string(attempt) + " and this secret";
    return std::make_tuple(RefusedMsg{reason, true, true}, StatusCode::kNotFound, reason);
  };
  auto expect_missing = [&](const TaskRef& ref, const std::string& what) {
    auto [refused, code, message] = refusal(ref);
    auto [want_refused, want_code, want_message] = missing(ref.experiment_id, ref.attempt);
    EXPECT_EQ(refused.reason, want_refused.reason) << what;
    EXPECT_EQ(refused.permanent, want_refused.permanent) << what;
    EXPECT_EQ(refused.unknown_experiment, want_refused.unknown_experiment) << what;
    EXPECT_EQ(code, want_code) << what;
    EXPECT_EQ(message, want_message) << what;
  };
  expect_missing({"nope", 1, secret1, ProcId(0)}, "a missing experiment");
  expect_missing({"a", 1, "guess", ProcId(0)}, "a wrong secret");
  expect_missing({"a", 2, secret1, ProcId(0)},
                 "an attempt that never was, with attempt 1's secret");
  expect_missing({"a", 7, "guess", ProcId(0)}, "a wrong attempt and secret");

  slurm_.SetState(100, JobState::kFailed, 1);
  Poll();
  ASSERT_EQ(View("a").experiment.state, ExperimentState::kFailed);
  expect_missing({"a", 1, "guess", ProcId(0)}, "an ended experiment, a wrong secret");
  // The holder of the secret is told how things are.
  EXPECT_NE(std::get<2>(refusal({"a", 1, secret1, ProcId(0)})).find("has ended (failed)"),
            std::string::npos);

  ASSERT_TRUE(experiments_->Resume("a").ok());
  expect_missing({"a", 1, "guess", ProcId(0)}, "an attempt not current, a wrong secret");
  expect_missing({"a", 2, secret1, ProcId(0)}, "attempt 2 with attempt 1's secret");
  EXPECT_NE(std::get<2>(refusal({"a", 1, secret1, ProcId(0)})).find("not current (current: 2)"),
            std::string::npos);
}

TEST_F(ExperimentsTest, BarrierTimeoutNamesMissingTasksAndCancels) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  for (int p = 0; p < 5; ++p) {
    RegisterInfo info{0, 0, 0, "node1", "h", 1, false};
    experiments_->OnRegister(Ref("a", p), info, std::make_shared<RecordingChannel>());
  }
  clock_.Advance(config_.barrier_timeout_ms);
  Poll();
  EXPECT_EQ(slurm_.cancelled, (std::vector<int64_t>{100}));
  slurm_.SetState(100, JobState::kCancelled);
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed);
  EXPECT_NE(v.experiment.reason.find("barrier timeout"), std::string::npos) << v.experiment.reason;
  EXPECT_NE(v.experiment.reason.find("worker:3 (task 5 on node3)"), std::string::npos)
      << v.experiment.reason;
  EXPECT_NE(v.experiment.reason.find("start_failed"), std::string::npos) << v.experiment.reason;
}

TEST_F(ExperimentsTest, UnconfirmedReapEndsTheStepThroughSlurm) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  for (int p : {1, 3, 4, 5})
    EXPECT_TRUE(experiments_->OnExited(Ref("a", p), 0, std::nullopt, false).ok());
  Poll();
  EXPECT_TRUE(slurm_.signalled_steps.empty());
  clock_.Advance(config_.shutdown_grace_ms + config_.reap_timeout_margin_ms);
  Poll();
  EXPECT_EQ(slurm_.signalled_steps, (std::vector<int64_t>{100}));
  // The step's end ends the ps without a word from their agents.
  slurm_.SetState(100, JobState::kCompleted);
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kSucceeded) << v.experiment.reason;
  for (int p : {0, 2}) EXPECT_EQ(v.tasks[p].state, TaskState::kReaped) << "task " << p;
}

TEST_F(ExperimentsTest, ATaskNobodyReapedThatEndsWithTheJobIsLost) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  slurm_.SetState(100, JobState::kNodeFail);
  Poll();
  auto v = View("a");
  ASSERT_EQ(v.attempts.size(), 1u);
  ASSERT_FALSE(v.tasks.empty());
  for (const TaskView& t : v.tasks)
    EXPECT_EQ(t.state, TaskState::kLost) << "task " << t.proc_id.value();
}

TEST_F(ExperimentsTest, WorkerFailureFailsFastAndRestartsWhenRetryable) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  EXPECT_TRUE(experiments_->OnExited(Ref("a", 3), 137, std::nullopt, false).ok());
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kRunning) << "decided when the job has ended";
  EXPECT_NE(v.experiment.reason.find("ending its Slurm job"), std::string::npos)
      << v.experiment.reason;
  slurm_.SetState(100, JobState::kFailed, 137);
  Poll();
  v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kRestarting) << v.experiment.reason;
  EXPECT_EQ(slurm_.submitted.size(), 1u) << "backoff first";
  clock_.Advance(5000);
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 2u);
  EXPECT_EQ(slurm_.submitted[1].job_name, "tfx-a-a2");
  v = View("a");
  EXPECT_EQ(v.experiment.current_attempt, 2);
  EXPECT_EQ(v.experiment.state, ExperimentState::kQueued);

  // Attempt 2 fails the same way: max_restarts (1) reached.
  slurm_.SetState(101, JobState::kRunning);
  Poll();
  RegisterAll("a", 2);
  EXPECT_TRUE(experiments_->OnExited(Ref("a", 3, 2), 137, std::nullopt, false).ok());
  slurm_.SetState(101, JobState::kFailed, 137);
  Poll();
  v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed);
  EXPECT_NE(v.experiment.reason.find("max_restarts 1 reached"), std::string::npos)
      << v.experiment.reason;
}

TEST_F(ExperimentsTest, PermanentExitIsNotRestarted) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  EXPECT_TRUE(experiments_->OnExited(Ref("a", 3), 1, std::nullopt, false).ok());
  slurm_.SetState(100, JobState::kFailed, 1);
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed);
  EXPECT_NE(v.experiment.reason.find("exited with code 1"), std::string::npos)
      << v.experiment.reason;
}

TEST_F(ExperimentsTest, TheAgentsDetailReachesTheTaskTheAttemptTheEventAndTheReason) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  // As a task could send it: control characters and far too long.
  std::string detail =
      "cannot run 'trian.py': No such file or directory\n\x1b[31m" + std::string(2000, 'x');
  EXPECT_TRUE(experiments_->OnExited(Ref("a", 3), 127, std::nullopt, false, detail).ok());
  slurm_.SetState(100, JobState::kFailed, 127);
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed);
  const std::string cause =
      "exited with code 127: cannot run 'trian.py': No such file or directory";
  EXPECT_NE(v.experiment.reason.find(cause), std::string::npos) << v.experiment.reason;
  EXPECT_NE(v.attempts[0].reason.find(cause), std::string::npos) << v.attempts[0].reason;
  const std::string& kept = v.tasks[3].detail;
  EXPECT_EQ(kept.rfind("cannot run 'trian.py': No such file or directory [31mxxx", 0), 0u)
      << "control characters become one space: " << kept;
  EXPECT_EQ(kept.size(), 303u) << "300 bytes and \"...\"";
  EXPECT_EQ(kept.substr(300), "...");
  EXPECT_TRUE(std::any_of(v.events.begin(), v.events.end(), [&](const EventRecord& e) {
    return e.what == EventCode::kExited && e.why.find(cause) != std::string::npos;
  })) << "the exited event carries the cause";
}

// Issue 41: a detail of 500 spaces and a made-up row showed as a row of its
// own on the admin's one line; bytes that are not UTF-8 must not reach the
// store, the JSON or a terminal as they are.
TEST_F(ExperimentsTest, AnAgentsDetailCannotPadALineOrCarryBytesThatAreNotUtf8) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  std::string detail =
      "Error: bad \xff\xfe input" + std::string(500, ' ') + "worker-0\u2028succeeded\u200b\u00a0ok";
  EXPECT_TRUE(experiments_->OnExited(Ref("a", 3), 1, std::nullopt, false, detail).ok());
  const std::string kept = View("a").tasks[3].detail;
  EXPECT_EQ(kept, "Error: bad \\xff\\xfe input worker-0 succeeded \u00a0ok") << kept;
  EXPECT_FALSE(UnsafeCharacter(kept).has_value()) << *UnsafeCharacter(kept);
}

TEST_F(ExperimentsTest, AStartupErrorIsNotRestartedUnlessRestartOnNamesIt) {
  const ExitReport missing_module{1, std::nullopt, false,
                                  "ModuleNotFoundError: No module named 'tensorflowx'", true};
  // restart.on is retryable_exit: the failure ends the experiment, and says so.
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 3), missing_module).ok());
  slurm_.SetState(100, JobState::kFailed, 1);
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.attempts.at(0).end_reason, EndReason::kStartupError);
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed);
  EXPECT_NE(v.experiment.reason.find("startup_error is not in restart.on"), std::string::npos)
      << v.experiment.reason;
  EXPECT_TRUE(v.tasks[3].startup_error) << "kept with the task";
}

TEST_F(ExperimentsTest, AStartupErrorIsRestartedWhenRestartOnNamesIt) {
  // A module on a file system not mounted yet on one node, say.
  json spec = PsSpec("b");
  spec["restart"]["on"] = {"startup_error"};
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(spec));
  RegisterAll("b");
  ASSERT_TRUE(
      experiments_
          ->OnExited(Ref("b", 3), ExitReport{1, std::nullopt, false,
                                             "ModuleNotFoundError: No module named 'x'", true})
          .ok());
  slurm_.SetState(100, JobState::kFailed, 1);
  Poll();
  auto v = View("b");
  EXPECT_EQ(v.attempts.at(0).end_reason, EndReason::kStartupError);
  EXPECT_EQ(v.experiment.state, ExperimentState::kRestarting) << v.experiment.reason;
}

TEST_F(ExperimentsTest, AStartupErrorAfterTheFirstStepIsAPermanentExit) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  ASSERT_TRUE(experiments_->OnProgress(Ref("a", 2), 100, "/out/a/model.ckpt-100").ok());
  ASSERT_TRUE(
      experiments_
          ->OnExited(Ref("a", 3), ExitReport{1, std::nullopt, false, "ImportError: x", true})
          .ok());
  slurm_.SetState(100, JobState::kFailed, 1);
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.attempts.at(0).end_reason, EndReason::kPermanentExit);
  EXPECT_FALSE(v.tasks[3].startup_error);
}

TEST_F(ExperimentsTest, AStartupErrorIsJudgedTheSameByARestartedService) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  ASSERT_TRUE(experiments_
                  ->OnExited(Ref("a", 3), ExitReport{127, std::nullopt, false,
                                                     "cannot run 'trian.py': No such file", true})
                  .ok());
  Restart();  // before the job's end was seen
  ASSERT_TRUE(experiments_->Recover().ok());
  slurm_.SetState(100, JobState::kFailed, 127);
  Poll();
  EXPECT_EQ(View("a").attempts.at(0).end_reason, EndReason::kStartupError);
}

// Two workers whose program is not there: the first exit fails the attempt
// and the others are told to shut down, but the second worker's report of
// its own exit 127 was already on its way. That task failed on its own; it
// is not "reaped", and shows its exit. The ps, stopped by the Shutdown, are.
TEST_F(ExperimentsTest, ATaskThatEndedOnItsOwnBeforeItsShutdownKeepsItsExit) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  auto ch = RegisterAll("a");
  const std::string detail = "cannot run 'trian.py': No such file or directory";
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 3), 127, std::nullopt, false, detail).ok());
  ASSERT_EQ(ch[4]->All<ShutdownMsg>().size(), 1u) << "the other tasks are told to shut down";
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 4), 127, std::nullopt, false, detail).ok());
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 0), std::nullopt, 15, true).ok());
  auto v = View("a");
  EXPECT_EQ(v.tasks[4].state, TaskState::kFailed) << "its agent said it was not reaped";
  EXPECT_EQ(v.tasks[4].exit_code, 127);
  EXPECT_EQ(v.tasks[4].detail, detail);
  EXPECT_EQ(v.tasks[0].state, TaskState::kReaped) << "the ps ended by the Shutdown";
  EXPECT_TRUE(std::any_of(v.events.begin(), v.events.end(), [&](const EventRecord& e) {
    return e.what == EventCode::kExited && e.why.find("(task 4") != std::string::npos &&
           e.why.find("exited with code 127") != std::string::npos;
  })) << "an exited event, not a reaped one, for the second worker";
}

// The job ended OUT_OF_MEMORY with no task's report (the kill took the
// agents with the step): the reason names the memory and the field to raise.
TEST_F(ExperimentsTest, SlurmsOutOfMemoryNamesTheMemoryAndTheFieldToRaise) {
  json spec = PsSpec("a");
  spec["resources"]["mem_per_task_mb"] = 1500;
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(spec));
  slurm_.SetState(100, JobState::kOutOfMemory);
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed);
  EXPECT_NE(v.experiment.reason.find(
                "Slurm job 100 OUT_OF_MEMORY: out of memory (1500 MB per task); raise "
                "resources.mem_per_task_mb"),
            std::string::npos)
      << v.experiment.reason;
}

// Found by bench/soak.py: kill -9 of a ps's agent (its program goes with
// it) is followed by a worker's exit 1 on the refused connection; the
// attempt must be restarted, as the cause was.
TEST_F(ExperimentsTest, AnExit1AfterAnotherAgentsStreamEndedIsRestarted) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  auto channels = RegisterAll("a");
  experiments_->OnDisconnect(Ref("a", 2), channels[2].get());  // ps:1's agent is gone
  EXPECT_TRUE(experiments_->OnExited(Ref("a", 3), 1, std::nullopt, false).ok());
  slurm_.SetState(100, JobState::kFailed, 1);
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kRestarting) << v.experiment.reason;
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kRetryableExit);
  EXPECT_NE(v.attempts[0].reason.find("after the agent of ps:1 (task 2 on node2) had vanished"),
            std::string::npos)
      << v.attempts[0].reason;
}

// The same, with tfslurmd restarted in between: the soak killed a ps's agent
// and then tfslurmd; the restarted service knew nothing of the first.
TEST_F(ExperimentsTest, AnAgentNotBackSinceARestartCountsAsVanished) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  for (int p : {0, 1, 3, 4, 5}) {  // all but ps:1 (task 2) reconnect
    RegisterInfo info;
    info.node_name = "node" + std::to_string(p / 2 + 1);
    info.address = "host" + std::to_string(p / 2 + 1);
    info.port = 5000 + p;
    info.reconnect = true;
    experiments_->OnRegister(Ref("a", p), info, std::make_shared<RecordingChannel>());
  }
  EXPECT_TRUE(experiments_->OnExited(Ref("a", 3), 1, std::nullopt, false).ok());
  slurm_.SetState(100, JobState::kFailed, 1);
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kRestarting) << v.experiment.reason;
  EXPECT_NE(v.attempts[0].reason.find("ps:1 (task 2 on node2) had vanished"), std::string::npos)
      << v.attempts[0].reason;
}

TEST_F(ExperimentsTest, AnExit1WithEveryAgentBackAfterARestartIsNotRestarted) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  RegisterAll("a");
  EXPECT_TRUE(experiments_->OnExited(Ref("a", 3), 1, std::nullopt, false).ok());
  slurm_.SetState(100, JobState::kFailed, 1);
  Poll();
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kFailed);
}

TEST_F(ExperimentsTest, SigtermFromPreemptionIsClassifiedByTheJobState) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  // Slurm's SIGTERM reaches the tasks before the job shows PREEMPTED.
  EXPECT_TRUE(experiments_->OnExited(Ref("a", 3), 143, std::nullopt, false).ok());
  slurm_.SetState(100, JobState::kPreempted);
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kPreempted);
  // preempted is not in this spec's restart.on.
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed) << v.experiment.reason;
  EXPECT_NE(v.experiment.reason.find("preempted is not in restart.on"), std::string::npos)
      << v.experiment.reason;
}

TEST_F(ExperimentsTest, JobStateWithoutAgentsDecides) {
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  slurm_.SetState(100, JobState::kFailed, 1);
  Poll();
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kFailed);
}

TEST_F(ExperimentsTest, CancelKillsTheJob) {
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  ASSERT_TRUE(experiments_->Cancel("a", "cancelled by the user").ok());
  EXPECT_EQ(slurm_.cancelled, (std::vector<int64_t>{100}));
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kCancelled);
  slurm_.SetState(100, JobState::kCancelled);
  Poll();
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kCancelled);
  EXPECT_EQ(experiments_->Cancel("a", "again").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(experiments_->Cancel("nope", "x").code(), StatusCode::kNotFound);
}

TEST_F(ExperimentsTest, ACancelStopsTheProgramsThroughTheirAgentsAtOnce) {
  // Slurm's cancel reaches the programs only once slurmctld has had every
  // node's slurmd signal its steps; the agents are a message away.
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  auto ch = RegisterAll("a");
  ASSERT_TRUE(
      experiments_
          ->CancelOwnedBy("a", "alice", "stopped early by sweep s: worse", EndReason::kStoppedEarly)
          .ok());
  for (int p = 0; p < 6; ++p) {
    auto shutdowns = ch[p]->All<ShutdownMsg>();
    ASSERT_EQ(shutdowns.size(), 1u) << "task " << p << " is told to stop with the cancel";
    EXPECT_EQ(shutdowns[0].reason, "stopped early by sweep s: worse");
  }
  EXPECT_EQ(slurm_.cancelled, (std::vector<int64_t>{100})) << "and the job is cancelled too";
  auto v = View("a");
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kStoppedEarly);
  bool reaping = false;
  for (const EventRecord& e : v.events) reaping |= e.what == EventCode::kReaping;
  EXPECT_TRUE(reaping);
}

TEST_F(ExperimentsTest, TasksEndingAfterACancelAreReapedNotFailed) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  ASSERT_TRUE(experiments_->Cancel("a", "cancelled by alice").ok());
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 1), 143, std::nullopt, false).ok());
  auto v = View("a");
  EXPECT_EQ(v.tasks[1].state, TaskState::kReaped);
  EXPECT_EQ(v.experiment.state, ExperimentState::kCancelled);
}

TEST_F(ExperimentsTest, AfterARestartAgentsHaveTheirReconnectWindowHoweverShortTheHeartbeat) {
  // Lost after 4 s of silence: shorter than the agents' 5 s reconnect
  // backoff cap, which an agent reaches during a long outage of the service.
  config_.heartbeat_interval_ms = 1000;
  Restart();
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  ASSERT_EQ(View("a").experiment.state, ExperimentState::kRunning);
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  for (int s = 0; s < 8; ++s) Poll();  // 8 s: twice lost_after, within the window
  for (const TaskView& t : View("a").tasks)
    EXPECT_EQ(t.state, TaskState::kRunning) << "task " << t.proc_id.value();
  for (int s = 0; s < 5; ++s) Poll();  // 13 s: past reconnect_window_ms (12 s)
  int lost = 0;
  for (const TaskView& t : View("a").tasks) lost += t.state == TaskState::kLost;
  EXPECT_GT(lost, 0);
}

// docs/restarts.md, "Network faults": a node cut off from the service.
TEST_F(ExperimentsTest, ATaskSilentPastTheReconnectWindowFailsItsAttemptWithoutSpares) {
  config_.heartbeat_interval_ms = 1000;  // lost after 4 s; gone after 12 s (the window)
  Restart();
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  auto channels = RegisterAll("a");
  auto beat_all_but_node2 = [&] {
    for (int p : {0, 1, 4, 5}) ASSERT_TRUE(experiments_->OnHeartbeat(Ref("a", p)).ok());
  };
  for (int s = 0; s < 11; ++s) {
    beat_all_but_node2();
    Poll();
  }
  auto v = View("a");
  EXPECT_EQ(v.tasks[2].state, TaskState::kLost) << "silent for 11 s";
  EXPECT_EQ(v.attempts[0].state, AttemptState::kRunning)
      << "within the window: " << v.experiment.reason;
  for (int p : {0, 1}) EXPECT_TRUE(channels[p]->All<ShutdownMsg>().empty()) << p;
  beat_all_but_node2();
  Poll();
  beat_all_but_node2();
  Poll();  // 13 s
  v = View("a");
  EXPECT_NE(v.experiment.reason.find("is gone: its node stopped answering (no heartbeat)"),
            std::string::npos)
      << v.experiment.reason;
  for (int p : {0, 1}) EXPECT_EQ(channels[p]->All<ShutdownMsg>().size(), 1u) << p;
}

TEST_F(ExperimentsTest, WhileTheServiceIsCutOffNoTaskIsLostAndAfterwardsTheyHaveTimeToBeHeard) {
  config_.heartbeat_interval_ms = 1000;
  Restart();
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  auto channels = RegisterAll("a");
  // The service's host is cut off: no agent is heard, slurmctld does not
  // answer, for 60 s.
  slurm_.refuse_load_jobs = Unavailable("slurmctld does not answer");
  for (int s = 0; s < 60; ++s) Poll();
  auto v = View("a");
  for (const TaskView& t : v.tasks) EXPECT_EQ(t.state, TaskState::kRunning) << t.proc_id.value();
  EXPECT_EQ(v.experiment.state, ExperimentState::kRunning) << v.experiment.reason;
  // Back: Slurm answers first; the agents' streams take up to 85 s.
  slurm_.refuse_load_jobs = Status::Ok();
  for (int s = 0; s < 80; ++s) Poll();
  v = View("a");
  for (const TaskView& t : v.tasks) EXPECT_EQ(t.state, TaskState::kRunning) << t.proc_id.value();
  for (auto& ch : channels) EXPECT_TRUE(ch->All<ShutdownMsg>().empty());
  for (int p = 0; p < 6; ++p) ASSERT_TRUE(experiments_->OnHeartbeat(Ref("a", p)).ok());
  Poll();
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kRunning);
  // A task still silent past the window after that is lost as ever.
  for (int s = 0; s < 13; ++s) {
    for (int p : {0, 1, 4, 5}) ASSERT_TRUE(experiments_->OnHeartbeat(Ref("a", p)).ok());
    Poll();
  }
  EXPECT_NE(View("a").experiment.reason.find("is gone"), std::string::npos)
      << View("a").experiment.reason;
}

TEST_F(ExperimentsTest, RecoverAdoptsAnInterruptedSubmissionWithoutResubmitting) {
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  // Simulate a crash between Slurm's answer and recording it.
  auto attempts = *store_->ListAttempts("a");
  attempts[0].state = AttemptState::kSubmitting;
  attempts[0].slurm_job_id = 0;
  Changes c;
  c.attempts = attempts;
  ASSERT_TRUE(store_->Apply(c).ok());
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  EXPECT_EQ(slurm_.submitted.size(), 1u);
  EXPECT_EQ(store_->ListAttempts("a")->at(0).slurm_job_id, 100);
}

TEST_F(ExperimentsTest, RecoverSubmitsWhenSlurmNeverGotTheJob) {
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  auto attempts = *store_->ListAttempts("a");
  attempts[0].state = AttemptState::kSubmitting;
  attempts[0].slurm_job_id = 0;
  Changes c;
  c.attempts = attempts;
  ASSERT_TRUE(store_->Apply(c).ok());
  slurm_.jobs.clear();
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  ASSERT_EQ(slurm_.submitted.size(), 2u);
  EXPECT_EQ(store_->ListAttempts("a")->at(0).slurm_job_id, 101);
}

TEST_F(ExperimentsTest, AgentsReconnectAfterServiceRestart) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  auto ch = std::make_shared<RecordingChannel>();
  RegisterInfo info{100, 0, 0, "node1", "host1", 5000, /*reconnect=*/true};
  experiments_->OnRegister(Ref("a", 0), info, ch);
  EXPECT_TRUE(ch->All<RefusedMsg>().empty());
  EXPECT_TRUE(ch->All<AssignmentMsg>().empty()) << "a reconnecting agent keeps its assignment";
  for (int p : {1, 3, 4, 5})
    ASSERT_TRUE(experiments_->OnExited(Ref("a", p), 0, std::nullopt, false).ok());
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kSucceeded);
  EXPECT_EQ(ch->All<ShutdownMsg>().size(), 1u) << "the reconnected ps is reaped";
}

TEST_F(ExperimentsTest, ResumeStartsANewAttemptFromTheLatestCheckpoint) {
  EXPECT_EQ(experiments_->Resume("nope").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  EXPECT_EQ(experiments_->Resume("a").status().code(), StatusCode::kFailedPrecondition);
  slurm_.SetState(100, JobState::kFailed, 1);
  Poll();
  ASSERT_EQ(View("a").experiment.state, ExperimentState::kFailed);
  files_.SetCheckpoint((dir_ / "out" / "a").string(), "model.ckpt-1200", 1200);
  auto attempt = experiments_->Resume("a");
  ASSERT_TRUE(attempt.ok()) << attempt.status().message();
  EXPECT_EQ(attempt->number, 2);
  EXPECT_EQ(attempt->start_step, 1200);
  EXPECT_EQ(slurm_.submitted.back().job_name, "tfx-a-a2");
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kQueued);
  EXPECT_NE(v.experiment.reason.find("checkpoint step 1200"), std::string::npos)
      << v.experiment.reason;
  EXPECT_EQ(v.attempts.size(), 2u);
  // Agents of the old attempt are refused; its secret does not work for the
  // new attempt.
  auto ch = std::make_shared<RecordingChannel>();
  experiments_->OnRegister({"a", 1, FakeSlurm::SecretOf(slurm_.submitted[0]), ProcId(0)}, {}, ch);
  EXPECT_NE(ch->All<RefusedMsg>().at(0).reason.find("not current"), std::string::npos);
  EXPECT_EQ(experiments_->OnHeartbeat({"a", 2, FakeSlurm::SecretOf(slurm_.submitted[0]), ProcId(0)})
                .code(),
            StatusCode::kNotFound);
}

TEST_F(ExperimentsTest, RestartIsRetriedWhileThePartitionLookupFails) {
  config_.partition_cache_ms = 0;
  Restart();
  ASSERT_NO_FATAL_FAILURE(SubmitAndFailRetryably("a"));

  slurm_.refuse_partition = Unavailable("slurmctld at ctl:6817 did not answer");
  clock_.Advance(5000);
  Poll();
  EXPECT_EQ(slurm_.submitted.size(), 1u);
  // Still restarting, in the store too: a crash now loses nothing.
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kRestarting) << v.experiment.reason;
  EXPECT_EQ(v.attempts.size(), 1u);
  EXPECT_EQ(v.events.back().what, EventCode::kRetry);
  EXPECT_NE(v.events.back().why.find("attempt 2 not submitted: slurmctld at ctl:6817"),
            std::string::npos)
      << v.events.back().why;
  EXPECT_NE(v.events.back().why.find("trying again in 5 s"), std::string::npos)
      << v.events.back().why;

  // The service restarts; Slurm is back; the retry submits attempt 2.
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  slurm_.refuse_partition = Status::Ok();
  clock_.Advance(5000);
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 2u);
  EXPECT_EQ(slurm_.submitted[1].job_name, "tfx-a-a2");
  v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kQueued);
  EXPECT_EQ(v.experiment.current_attempt, 2);
  EXPECT_EQ(v.attempts.at(1).state, AttemptState::kPending);
}

TEST_F(ExperimentsTest, RestartThatCanNoLongerBeSubmittedFailsWithTheReason) {
  config_.partition_cache_ms = 0;
  Restart();
  ASSERT_NO_FATAL_FAILURE(SubmitAndFailRetryably("a"));
  // The admin removed the partition in the meantime.
  slurm_.refuse_partition = InvalidArgument("no partition named 'debug'");
  clock_.Advance(5000);
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed);
  EXPECT_NE(v.experiment.reason.find("attempt 2 cannot be submitted: no partition named 'debug'"),
            std::string::npos)
      << v.experiment.reason;
  EXPECT_EQ(slurm_.submitted.size(), 1u);
}

TEST_F(ExperimentsTest, ResumeThatCannotBePreparedAnswersTheErrorAndChangesNothing) {
  config_.partition_cache_ms = 0;
  Restart();
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  slurm_.SetState(100, JobState::kFailed, 1);
  Poll();
  ASSERT_EQ(View("a").experiment.state, ExperimentState::kFailed);
  std::string reason = View("a").experiment.reason;

  slurm_.refuse_partition = Unavailable("slurmctld did not answer");
  EXPECT_EQ(experiments_->Resume("a").status().code(), StatusCode::kUnavailable);
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed);
  EXPECT_EQ(v.experiment.reason, reason);
  EXPECT_EQ(v.attempts.size(), 1u);

  // Also after a restart of the service: nothing was half-recorded.
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  slurm_.refuse_partition = Status::Ok();
  auto attempt = experiments_->Resume("a");
  ASSERT_TRUE(attempt.ok()) << attempt.status().message();
  EXPECT_EQ(attempt->number, 2);
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kQueued);
}

TEST_F(ExperimentsTest, RecoverRestartsAnExperimentLeftQueuedWithItsAttemptEnded) {
  ASSERT_NO_FATAL_FAILURE(SubmitAndFailRetryably("a"));
  // What an older tfslurmd left when killed between recording `queued` and
  // the next attempt's intent.
  auto e = *store_->GetExperiment("a");
  e.state = ExperimentState::kQueued;
  e.reason = "attempt 2 submitted";
  Changes c;
  c.experiment = e;
  ASSERT_TRUE(store_->Apply(c).ok());

  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 2u);
  EXPECT_EQ(slurm_.submitted[1].job_name, "tfx-a-a2");
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kQueued);
  EXPECT_EQ(v.experiment.current_attempt, 2);
  bool explained = false;
  for (const auto& ev : v.events)
    explained |= ev.why.find("attempt 2 was never recorded") != std::string::npos;
  EXPECT_TRUE(explained);
}

// The intent of attempt 1 recorded, then the service killed before Slurm's
// answer was: the attempt is `submitting` in the store.
void InterruptSubmission(Store& store, const std::string& id) {
  auto attempts = *store.ListAttempts(id);
  attempts.back().state = AttemptState::kSubmitting;
  attempts.back().slurm_job_id = 0;
  Changes c;
  c.attempts = attempts;
  ASSERT_TRUE(store.Apply(c).ok());
}

TEST_F(ExperimentsTest, RecoveryIsRetriedAtLaterPollsWhileSlurmIsDown) {
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  InterruptSubmission(*store_, "a");
  slurm_.jobs.clear();  // Slurm never got it
  slurm_.refuse_load_jobs = Unavailable("slurmctld down");
  Restart();
  EXPECT_EQ(experiments_->Recover().code(), StatusCode::kUnavailable);
  Poll();
  EXPECT_EQ(store_->ListAttempts("a")->at(0).state, AttemptState::kSubmitting);
  EXPECT_EQ(slurm_.submitted.size(), 1u);

  slurm_.refuse_load_jobs = Status::Ok();
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 2u);
  auto attempt = store_->ListAttempts("a")->at(0);
  EXPECT_EQ(attempt.state, AttemptState::kPending);
  EXPECT_EQ(attempt.slurm_job_id, 101);
  Poll();
  EXPECT_EQ(slurm_.submitted.size(), 2u) << "submitted once";
}

TEST_F(ExperimentsTest, RecoveryAdoptsAtALaterPollTheJobSlurmHad) {
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  InterruptSubmission(*store_, "a");
  slurm_.refuse_load_jobs = Unavailable("slurmctld down");
  Restart();
  EXPECT_FALSE(experiments_->Recover().ok());
  slurm_.refuse_load_jobs = Status::Ok();
  Poll();
  EXPECT_EQ(slurm_.submitted.size(), 1u);
  EXPECT_EQ(store_->ListAttempts("a")->at(0).slurm_job_id, 100);
  EXPECT_EQ(store_->ListAttempts("a")->at(0).state, AttemptState::kPending);
}

TEST_F(ExperimentsTest, FailedResubmissionAtRecoveryIsRetried) {
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  InterruptSubmission(*store_, "a");
  slurm_.jobs.clear();
  slurm_.refuse_submit = Unavailable("slurmctld busy");
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  EXPECT_EQ(store_->ListAttempts("a")->at(0).state, AttemptState::kSubmitting);
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kQueued);
  slurm_.refuse_submit = Status::Ok();
  Poll();  // before the retry delay
  EXPECT_EQ(slurm_.submitted.size(), 1u);
  clock_.Advance(config_.submit_retry_ms);
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 2u);
  EXPECT_EQ(store_->ListAttempts("a")->at(0).state, AttemptState::kPending);
}

TEST_F(ExperimentsTest, TransientSlurmErrorOnARestartIsRetriedNotFatal) {
  ASSERT_NO_FATAL_FAILURE(SubmitAndFailRetryably("a"));
  slurm_.refuse_submit = Unavailable("slurmctld did not answer");
  clock_.Advance(5000);
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kQueued) << v.experiment.reason;
  ASSERT_EQ(v.attempts.size(), 2u);
  EXPECT_EQ(v.attempts[1].state, AttemptState::kSubmitting);
  EXPECT_NE(v.events.back().why.find("submitting it again in 5 s"), std::string::npos)
      << v.events.back().why;

  slurm_.refuse_submit = Status::Ok();
  clock_.Advance(config_.submit_retry_ms);
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 2u);
  v = View("a");
  EXPECT_EQ(v.attempts[1].state, AttemptState::kPending);
  EXPECT_EQ(v.attempts[1].slurm_job_id, 101);
  EXPECT_EQ(v.experiment.state, ExperimentState::kQueued);
}

TEST_F(ExperimentsTest, RestartWhoseAnswerWasLostAdoptsTheJobInsteadOfSubmittingTwice) {
  ASSERT_NO_FATAL_FAILURE(SubmitAndFailRetryably("a"));
  slurm_.lose_submit_answer = true;
  clock_.Advance(5000);
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 2u);
  EXPECT_EQ(View("a").attempts.at(1).state, AttemptState::kSubmitting);
  slurm_.lose_submit_answer = false;
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(config_.submit_retry_ms);
    Poll();
  }
  EXPECT_EQ(slurm_.submitted.size(), 2u) << "Slurm had the job: adopted, not submitted again";
  auto v = View("a");
  EXPECT_EQ(v.attempts.at(1).slurm_job_id, 101);
  EXPECT_EQ(v.attempts.at(1).state, AttemptState::kPending);
}

TEST_F(ExperimentsTest, RetriesBackOffUpToTheirCap) {
  config_.submit_retry_max_ms = 20000;
  Restart();
  ASSERT_NO_FATAL_FAILURE(SubmitAndFailRetryably("a"));
  slurm_.refuse_submit = Unavailable("slurmctld did not answer");
  clock_.Advance(5000);
  Poll();
  std::vector<std::string> delays;
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(config_.submit_retry_max_ms);
    Poll();
  }
  for (const auto& e : View("a").events)
    if (e.what == EventCode::kRetry) delays.push_back(e.why.substr(e.why.rfind(" in ") + 4));
  EXPECT_EQ(delays, (std::vector<std::string>{"5 s", "10 s", "20 s", "20 s", "20 s"}));
}

TEST_F(ExperimentsTest, CancelWhileASubmissionIsInDoubtSubmitsNothing) {
  ASSERT_NO_FATAL_FAILURE(SubmitAndFailRetryably("a"));
  slurm_.refuse_submit = Unavailable("slurmctld did not answer");
  clock_.Advance(5000);
  Poll();
  ASSERT_TRUE(experiments_->Cancel("a", "cancelled by alice").ok());
  slurm_.refuse_submit = Status::Ok();
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(config_.submit_retry_ms);
    Poll();
  }
  EXPECT_EQ(slurm_.submitted.size(), 1u);
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kCancelled);
  EXPECT_EQ(v.attempts.at(1).state, AttemptState::kEnded);
}

TEST_F(ExperimentsTest, JobThatEndedWhileTheServiceWasDownIsAnUnknownEndAndRestarted) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  // tfslurmd is down longer than MinJobAge: the job ended and Slurm forgot it.
  slurm_.jobs.clear();
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.attempts.at(0).end_reason, EndReason::kUnknown);
  // restart.on holds only retryable_exit: an unknown end is restarted all the same.
  EXPECT_EQ(v.experiment.state, ExperimentState::kRestarting) << v.experiment.reason;
  EXPECT_NE(v.experiment.reason.find("ended while tfslurmd was down; how is unknown"),
            std::string::npos)
      << v.experiment.reason;
  bool explained = false;
  for (const auto& e : v.events) explained |= e.why.find("MinJobAge") != std::string::npos;
  EXPECT_TRUE(explained);
  clock_.Advance(5000);
  Poll();
  EXPECT_EQ(slurm_.submitted.size(), 2u);
}

TEST_F(ExperimentsTest, AJobWithTheAttemptsIdButAnotherNameIsNotTheAttemptsJob) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  // While tfslurmd was down its database moved to another cluster (or
  // slurmctld lost its state), where job 100 is someone else's.
  slurm_.jobs[100].name = "someone-elses-job";
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.attempts.at(0).end_reason, EndReason::kUnknown);
  EXPECT_EQ(v.experiment.state, ExperimentState::kRestarting) << v.experiment.reason;
  EXPECT_TRUE(slurm_.cancelled.empty()) << "someone else's job is left alone";
}

TEST_F(ExperimentsTest, UnknownEndIsNotRestartedWhenThePolicyRestartsNothing) {
  json spec = PsSpec("a");
  spec["restart"]["on"] = json::array();
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(spec));
  slurm_.jobs.clear();
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed);
  EXPECT_NE(v.experiment.reason.find("not restarted: restart.on is empty"), std::string::npos)
      << v.experiment.reason;
}

TEST_F(ExperimentsTest, JobVanishingWhileTheServiceWatchesIsNodeFail) {
  json spec = PsSpec("a");
  spec["restart"]["on"] = {"node_fail"};
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(spec));
  slurm_.jobs.clear();
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.attempts.at(0).end_reason, EndReason::kNodeFail);
  EXPECT_NE(v.attempts.at(0).reason.find("job 100 vanished from Slurm"), std::string::npos);
  EXPECT_EQ(v.experiment.state, ExperimentState::kRestarting) << v.experiment.reason;
}

TEST_F(ExperimentsTest, FailureReportedBeforeTheJobVanishedDecides) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  EXPECT_TRUE(experiments_->OnExited(Ref("a", 3), 2, std::nullopt, false).ok());
  // Slurm drops the job before its final state was seen.
  slurm_.jobs.clear();
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.attempts.at(0).end_reason, EndReason::kPermanentExit);
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed);
}

TEST_F(ExperimentsTest, NodeFailAndBootFailAreNodeFailAndRestarted) {
  for (auto [id, state] :
       {std::pair{"nf", JobState::kNodeFail}, std::pair{"bf", JobState::kBootFail}}) {
    json spec = PsSpec(id);
    spec["restart"]["on"] = {"node_fail"};
    auto r = experiments_->Submit(spec, "alice", false);
    ASSERT_TRUE(r.ok());
    int64_t job = r->attempt.slurm_job_id;
    slurm_.SetState(job, JobState::kRunning);
    Poll();
    slurm_.SetState(job, state);
    slurm_.jobs[job].reason = "node2 down";
    Poll();
    auto v = View(id);
    EXPECT_EQ(v.attempts.at(0).end_reason, EndReason::kNodeFail) << id;
    EXPECT_NE(v.attempts.at(0).reason.find("node2 down"), std::string::npos) << id;
    EXPECT_EQ(v.experiment.state, ExperimentState::kRestarting) << v.experiment.reason;
  }
  // Not in restart.on: the experiment fails and says so.
  ASSERT_TRUE(experiments_->Submit(PsSpec("no"), "alice", false).ok());
  slurm_.SetState(102, JobState::kNodeFail);
  Poll();
  EXPECT_NE(View("no").experiment.reason.find("node_fail is not in restart.on"), std::string::npos)
      << View("no").experiment.reason;
}

TEST_F(ExperimentsTest, TimeLimitIsTimeoutEvenWhenTheTasksDiedOfSigterm) {
  json spec = PsSpec("a");
  spec["restart"]["on"] = {"timeout"};
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(spec));
  RegisterAll("a");
  // Slurm's SIGTERM at the limit kills a worker before the job shows TIMEOUT.
  EXPECT_TRUE(experiments_->OnExited(Ref("a", 3), 143, std::nullopt, false).ok());
  slurm_.SetState(100, JobState::kTimeout);
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.attempts.at(0).end_reason, EndReason::kTimeout);
  EXPECT_EQ(v.experiment.state, ExperimentState::kRestarting) << v.experiment.reason;
  EXPECT_NE(v.experiment.reason.find("at its time limit"), std::string::npos);
}

TEST_F(ExperimentsTest, BackoffDoublesPerRestartAndIsCappedAtTenMinutes) {
  json spec = PsSpec("a");
  spec["restart"] = {{"max_restarts", 8}, {"on", {"retryable_exit"}}, {"backoff_s", 60}};
  ASSERT_TRUE(experiments_->Submit(spec, "alice", false).ok());
  std::vector<int64_t> delays_s;
  for (int attempt = 1; attempt <= 6; ++attempt) {
    int64_t job = 100 + attempt - 1;
    ASSERT_EQ(slurm_.submitted.size(), static_cast<size_t>(attempt));
    slurm_.SetState(job, JobState::kFailed, 137);
    Poll();
    auto e = View("a").experiment;
    ASSERT_EQ(e.state, ExperimentState::kRestarting) << e.reason;
    delays_s.push_back((e.next_attempt_at - clock_.now_ms) / 1000);
    clock_.Advance(e.next_attempt_at - clock_.now_ms - config_.poll_interval_ms - 1);
    Poll();
    EXPECT_EQ(slurm_.submitted.size(), static_cast<size_t>(attempt)) << "not before the backoff";
    Poll();
  }
  EXPECT_EQ(delays_s, (std::vector<int64_t>{60, 120, 240, 480, 600, 600}));
}

TEST_F(ExperimentsTest, UserCancelIsNeverRestartedEvenWhenTheTasksDieRetryably) {
  // restart.on has retryable_exit, and the tasks die of SIGTERM (143).
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  ASSERT_TRUE(experiments_->Cancel("a", "cancelled by alice").ok());
  for (int p = 0; p < 6; ++p)
    EXPECT_TRUE(experiments_->OnExited(Ref("a", p), 143, std::nullopt, false).ok());
  slurm_.SetState(100, JobState::kFailed, 143);
  Poll();
  // Well past the 5 s backoff.
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(60000);
    Poll();
  }
  EXPECT_EQ(slurm_.submitted.size(), 1u);
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kCancelled);
  EXPECT_EQ(v.experiment.restarts, 0);
  EXPECT_EQ(v.attempts.size(), 1u);
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kCancelled);
}

TEST_F(ExperimentsTest, OnePollIsOneSlurmQueryWhateverTheNumberOfExperiments) {
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(experiments_->Submit(PsSpec("e" + std::to_string(i)), "a", false).ok());
  int before = slurm_.load_jobs_calls;
  Poll();
  EXPECT_EQ(slurm_.load_jobs_calls - before, 1);
}

// What core counts, as a Prometheus scrape would show it.
class RecordingMetrics final : public Metrics {
 public:
  int registered = 0;
  std::vector<double> rendezvous, reaping, polls;
  int poll_errors = 0;
  std::vector<std::string> ended, restarted;
  void Registered() override { ++registered; }
  std::vector<std::pair<std::string, double>> task_starts;
  std::vector<std::string> container_starts;
  void TaskStarted(const std::string& runtime, double s) override {
    task_starts.emplace_back(runtime, s);
  }
  void ContainerStarted(const std::string& runtime) override {
    container_starts.push_back(runtime);
  }
  void RendezvousDone(double s) override { rendezvous.push_back(s); }
  void ReapingDone(double s) override { reaping.push_back(s); }
  void AttemptEnded(EndReason r) override { ended.push_back(EndReasonName(r)); }
  void Restarted(EndReason r, RestartKind) override { restarted.push_back(EndReasonName(r)); }
  std::vector<std::string> alone;
  void TaskRestartedAlone(const std::string& role) override { alone.push_back(role); }
  void ExperimentDeleted(bool by_retention, int64_t files) override {
    deleted.push_back({by_retention, files});
  }
  std::vector<std::pair<bool, int64_t>> deleted;
  void SlurmPolled(double s, bool ok) override {
    polls.push_back(s);
    poll_errors += ok ? 0 : 1;
  }
};

TEST_F(ExperimentsTest, MetricsCountRegistrationsRendezvousReapingAndEnds) {
  RecordingMetrics m;
  metrics_ = &m;
  Restart();
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));  // the job starts at this poll
  clock_.Advance(1500);
  auto ch = RegisterAll("a");
  RegisterAll("a");  // reconnections are not registrations
  EXPECT_EQ(m.registered, 6);
  ASSERT_EQ(m.rendezvous.size(), 1u);
  EXPECT_DOUBLE_EQ(m.rendezvous[0], 1.5);
  for (int p : {1, 3, 4, 5})
    EXPECT_TRUE(experiments_->OnExited(Ref("a", p), 0, std::nullopt, false).ok());
  EXPECT_EQ(m.ended, (std::vector<std::string>{"succeeded"}));
  clock_.Advance(700);
  EXPECT_TRUE(experiments_->OnExited(Ref("a", 0), std::nullopt, 15, true).ok());
  EXPECT_TRUE(m.reaping.empty()) << "ps 1 has not confirmed yet";
  EXPECT_TRUE(experiments_->OnExited(Ref("a", 2), std::nullopt, 15, true).ok());
  ASSERT_EQ(m.reaping.size(), 1u);
  EXPECT_DOUBLE_EQ(m.reaping[0], 0.7);
  EXPECT_FALSE(m.polls.empty());
  EXPECT_EQ(m.poll_errors, 0);

  // A retryable failure counts the attempt's end and the restart it causes.
  ASSERT_TRUE(experiments_->Submit(PsSpec("b"), "alice", false).ok());
  slurm_.SetState(101, JobState::kFailed, 137);
  Poll();
  ASSERT_EQ(View("b").experiment.state, ExperimentState::kRestarting);
  EXPECT_EQ(m.ended, (std::vector<std::string>{"succeeded", "retryable_exit"}));
  EXPECT_EQ(m.restarted, (std::vector<std::string>{"retryable_exit"}));
  slurm_.refuse_load_jobs = Unavailable("slurmctld is down");
  Poll();
  EXPECT_EQ(m.poll_errors, 1);
}

TEST_F(ExperimentsTest, MetricsCountTaskStartsOnceAndContainerStartsPerRuntime) {
  RecordingMetrics m;
  metrics_ = &m;
  Restart();
  json pyxis = PsSpec("p");
  pyxis["container"] = {{"image", "/images/tf.sqsh"}, {"runtime", "pyxis"}};
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(pyxis));
  RegisterAll("p", 1, 2500);
  RegisterAll("p", 1, 2500);  // reconnections: no second start
  ASSERT_EQ(m.task_starts.size(), 6u);
  EXPECT_EQ(m.task_starts[0], std::make_pair(std::string("pyxis"), 2.5));
  EXPECT_EQ(m.container_starts, std::vector<std::string>(6, "pyxis"))
      << "the agent runs in the task's container: one per task, none per Assignment";

  // Under enroot each Assignment starts the program in a container; a job
  // script without the launch time gives no start figure.
  json enroot = PsSpec("e");
  enroot["container"] = {{"image", "/images/tf.sqsh"}, {"runtime", "enroot"}};
  ASSERT_TRUE(experiments_->Submit(enroot, "alice", false).ok());
  slurm_.SetState(101, JobState::kRunning);
  Poll();
  attempt_offset_ = 1;  // Ref: the second submission's secret
  RegisterAll("e");
  ASSERT_EQ(View("e").experiment.state, ExperimentState::kRunning) << View("e").experiment.reason;
  EXPECT_EQ(m.task_starts.size(), 6u);
  EXPECT_EQ(std::count(m.container_starts.begin(), m.container_starts.end(), "enroot"), 6);

  ASSERT_TRUE(experiments_->Submit(PsSpec("n"), "alice", false).ok());
  slurm_.SetState(102, JobState::kRunning);
  Poll();
  attempt_offset_ = 2;
  RegisterAll("n", 1, -40);  // an agent's figure below 0 counts as 0
  ASSERT_EQ(m.task_starts.size(), 12u);
  EXPECT_EQ(m.task_starts.back(), std::make_pair(std::string("none"), 0.0));
  EXPECT_EQ(m.container_starts.size(), 12u) << "no container, no container start";
}

TEST_F(ExperimentsTest, AnAttemptWithNoNewStepForTheStallTimeoutEndsAsStalledAndRestarts) {
  json spec = PsSpec("a");
  spec["progress"] = {{"stall_timeout_s", 30}};
  spec["restart"]["on"] = {"stalled"};
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(spec));
  RegisterAll("a");  // training starts: the stall timer runs from here
  clock_.Advance(20000);
  BeatAll("a");
  Poll();
  ASSERT_EQ(View("a").experiment.state, ExperimentState::kRunning);
  ASSERT_TRUE(experiments_->OnProgress(Ref("a", 1), 10, "/m/ckpt-10").ok());  // a new step
  clock_.Advance(14000);
  BeatAll("a");
  Poll();
  ASSERT_EQ(View("a").experiment.state, ExperimentState::kRunning)
      << "15 s since step 10 (Poll moves the clock 1 s)";
  // Five agents still heartbeat (task 3's last was 17 s ago: not
  // heartbeating, not yet gone); the program is stuck all the same.
  clock_.Advance(16001);
  for (int p : {0, 1, 2, 4, 5}) ASSERT_TRUE(experiments_->OnHeartbeat(Ref("a", p)).ok());
  Poll();
  auto v = View("a");
  EXPECT_NE(v.experiment.reason.find("stalled: no new step for 30 s (progress.stall_timeout_s); "
                                     "the last, step 10, came 32 s ago; 5 of 6 tasks still "
                                     "heartbeating: ps:0 (task 0 on node1), worker:0"),
            std::string::npos)
      << v.experiment.reason;
  bool event = false;
  for (const auto& e : v.events) event |= e.what == EventCode::kStalled;
  EXPECT_TRUE(event);
  // Every task is told to stop; once they have, and the job has ended, the
  // attempt ends as stalled and the restart policy restarts it.
  for (int p = 0; p < 6; ++p)
    ASSERT_TRUE(experiments_->OnExited(Ref("a", p), std::nullopt, 15, true).ok());
  slurm_.SetState(100, JobState::kFailed, 1);
  Poll();
  v = View("a");
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kStalled);
  EXPECT_EQ(v.experiment.state, ExperimentState::kRestarting) << v.experiment.reason;
}

TEST_F(ExperimentsTest, AServiceRestartGivesTheStallTimeoutAFreshWindow) {
  json spec = PsSpec("a");
  spec["progress"] = {{"stall_timeout_s", 30}};
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(spec));
  RegisterAll("a");
  clock_.Advance(20000);
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  clock_.Advance(20000);
  BeatAll("a");
  Poll();
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kRunning) << "20 s since the restart";
  clock_.Advance(11000);
  BeatAll("a");
  Poll();
  EXPECT_NE(View("a").experiment.reason.find("stalled: no new step for 30 s"), std::string::npos)
      << View("a").experiment.reason;
}

TEST_F(ExperimentsTest, NoStallTimeoutNoStall) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  clock_.Advance(7LL * 24 * 3600 * 1000);
  for (int p = 0; p < 6; ++p) EXPECT_TRUE(experiments_->OnHeartbeat(Ref("a", p)).ok());
  Poll();
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kRunning);
}

// The events of `id` whose what is `what`, their whys.
std::vector<std::string> Whys(const ExperimentView& v, const std::string& what) {
  std::vector<std::string> out;
  for (const auto& e : v.events)
    if (EventCodeName(e.what) == what) out.push_back(e.why);
  return out;
}

TEST_F(ExperimentsTest, ANodeFailureExcludesTheDownNodeFromTheNextAttemptsUntilAResume) {
  json spec = PsSpec("a");
  spec["resources"]["nodes"] = 2;
  spec["resources"]["tasks_per_node"] = 3;
  spec["restart"]["on"] = {"node_fail"};
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(spec));
  slurm_.partition.nodes[1].unavailable = true;  // node2 went down with the job
  slurm_.SetState(100, JobState::kNodeFail);
  Poll();
  ASSERT_EQ(View("a").experiment.state, ExperimentState::kRestarting);
  clock_.Advance(5000);
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 2u);
  EXPECT_EQ(slurm_.submitted[1].exclude_nodes, "node2");
  EXPECT_NE(slurm_.submitted[1].script.find("\n#SBATCH --exclude=node2\n"), std::string::npos);
  EXPECT_EQ(slurm_.submitted[0].script.find("--exclude"), std::string::npos);
  auto v = View("a");
  EXPECT_EQ(v.experiment.excluded_nodes, (std::vector<std::string>{"node2"}));
  EXPECT_EQ(Whys(v, "exclude"),
            (std::vector<std::string>{"excluding node2 from the next attempts (its attempt 1 "
                                      "ended NODE_FAIL); a resume clears the list"}));

  // The list is the experiment's: stored, so a restarted service keeps it.
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  EXPECT_EQ(View("a").experiment.excluded_nodes, (std::vector<std::string>{"node2"}));

  // A user's resume clears it.
  ASSERT_TRUE(experiments_->Cancel("a", "test").ok());
  slurm_.SetState(101, JobState::kCancelled);
  Poll();
  ASSERT_TRUE(experiments_->Resume("a").ok());
  EXPECT_TRUE(View("a").experiment.excluded_nodes.empty());
  EXPECT_EQ(slurm_.submitted.back().exclude_nodes, "");
}

TEST_F(ExperimentsTest, ANodeIsNotExcludedWhenTheJobWouldNotFitWithoutIt) {
  json spec = PsSpec("a");  // 3 nodes of the partition's 3
  spec["restart"]["on"] = {"node_fail"};
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(spec));
  slurm_.partition.nodes[2].unavailable = true;
  slurm_.SetState(100, JobState::kNodeFail);
  Poll();
  clock_.Advance(5000);
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 2u);
  EXPECT_EQ(slurm_.submitted[1].exclude_nodes, "");
  auto whys = Whys(View("a"), "exclude");
  ASSERT_EQ(whys.size(), 1u);
  EXPECT_EQ(whys[0],
            "not excluding node3 (its attempt 1 ended NODE_FAIL): partition debug has 3 nodes, 0 "
            "excluded already, and the job needs 3; the next attempt may run there again");
}

TEST_F(ExperimentsTest, ANodeIsNotExcludedWhenTheJobsSparesWouldNotFitWithoutIt) {
  // 2 nodes and 1 spare: a job of 3 nodes, the partition's 3. Excluding
  // node3 left 2, and slurmctld refused the next job ("Requested node
  // configuration is not available"): the experiment failed instead of
  // going on in a new job.
  json spec = PsSpec("a");
  spec["resources"]["nodes"] = 2;
  spec["resources"]["tasks_per_node"] = 3;
  spec["resources"]["spare_nodes"] = 1;
  spec["restart"]["in_allocation"] = true;
  spec["restart"]["on"] = {"node_fail"};
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(spec));
  slurm_.partition.nodes[2].unavailable = true;
  slurm_.SetState(100, JobState::kNodeFail);
  Poll();
  clock_.Advance(5000);
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 2u) << View("a").experiment.reason;
  EXPECT_EQ(slurm_.submitted[1].nodes, 3);
  EXPECT_EQ(slurm_.submitted[1].exclude_nodes, "");
  auto whys = Whys(View("a"), "exclude");
  ASSERT_EQ(whys.size(), 1u);
  EXPECT_EQ(whys[0],
            "not excluding node3 (its attempt 1 ended NODE_FAIL): partition debug has 3 nodes, 0 "
            "excluded already, and the job needs 3; the next attempt may run there again");
}

TEST_F(ExperimentsTest, AStallWhoseSilentTasksAreOnOneNodeExcludesIt) {
  json spec = PsSpec("a");
  spec["resources"]["nodes"] = 2;
  spec["resources"]["tasks_per_node"] = 3;
  spec["progress"] = {{"stall_timeout_s", 30}};
  spec["restart"]["on"] = {"stalled"};
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(spec));
  RegisterAll("a");
  clock_.Advance(31000);
  // RegisterAll puts tasks 4 and 5 on node3: only they are silent.
  for (int p : {0, 1, 2, 3}) EXPECT_TRUE(experiments_->OnHeartbeat(Ref("a", p)).ok());
  Poll();
  for (int p = 0; p < 6; ++p)
    EXPECT_TRUE(experiments_->OnExited(Ref("a", p), std::nullopt, 15, true).ok());
  slurm_.SetState(100, JobState::kFailed, 1);
  Poll();
  clock_.Advance(5000);
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 2u);
  EXPECT_EQ(slurm_.submitted[1].exclude_nodes, "node3");
  EXPECT_EQ(Whys(View("a"), "exclude"),
            (std::vector<std::string>{"excluding node3 from the next attempts (attempt 1 stalled "
                                      "and only its tasks there had stopped heartbeating); a "
                                      "resume clears the list"}));
}

TEST_F(ExperimentsTest, TrainingScalarsAreKeptAndALargerStepIsProgress) {
  json spec = PsSpec("a");
  spec["progress"] = {{"stall_timeout_s", 30}};
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(spec));
  auto ch = RegisterAll("a");
  EXPECT_EQ(ch[1]->All<AssignmentMsg>()[0].env.at("TFSLURM_SCALARS_FILE"),
            (dir_ / "out" / "a" / "tfslurm-scalars.jsonl").string())
      << "for worker 0, the reporting task";
  EXPECT_FALSE(ch[0]->All<AssignmentMsg>()[0].env.contains("TFSLURM_SCALARS_FILE"));
  for (int step = 1; step <= 3; ++step) {
    clock_.Advance(20000);
    ASSERT_TRUE(experiments_->OnScalars(Ref("a", 1), {{"loss", step * 10, 1.7e9, 0.5}}).ok());
    BeatAll("a");
    Poll();
    ASSERT_EQ(View("a").experiment.state, ExperimentState::kRunning) << "step " << step * 10;
  }
  auto kept = experiments_->ReadScalars("a", {}).value();
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].points.size(), 3u);
  EXPECT_EQ(kept[0].points[2].step, 30);

  // The same step again is no progress: the stall is caught, naming it.
  clock_.Advance(20000);
  ASSERT_TRUE(experiments_->OnScalars(Ref("a", 1), {{"loss", 30, 1.7e9, 0.4}}).ok());
  BeatAll("a");
  clock_.Advance(11000);
  for (int p = 0; p < 6; ++p) EXPECT_TRUE(experiments_->OnHeartbeat(Ref("a", p)).ok());
  Poll();
  EXPECT_NE(View("a").experiment.reason.find("the last, step 30, came 33 s ago"), std::string::npos)
      << View("a").experiment.reason;
}

TEST_F(ExperimentsTest, ScalarsThatCannotBeKeptAreDroppedWithOneEventNotRefused) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  std::vector<ScalarPoint> points = {{"loss", 1, 1.7e9, 0.5}, {"", 2, 1.7e9, 0.5}};
  EXPECT_TRUE(experiments_->OnScalars(Ref("a", 1), points).ok());
  EXPECT_TRUE(experiments_->OnScalars(Ref("a", 1), points).ok());
  EXPECT_TRUE(experiments_->OnScalars(Ref("a", 0), {{"loss", 5, 1.7e9, 0.5}}).ok())
      << "a ps is not the reporting task; its points go, the agent is not refused";
  EXPECT_EQ(Whys(View("a"), "scalars"),
            std::vector<std::string>{"1 training scalar point(s) not kept: a point of step 2: its "
                                     "tag is empty (said once per attempt)"});
  auto kept = experiments_->ReadScalars("a", {}).value();
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].points.size(), 1u) << "only the reporting task's valid point";
  EXPECT_FALSE(experiments_->OnScalars(Ref("a", 9), points).ok()) << "no such task";
}

TEST_F(ExperimentsTest, ATagWithABidiOverrideIsDroppedWithAnEventThatDoesNotQuoteIt) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  EXPECT_TRUE(experiments_
                  ->OnScalars(Ref("a", 1), {{"loss", 1, 1.7e9, 0.5},
                                            {"evil\xe2\x80\xae"
                                             "ssol",
                                             2, 1.7e9, 0.5},
                                            {"csi\xc2\x9b"
                                             "2J",
                                             3, 1.7e9, 0.5}})
                  .ok());
  auto whys = Whys(View("a"), "scalars");
  ASSERT_EQ(whys.size(), 1u);
  EXPECT_NE(whys[0].find("2 training scalar point(s) not kept: a point of step 2: its tag has "
                         "U+202E, a bidi control, at byte 4"),
            std::string::npos)
      << whys[0];
  EXPECT_EQ(whys[0].find("\xe2\x80\xae"), std::string::npos) << "the event must not carry it";
  auto kept = experiments_->ReadScalars("a", {}).value();
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].tag, "loss");
}

TEST_F(ExperimentsTest, ACheckpointPathWithAnEscapeIsIgnoredWithAnEventAndTheStepKept) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  ASSERT_TRUE(experiments_->OnProgress(Ref("a", 1), 7, "x\x1b]0;TITLE\x07/model.ckpt-7").ok());
  auto v = View("a");
  EXPECT_EQ(v.experiment.checkpoint_step, 7);
  EXPECT_EQ(v.experiment.checkpoint_path, "") << "not kept";
  auto whys = Whys(v, "checkpoint");
  ASSERT_EQ(whys.size(), 1u);
  EXPECT_EQ(whys[0].find('\x1b'), std::string::npos) << whys[0];
  EXPECT_NE(whys[0].find("step 7; its path is ignored: it has U+001B, a control character, at "
                         "byte 1"),
            std::string::npos)
      << whys[0];
  ASSERT_TRUE(experiments_->OnProgress(Ref("a", 1), 8, "/m/model.ckpt-8").ok());
  EXPECT_EQ(View("a").experiment.checkpoint_path, "/m/model.ckpt-8");
}

// Issue 41: 80 checkpoints with 3 MB names made GET /experiments/ID 243 MB.
TEST_F(ExperimentsTest, ACheckpointPathLongerThanAPathIsIgnoredWithAnEventThatDoesNotQuoteIt) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  RegisterAll("a");
  const std::string longest = "/m/" + std::string(kMaxCheckpointPathBytes - 3, 'c');
  ASSERT_TRUE(experiments_->OnProgress(Ref("a", 1), 6, longest).ok());
  EXPECT_EQ(View("a").experiment.checkpoint_path, longest) << "4096 bytes are kept";
  ASSERT_TRUE(experiments_->OnProgress(Ref("a", 1), 7, longest + "c").ok());
  auto v = View("a");
  EXPECT_EQ(v.experiment.checkpoint_step, 7) << "the step counts";
  EXPECT_EQ(v.experiment.checkpoint_path, "");
  auto whys = Whys(v, "checkpoint");
  ASSERT_EQ(whys.size(), 2u);
  EXPECT_EQ(whys[1], "step 7; its path is ignored: it is 4097 bytes long, at most 4096 are kept");
}

// Issue 41: a node name an agent reported reached the next attempt's
// "#SBATCH --exclude=" line as it was.
TEST_F(ExperimentsTest, ARegistrationWithANodeNameOrAddressThatIsNoHostNameIsRefused) {
  ASSERT_NO_FATAL_FAILURE(SubmitRunning(PsSpec("a")));
  struct Case {
    std::string node, address;
    int port;
    std::string why;
  };
  for (const Case& bad :
       {Case{"node1\n#SBATCH --uid=0", "h", 1, "the node name must be"},
        Case{std::string(256, 'n'), "h", 1, "the node name must be at most 255 bytes"},
        Case{"node1", "h; rm -rf /", 1, "the address must be"},
        Case{"node1", "h", 70000, "the port must be from 0 to 65535, got 70000"}}) {
    auto ch = std::make_shared<RecordingChannel>();
    RegisterInfo info;
    info.node_name = bad.node;
    info.address = bad.address;
    info.port = bad.port;
    experiments_->OnRegister(Ref("a", 0), info, ch);
    auto refused = ch->All<RefusedMsg>();
    ASSERT_EQ(refused.size(), 1u) << bad.why;
    EXPECT_TRUE(refused[0].permanent);
    EXPECT_NE(refused[0].reason.find(bad.why), std::string::npos) << refused[0].reason;
    EXPECT_EQ(refused[0].reason.find('\n'), std::string::npos) << "never quoted";
  }
  Poll();
  EXPECT_EQ(View("a").tasks[0].node, "") << "nothing of it was recorded";
  RegisterInfo good;
  good.node_name = "gpu-01.cluster_a";
  good.address = "fe80::1%ib0";
  good.port = 6000;
  auto ch = std::make_shared<RecordingChannel>();
  experiments_->OnRegister(Ref("a", 0), good, ch);
  EXPECT_TRUE(ch->All<RefusedMsg>().empty());
  Poll();
  EXPECT_EQ(View("a").tasks[0].node, "gpu-01.cluster_a");
}

// Restarts in place (restart.in_allocation, service/core/in_place_restart.h).
class InPlaceRestartTest : public ExperimentsTest {
 protected:
  json InPlaceSpec(const std::string& id) const {
    json spec = PsSpec(id);
    spec["restart"]["in_allocation"] = true;
    if (spare_nodes_ > 0) spec["resources"]["spare_nodes"] = spare_nodes_;
    return spec;
  }
  // Spare nodes of the job (resources.spare_nodes): with one, the job has a
  // fourth node whose agents (SLURM_PROCID 6 and 7) wait with no program,
  // and a task's SLURM_PROCID and its index differ once a spare takes a
  // node's place; InPlaceRestartCasesTest runs the same cases with and
  // without it.
  int spare_nodes_ = 0;
  // Attempt `attempt`'s reference to task `proc`: in place, with the secret
  // of the job's script (Slurm job 100, the first submission).
  TaskRef JobRef(const std::string& id, int proc, int attempt) {
    return {id, attempt, FakeSlurm::SecretOf(slurm_.submitted.at(0)), ProcId(proc)};
  }
  RegisterInfo Info(int proc, bool standby) {
    RegisterInfo info;
    info.slurm_job_id = 100;
    info.node_name = "node" + std::to_string(proc / 2 + 1);
    info.address = "host" + std::to_string(proc / 2 + 1);
    info.port = 6000 + proc;
    info.local_id = proc % 2;
    info.standby = standby;
    return info;
  }
  // Attempt 1 of `id` runs; worker 1 (task 3) is killed, the others are
  // reaped, and every agent but those in `missing` comes back to wait.
  std::vector<std::shared_ptr<RecordingChannel>> FailAndStandBy(const std::string& id,
                                                                std::set<int> missing = {}) {
    return FailSpecAndStandBy(InPlaceSpec(id), SIGKILL, std::move(missing));
  }
  // The same for `spec`, worker 1 killed by `signal`, the job's time limit
  // `time_left_s` away.
  std::vector<std::shared_ptr<RecordingChannel>> FailSpecAndStandBy(const json& spec, int signal,
                                                                    std::set<int> missing = {},
                                                                    int64_t time_left_s = 3600) {
    const std::string id = spec["id"];
    EXPECT_TRUE(experiments_->Submit(spec, "alice", false).ok());
    slurm_.SetState(100, JobState::kRunning);
    slurm_.jobs[100].end_time = clock_.NowMs() / 1000 + time_left_s;
    Poll();
    RegisterAll(id);
    EXPECT_TRUE(experiments_->OnExited(JobRef(id, 3, 1), std::nullopt, signal, false).ok());
    for (int p = 0; p < 6; ++p) {
      if (p != 3) {
        EXPECT_TRUE(experiments_->OnExited(JobRef(id, p, 1), 0, std::nullopt, true).ok());
      }
    }
    std::vector<std::shared_ptr<RecordingChannel>> waiting;
    for (int p = 0; p < 6; ++p) {
      auto ch = std::make_shared<RecordingChannel>();
      if (!missing.count(p)) experiments_->OnRegister(JobRef(id, p, 1), Info(p, true), ch);
      waiting.push_back(ch);
    }
    return waiting;
  }
};

// The restart-in-place cases, each with no spare node and with one: the
// spare's agents never register here, so the same decisions must follow.
class InPlaceRestartCasesTest : public InPlaceRestartTest,
                                public ::testing::WithParamInterface<int> {
 protected:
  void SetUp() override {
    InPlaceRestartTest::SetUp();
    spare_nodes_ = GetParam();
    // A fourth node for the spare (the fake partition has three).
    if (spare_nodes_ > 0) slurm_.partition.nodes.push_back({"node4", 4, 8000});
  }
};

INSTANTIATE_TEST_SUITE_P(SpareNodes, InPlaceRestartCasesTest, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("NoSpare")
                                                  : std::string("OneSpare");
                         });

TEST_P(InPlaceRestartCasesTest, AKilledTaskRestartsEveryProgramInTheSameJob) {
  auto waiting = FailAndStandBy("a");
  Poll();
  auto v = View("a");
  ASSERT_EQ(v.attempts.size(), 2u) << v.experiment.reason;
  EXPECT_EQ(slurm_.submitted.size(), 1u) << "nothing goes back to the queue";
  EXPECT_TRUE(slurm_.cancelled.empty());
  EXPECT_EQ(v.experiment.current_attempt, 2);
  EXPECT_EQ(v.experiment.restarts, 1);
  EXPECT_EQ(v.experiment.state, ExperimentState::kStarting) << v.experiment.reason;
  EXPECT_EQ(v.attempts[0].state, AttemptState::kEnded);
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kRetryableExit);
  EXPECT_FALSE(v.attempts[0].in_place);
  EXPECT_TRUE(v.attempts[1].in_place);
  EXPECT_EQ(v.attempts[1].slurm_job_id, 100);
  EXPECT_EQ(v.attempts[1].job_name, "tfx-a-a1");
  EXPECT_EQ(v.attempts[1].state, AttemptState::kRunning);
  EXPECT_NE(v.experiment.reason.find("in Slurm job 100, restarted in place"), std::string::npos)
      << v.experiment.reason;
  for (int p = 0; p < 6; ++p) {
    auto next = waiting[p]->All<NextAttemptMsg>();
    ASSERT_EQ(next.size(), 1u) << "task " << p;
    EXPECT_EQ(next[0].attempt, 2);
    EXPECT_EQ(next[0].log_dir, (dir_ / "out" / "a" / "logs" / "attempt-2").string());
  }
  EXPECT_TRUE(files_.Created((dir_ / "out" / "a" / "logs" / "attempt-2").string()));

  // The agents register for attempt 2 with the job's secret, on new ports.
  std::vector<std::shared_ptr<RecordingChannel>> channels;
  for (int p = 0; p < 6; ++p) {
    channels.push_back(std::make_shared<RecordingChannel>());
    experiments_->OnRegister(JobRef("a", p, 2), Info(p, false), channels.back());
  }
  for (int p = 0; p < 6; ++p) {
    auto assigned = channels[p]->All<AssignmentMsg>();
    ASSERT_EQ(assigned.size(), 1u) << "task " << p;
    EXPECT_TRUE(assigned[0].stay_for_next_attempt);
  }
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kRunning);
  // Attempt 1's agents are not attempt 2's: its references are refused.
  EXPECT_FALSE(experiments_->OnHeartbeat(JobRef("a", 0, 1)).ok());
}

TEST_P(InPlaceRestartCasesTest, AnAgentBackAfterAServiceRestartIsToldTheAttemptThatRunsNow) {
  auto waiting = FailAndStandBy("a");
  Poll();
  ASSERT_EQ(View("a").experiment.current_attempt, 2);
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  auto late = std::make_shared<RecordingChannel>();
  experiments_->OnRegister(JobRef("a", 4, 1), Info(4, true), late);
  auto next = late->All<NextAttemptMsg>();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].attempt, 2);
  // A wrong secret is not told anything.
  auto stranger = std::make_shared<RecordingChannel>();
  experiments_->OnRegister({"a", 1, "not-the-secret", ProcId(4)}, Info(4, true), stranger);
  EXPECT_TRUE(stranger->All<NextAttemptMsg>().empty());
}

TEST_P(InPlaceRestartCasesTest, TheDecisionSurvivesAServiceRestartBeforeTheNextAttempt) {
  auto waiting = FailAndStandBy("a");
  Restart();  // before any Tick: attempt 1's exits are all the new process has
  ASSERT_TRUE(experiments_->Recover().ok());
  for (int p = 0; p < 6; ++p) {
    waiting[p] = std::make_shared<RecordingChannel>();
    experiments_->OnRegister(JobRef("a", p, 1), Info(p, true), waiting[p]);
  }
  Poll();
  auto v = View("a");
  ASSERT_EQ(v.attempts.size(), 2u) << v.experiment.reason;
  EXPECT_TRUE(v.attempts[1].in_place);
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kRetryableExit);
  EXPECT_EQ(slurm_.submitted.size(), 1u);
  for (int p = 0; p < 6; ++p) EXPECT_EQ(waiting[p]->All<NextAttemptMsg>().size(), 1u);
}

TEST_P(InPlaceRestartCasesTest, AnAgentThatDoesNotComeBackSendsTheRestartToANewJob) {
  auto waiting = FailAndStandBy("a", /*missing=*/{5});
  Poll();
  EXPECT_EQ(View("a").attempts.size(), 1u) << "waits for the agent first";
  EXPECT_TRUE(slurm_.cancelled.empty());
  clock_.Advance(config_.shutdown_grace_ms + config_.reap_timeout_margin_ms +
                 config_.reconnect_window_ms);
  Poll();
  ASSERT_EQ(slurm_.cancelled.size(), 1u);
  EXPECT_EQ(slurm_.cancelled[0], 100);
  for (int p = 0; p < 5; ++p) EXPECT_EQ(waiting[p]->All<ReleaseMsg>().size(), 1u) << p;
  slurm_.SetState(100, JobState::kCancelled);
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kRestarting) << v.experiment.reason;
  bool said_why = false;
  for (const EventRecord& e : v.events)
    said_why |= e.what == EventCode::kRestart &&
                e.why.find("not in place: 1 of 6 agents (") != std::string::npos;
  EXPECT_TRUE(said_why);
  clock_.Advance(5000);
  Poll();
  ASSERT_EQ(slurm_.submitted.size(), 2u);
  EXPECT_EQ(slurm_.submitted[1].job_name, "tfx-a-a2");
}

// Issue 49, point 2: the restart is decided as the last agent comes back
// to wait, not at the next Tick (up to 200 ms later in tfslurmd).
TEST_P(InPlaceRestartCasesTest, TheLastAgentBackInStandbyStartsTheNextAttemptWithoutATick) {
  auto waiting = FailAndStandBy("a", /*missing=*/{0});
  EXPECT_EQ(View("a").attempts.size(), 1u) << "task 0's agent is not back yet";
  for (int p = 1; p < 6; ++p) EXPECT_TRUE(waiting[p]->All<NextAttemptMsg>().empty()) << p;
  // Task 0, the first in order, completes the set last: no Tick in between.
  experiments_->OnRegister(JobRef("a", 0, 1), Info(0, true), waiting[0]);
  auto v = View("a");
  ASSERT_EQ(v.attempts.size(), 2u) << v.experiment.reason;
  EXPECT_TRUE(v.attempts[1].in_place);
  EXPECT_EQ(v.experiment.current_attempt, 2);
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kRetryableExit);
  for (int p = 0; p < 6; ++p) {
    auto next = waiting[p]->All<NextAttemptMsg>();
    ASSERT_EQ(next.size(), 1u) << "task " << p;
    EXPECT_EQ(next[0].attempt, 2);
  }
  EXPECT_EQ(slurm_.submitted.size(), 1u);
  // The Tick that follows finds it decided and decides nothing again.
  Poll();
  EXPECT_EQ(View("a").attempts.size(), 2u);
  for (int p = 0; p < 6; ++p) EXPECT_EQ(waiting[p]->All<NextAttemptMsg>().size(), 1u) << p;
}

TEST_P(InPlaceRestartCasesTest, AStandbyThatCompletesTheSetDecidesWhatTheTickWouldHave) {
  // A SIGTERM is left to the job's end, at once as at a Tick: the agents
  // are released and no attempt starts in place.
  auto waiting = FailSpecAndStandBy(InPlaceSpec("a"), SIGTERM);
  auto v = View("a");
  EXPECT_EQ(v.attempts.size(), 1u);
  for (int p = 0; p < 6; ++p) {
    EXPECT_TRUE(waiting[p]->All<NextAttemptMsg>().empty()) << p;
    EXPECT_EQ(waiting[p]->All<ReleaseMsg>().size(), 1u) << p;
  }
  bool said = false;
  for (const auto& e : v.events)
    said = said || e.why.find("not in place: the failure was a SIGTERM") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST_P(InPlaceRestartCasesTest, TooLittleTimeLeftSendsTheRestartToANewJob) {
  // checkpoint.signal_grace_s (120) + 60 s are needed; 100 s are left.
  auto waiting = FailSpecAndStandBy(InPlaceSpec("a"), SIGKILL, {}, /*time_left_s=*/100);
  Poll();
  // The agents are released, and the job's end decides, as without them.
  for (int p = 0; p < 6; ++p) EXPECT_EQ(waiting[p]->All<ReleaseMsg>().size(), 1u) << p;
  EXPECT_TRUE(slurm_.cancelled.empty());
  // One whose stream broke and comes back to wait is released too.
  auto again = std::make_shared<RecordingChannel>();
  experiments_->OnRegister(JobRef("a", 1, 1), Info(1, true), again);
  EXPECT_EQ(again->All<ReleaseMsg>().size(), 1u);
  ASSERT_EQ(View("a").attempts.size(), 1u);
  slurm_.SetState(100, JobState::kFailed, 137);
  Poll();
  auto v = View("a");
  ASSERT_EQ(v.attempts.size(), 1u);
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kRetryableExit);
  EXPECT_EQ(v.experiment.state, ExperimentState::kRestarting);
  bool said_why = false;
  for (const EventRecord& e : v.events)
    said_why |= e.what == EventCode::kRestart &&
                e.why.find("not in place: only ") != std::string::npos &&
                e.why.find(" s left before Slurm job 100's time limit") != std::string::npos;
  EXPECT_TRUE(said_why) << v.events.back().why;
}

TEST_P(InPlaceRestartCasesTest, AFailureBySigtermIsLeftToTheJobsEndWhichMayBeTheTimeLimit) {
  // Slurm's SIGTERM at the limit: worker 1's program ends by it first.
  auto waiting = FailSpecAndStandBy(InPlaceSpec("a"), SIGTERM);
  Poll();
  for (int p = 0; p < 6; ++p) EXPECT_EQ(waiting[p]->All<ReleaseMsg>().size(), 1u) << p;
  EXPECT_EQ(View("a").attempts.size(), 1u);
  slurm_.SetState(100, JobState::kTimeout);
  Poll();
  auto v = View("a");
  ASSERT_EQ(v.attempts.size(), 1u);
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kTimeout) << "classified by the job's end";
}

TEST_P(InPlaceRestartCasesTest, ARestartInPlaceSaysItCameAtOnceNotAfterABackoff) {
  auto waiting = FailAndStandBy("a");
  Poll();
  auto v = View("a");
  ASSERT_EQ(v.attempts.size(), 2u) << v.experiment.reason;
  EXPECT_NE(v.experiment.reason.find("restart 1 of 1, at once; attempt 2 in Slurm job 100, "
                                     "restarted in place"),
            std::string::npos)
      << v.experiment.reason;
  EXPECT_EQ(v.experiment.reason.find(" in 5 s"), std::string::npos)
      << "the backoff (restart.backoff_s 5) is a new job's: " << v.experiment.reason;
}

TEST_P(InPlaceRestartCasesTest, ASigtermIsNotCalledAFailureWhileSlurmHasNotSaidHowTheJobEnded) {
  auto waiting = FailSpecAndStandBy(InPlaceSpec("a"), SIGTERM);
  std::string reason = View("a").experiment.reason;
  EXPECT_EQ(reason.find("failed"), std::string::npos) << reason;
  EXPECT_NE(reason.find("a SIGTERM, which Slurm sends at a time limit, a preemption or a "
                        "scancel; waiting for Slurm to say how the job ended"),
            std::string::npos)
      << reason;
}

TEST_P(InPlaceRestartCasesTest, ASigtermAtTheJobsEndTimeIsSaidToBeItsTimeLimit) {
  ASSERT_TRUE(experiments_->Submit(InPlaceSpec("a"), "alice", false).ok());
  slurm_.SetState(100, JobState::kRunning);
  slurm_.jobs[100].end_time = clock_.NowMs() / 1000 + 2;
  Poll();
  RegisterAll("a");
  clock_.Advance(1000);
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 3), std::nullopt, SIGTERM, false).ok());
  const std::string reason = View("a").experiment.reason;
  EXPECT_NE(reason.find("was killed by signal 15 at its Slurm job's time limit; waiting for "
                        "Slurm to end the job"),
            std::string::npos)
      << reason;
}

TEST_P(InPlaceRestartCasesTest, AJobSeenPendingRunsOnceItsAgentsHaveRegistered) {
  // The last poll saw the job PENDING; its agents registered and a task
  // failed before the next poll: the job runs, and the restart is in place.
  ASSERT_TRUE(experiments_->Submit(InPlaceSpec("a"), "alice", false).ok());
  slurm_.SetState(100, JobState::kPending);
  Poll();
  slurm_.SetState(100, JobState::kRunning);
  slurm_.jobs[100].end_time = clock_.NowMs() / 1000 + 3600;
  RegisterAll("a");
  ASSERT_TRUE(experiments_->OnExited(JobRef("a", 3, 1), std::nullopt, SIGKILL, false).ok());
  for (int p = 0; p < 6; ++p) {
    if (p != 3) {
      ASSERT_TRUE(experiments_->OnExited(JobRef("a", p, 1), 0, std::nullopt, true).ok());
    }
  }
  for (int p = 0; p < 6; ++p)
    experiments_->OnRegister(JobRef("a", p, 1), Info(p, true),
                             std::make_shared<RecordingChannel>());
  experiments_->Tick();  // the timers, with no poll of Slurm since it said PENDING
  auto v = View("a");
  for (const std::string& why : Whys(v, "restart"))
    EXPECT_EQ(why.find("PENDING"), std::string::npos) << why;
  ASSERT_EQ(v.attempts.size(), 2u) << v.experiment.reason;
  EXPECT_TRUE(v.attempts[1].in_place);
}

TEST_P(InPlaceRestartCasesTest, AFailureThatIsNotRestartedSaysNothingOfARestartNotInPlace) {
  json spec = InPlaceSpec("a");
  spec["restart"]["on"] = json::array();  // nothing is restarted
  ASSERT_TRUE(experiments_->Submit(spec, "alice", false).ok());
  slurm_.SetState(100, JobState::kRunning);
  // Too little time left for an attempt in place: an obstacle, were it
  // restarted.
  slurm_.jobs[100].end_time = clock_.NowMs() / 1000 + 30;
  Poll();
  RegisterAll("a");
  ASSERT_TRUE(experiments_->OnExited(JobRef("a", 3, 1), 1, std::nullopt, false).ok());
  for (int p = 0; p < 6; ++p) {
    if (p != 3) {
      ASSERT_TRUE(experiments_->OnExited(JobRef("a", p, 1), 0, std::nullopt, true).ok());
    }
  }
  for (int p = 0; p < 6; ++p)
    experiments_->OnRegister(JobRef("a", p, 1), Info(p, true),
                             std::make_shared<RecordingChannel>());
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed) << v.experiment.reason;
  EXPECT_EQ(Whys(v, "restart"), std::vector<std::string>{}) << "no restart comes";
}

TEST_P(InPlaceRestartCasesTest, NoRestartLeftReleasesTheWaitingAgents) {
  json spec = InPlaceSpec("a");
  spec["restart"]["max_restarts"] = 0;
  auto waiting = FailSpecAndStandBy(spec, SIGKILL);
  Poll();
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kFailed);
  for (int p = 0; p < 6; ++p) EXPECT_EQ(waiting[p]->All<ReleaseMsg>().size(), 1u) << p;
  // An agent that comes back after the decision is released at once.
  auto late = std::make_shared<RecordingChannel>();
  experiments_->OnRegister(JobRef("a", 2, 1), Info(2, true), late);
  EXPECT_EQ(late->All<ReleaseMsg>().size(), 1u);
}

// Only an agent whose program has ended may wait in the job
// (LiveAttempt::StandBy): a standby from a task still running is
// released, and the attempt goes on.
TEST_P(InPlaceRestartCasesTest, AStandbyFromATaskWhoseProgramRunsIsReleased) {
  ASSERT_TRUE(experiments_->Submit(InPlaceSpec("a"), "alice", false).ok());
  slurm_.SetState(100, JobState::kRunning);
  Poll();
  RegisterAll("a");
  auto early = std::make_shared<RecordingChannel>();
  experiments_->OnRegister(JobRef("a", 2, 1), Info(2, true), early);
  EXPECT_EQ(early->All<ReleaseMsg>().size(), 1u) << "its program has not ended";
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kRunning) << v.experiment.reason;
  EXPECT_EQ(v.attempts.size(), 1u);
}

// A cancel ends any chance of a next attempt in the job
// (OpenExperiment::MayRestartInPlace): an agent, or a spare's, that comes
// back to wait after it is released, and no attempt in place follows.
TEST_P(InPlaceRestartCasesTest, AgentsAndSparesBackAfterACancelAreReleased) {
  auto waiting = FailAndStandBy("a", {5});  // task 5's agent is not back yet
  ASSERT_TRUE(experiments_->Cancel("a", "cancelled by alice").ok());
  auto late = std::make_shared<RecordingChannel>();
  experiments_->OnRegister(JobRef("a", 5, 1), Info(5, true), late);
  EXPECT_EQ(late->All<ReleaseMsg>().size(), 1u) << "no next attempt runs in this job";
  if (spare_nodes_ > 0) {
    auto spare = std::make_shared<RecordingChannel>();
    experiments_->OnRegister(JobRef("a", 6, 1), Info(6, true), spare);
    EXPECT_EQ(spare->All<ReleaseMsg>().size(), 1u) << "a spare has no use after a cancel";
  }
  Poll();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kCancelled) << v.experiment.reason;
  EXPECT_EQ(v.attempts.size(), 1u) << "no attempt in place after a cancel";
}

// Spare nodes (resources.spare_nodes, service/core/node_slots.h): a job of
// 2 nodes of 2 tasks (ps 1, worker 3) and 1 spare: procs 4 and 5 on node3.
class SpareNodesTest : public InPlaceRestartTest {
 protected:
  json SpareSpec(const std::string& id) const {
    json spec = InPlaceSpec(id);
    spec["cluster"] = {{"ps", 1}, {"worker", 3}};
    spec["resources"]["nodes"] = 2;
    spec["resources"]["spare_nodes"] = 1;
    spec["restart"]["on"] = {"retryable_exit", "node_fail"};
    return spec;
  }
  // Attempt 1 runs on node1 and node2; node3's agents wait as spares
  // (unless `spares_wait` is false). Returns the spares' standby channels.
  std::vector<std::shared_ptr<RecordingChannel>> RunWithSpares(const std::string& id,
                                                               bool spares_wait = true) {
    EXPECT_TRUE(experiments_->Submit(SpareSpec(id), "alice", false).ok());
    slurm_.SetState(100, JobState::kRunning);
    slurm_.jobs[100].end_time = clock_.NowMs() / 1000 + 3600;
    Poll();
    for (int p = 0; p < 6; ++p) {
      tasks_.push_back(std::make_shared<RecordingChannel>());
      experiments_->OnRegister(JobRef(id, p, 1), Info(p, false), tasks_.back());
    }
    std::vector<std::shared_ptr<RecordingChannel>> spares;
    for (int p = 4; p < 6; ++p) {
      EXPECT_EQ(tasks_[p]->All<SpareMsg>().size(), 1u) << p;
      EXPECT_TRUE(tasks_[p]->All<AssignmentMsg>().empty()) << p;
      spares.push_back(std::make_shared<RecordingChannel>());
      if (spares_wait) experiments_->OnRegister(JobRef(id, p, 1), Info(p, true), spares.back());
    }
    for (int p = 0; p < 4; ++p) EXPECT_EQ(tasks_[p]->All<AssignmentMsg>().size(), 1u) << p;
    return spares;
  }
  // node2 fails: Slurm takes it out of the job, which runs on (--no-kill);
  // node1's tasks are shut down and come back to wait.
  std::vector<std::shared_ptr<RecordingChannel>> FailNode2(const std::string& id) {
    slurm_.jobs[100].nodes = "node[1,3]";
    slurm_.jobs[100].node_names = {"node1", "node3"};
    Poll();
    for (int p = 0; p < 2; ++p) {
      EXPECT_EQ(tasks_[p]->All<ShutdownMsg>().size(), 1u) << p;
      EXPECT_TRUE(experiments_->OnExited(JobRef(id, p, 1), 0, std::nullopt, true).ok());
    }
    std::vector<std::shared_ptr<RecordingChannel>> waiting;
    for (int p = 0; p < 2; ++p) {
      waiting.push_back(std::make_shared<RecordingChannel>());
      experiments_->OnRegister(JobRef(id, p, 1), Info(p, true), waiting.back());
    }
    return waiting;
  }
  std::vector<std::shared_ptr<RecordingChannel>> tasks_;
};

TEST_F(SpareNodesTest, ASpareTakesAFailedNodesPlaceInTheSameJob) {
  auto spares = RunWithSpares("a");
  ASSERT_EQ(slurm_.submitted.size(), 1u);
  EXPECT_EQ(slurm_.submitted[0].nodes, 3) << "2 nodes and 1 spare";
  EXPECT_TRUE(slurm_.submitted[0].no_kill);
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kRunning)
      << "the spares are not in the barrier";
  auto waiting = FailNode2("a");
  Poll();
  auto v = View("a");
  ASSERT_EQ(v.attempts.size(), 2u) << v.experiment.reason;
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kNodeFail) << v.attempts[0].reason;
  EXPECT_NE(v.attempts[0].reason.find(
                "worker:1 (task 2 on node2) was killed by signal 9: its node left Slurm job 100"),
            std::string::npos)
      << v.attempts[0].reason;
  EXPECT_TRUE(v.attempts[1].in_place);
  EXPECT_EQ(slurm_.submitted.size(), 1u) << "nothing goes back to the queue";
  EXPECT_TRUE(slurm_.cancelled.empty());
  EXPECT_EQ(v.attempts[1].node_slots.JobNodeOfSlot(1), 2) << "node3 runs slot 1 now";
  EXPECT_TRUE(v.attempts[1].node_slots.spares().empty());
  bool said = false;
  for (const std::string& why : Whys(v, "restart"))
    said = said || why.find("node3 (a spare) takes node2's place") != std::string::npos;
  EXPECT_TRUE(said) << v.experiment.reason;
  for (auto& ch : waiting) EXPECT_EQ(ch->All<NextAttemptMsg>().size(), 1u);
  for (auto& ch : spares) EXPECT_EQ(ch->All<NextAttemptMsg>().size(), 1u);

  // Attempt 2: node1's agents and the spare's register; node2's is out.
  std::vector<std::shared_ptr<RecordingChannel>> next(6);
  for (int p : {0, 1, 4, 5}) {
    next[p] = std::make_shared<RecordingChannel>();
    experiments_->OnRegister(JobRef("a", p, 2), Info(p, false), next[p]);
  }
  for (int p : {0, 1, 4, 5}) ASSERT_EQ(next[p]->All<AssignmentMsg>().size(), 1u) << p;
  const AssignmentMsg spare = next[4]->All<AssignmentMsg>()[0];
  EXPECT_EQ(spare.role, "worker");
  EXPECT_EQ(spare.index, 1) << "task 2's role: placement does not move";
  EXPECT_NE(spare.cluster->json.find("host3:6004"), std::string::npos) << spare.cluster->json;
  EXPECT_EQ(spare.cluster->json.find("host2"), std::string::npos) << spare.cluster->json;
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kRunning);
  auto gone = std::make_shared<RecordingChannel>();
  experiments_->OnRegister(JobRef("a", 2, 2), Info(2, false), gone);
  EXPECT_EQ(gone->All<RefusedMsg>().size(), 1u) << "node2's agents are out";
  // The spare reports as task 2.
  ASSERT_TRUE(experiments_->OnHeartbeat(JobRef("a", 4, 2)).ok());
  EXPECT_EQ(View("a").tasks[2].node, "node3");

  // A restarted tfslurmd places the agents the same way.
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  EXPECT_EQ(View("a").attempts[1].node_slots, v.attempts[1].node_slots);
  ASSERT_TRUE(experiments_->OnHeartbeat(JobRef("a", 5, 2)).ok());
  EXPECT_FALSE(experiments_->OnHeartbeat(JobRef("a", 3, 2)).ok());
}

// After the swap, task 2 (worker:1) and task 3 (worker:2) run on the spare,
// whose agents' SLURM_PROCIDs are 4 and 5: the only case where a task's index
// and its proc id differ. The store keeps each row by the task's index; GET
// shows the proc id (the name of its output file); a report from proc 4 is
// task 2's.
TEST_F(SpareNodesTest, AfterASwapTheStoreKeepsTaskIndicesAndTheViewProcIds) {
  RunWithSpares("a");
  FailNode2("a");
  Poll();
  ASSERT_EQ(View("a").attempts.size(), 2u);
  std::vector<std::shared_ptr<RecordingChannel>> next(6);
  for (int p : {0, 1, 4, 5}) {
    next[p] = std::make_shared<RecordingChannel>();
    experiments_->OnRegister(JobRef("a", p, 2), Info(p, false), next[p]);
    ASSERT_TRUE(next[p]->All<RefusedMsg>().empty()) << p;
  }
  ASSERT_EQ(View("a").experiment.state, ExperimentState::kRunning);
  auto rows = store_->ListTasks("a", 2);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 4u);
  const std::vector<std::pair<std::string, int>> want = {
      {"ps", 0}, {"worker", 0}, {"worker", 1}, {"worker", 2}};
  for (int i = 0; i < 4; ++i) {
    const TaskRecord& row = (*rows)[i];
    EXPECT_EQ(row.task, TaskIndex(i)) << "the store keeps the task's index";
    EXPECT_EQ(std::make_pair(row.role, row.index), want[i]) << i;
    EXPECT_EQ(row.node, i < 2 ? "node1" : "node3") << i;
  }
  const ExperimentView v = View("a");
  ASSERT_EQ(v.tasks.size(), 4u);
  const std::vector<int> procs = {0, 1, 4, 5};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(v.tasks[i].task, TaskIndex(i));
    EXPECT_EQ(v.tasks[i].proc_id, ProcId(procs[i])) << "GET shows the agent's SLURM_PROCID";
  }
  // Proc 4's exit is task 2's (worker:1), and is stored as task 2's.
  ASSERT_TRUE(experiments_->OnExited(JobRef("a", 4, 2), 1, std::nullopt, false).ok());
  auto after = store_->ListTasks("a", 2);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)[2].state, TaskState::kFailed);
  EXPECT_EQ((*after)[3].state, TaskState::kRunning);
  bool named = false;
  for (const std::string& why : Whys(View("a"), "exited"))
    named = named || why.find("worker:1 (task 2 on node3)") != std::string::npos;
  EXPECT_TRUE(named) << "the event names the task by its index, on the spare's node";
}

TEST_F(SpareNodesTest, ANodeTheBadNodeMemoryExcludesGivesItsPlaceToASpare) {
  json spec = SpareSpec("a");
  spec["progress"] = {{"stall_timeout_s", 60}};
  spec["restart"]["on"] = {"stalled"};
  ASSERT_TRUE(experiments_->Submit(spec, "alice", false).ok());
  slurm_.SetState(100, JobState::kRunning);
  slurm_.jobs[100].end_time = clock_.NowMs() / 1000 + 3600;
  Poll();
  for (int p = 0; p < 6; ++p) {
    tasks_.push_back(std::make_shared<RecordingChannel>());
    experiments_->OnRegister(JobRef("a", p, 1), Info(p, false), tasks_.back());
  }
  std::vector<std::shared_ptr<RecordingChannel>> spares;
  for (int p = 4; p < 6; ++p) {
    spares.push_back(std::make_shared<RecordingChannel>());
    experiments_->OnRegister(JobRef("a", p, 1), Info(p, true), spares.back());
  }
  // No step at all; node2's tasks stop heartbeating 15 s before the stall
  // (not yet lost), node1's go on: the stall points at node2.
  for (int s = 0; s < 62 && View("a").experiment.state == ExperimentState::kRunning; ++s) {
    for (int p = 0; p < 4; ++p)
      if (p < 2 || s < 45) ASSERT_TRUE(experiments_->OnHeartbeat(JobRef("a", p, 1)).ok());
    Poll();
  }
  for (int p = 0; p < 4; ++p)
    ASSERT_TRUE(experiments_->OnExited(JobRef("a", p, 1), 0, std::nullopt, true).ok());
  std::vector<std::shared_ptr<RecordingChannel>> waiting;
  for (int p = 0; p < 4; ++p) {
    waiting.push_back(std::make_shared<RecordingChannel>());
    experiments_->OnRegister(JobRef("a", p, 1), Info(p, true), waiting.back());
  }
  Poll();
  auto v = View("a");
  ASSERT_EQ(v.attempts.size(), 2u) << v.experiment.reason;
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kStalled);
  EXPECT_TRUE(v.attempts[1].in_place) << "a spare stands in: no new job";
  EXPECT_EQ(slurm_.submitted.size(), 1u);
  EXPECT_EQ(v.attempts[1].node_slots.JobNodeOfSlot(1), 2);
  for (int p = 0; p < 2; ++p) EXPECT_EQ(waiting[p]->All<NextAttemptMsg>().size(), 1u) << p;
  for (int p = 2; p < 4; ++p) {
    EXPECT_TRUE(waiting[p]->All<NextAttemptMsg>().empty()) << p;
    EXPECT_EQ(waiting[p]->All<ReleaseMsg>().size(), 1u) << "node2 leaves the job's attempts";
  }
  for (auto& ch : spares) EXPECT_EQ(ch->All<NextAttemptMsg>().size(), 1u);
}

TEST_F(SpareNodesTest, ASilentNodesPlaceGoesToASpareAndTheNodeLeavesTheSlurmJob) {
  // node2 is cut off from the service only: Slurm still counts it in the
  // job, so tfslurmd takes it out (a job shrink), which ends its processes.
  config_.heartbeat_interval_ms = 1000;
  Restart();
  auto spares = RunWithSpares("a");
  for (int s = 0; s < 13; ++s) {
    for (int p : {0, 1}) ASSERT_TRUE(experiments_->OnHeartbeat(JobRef("a", p, 1)).ok());
    Poll();
  }
  for (int p = 0; p < 2; ++p) {
    ASSERT_EQ(tasks_[p]->All<ShutdownMsg>().size(), 1u) << p;
    EXPECT_TRUE(experiments_->OnExited(JobRef("a", p, 1), 0, std::nullopt, true).ok());
    experiments_->OnRegister(JobRef("a", p, 1), Info(p, true),
                             std::make_shared<RecordingChannel>());
  }
  EXPECT_TRUE(slurm_.shrunk.empty());
  Poll();
  auto v = View("a");
  ASSERT_EQ(v.attempts.size(), 2u) << v.experiment.reason;
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kNodeFail) << v.attempts[0].reason;
  EXPECT_TRUE(v.attempts[1].in_place);
  using Shrunk = std::vector<std::pair<int64_t, std::string>>;
  EXPECT_EQ(slurm_.shrunk, (Shrunk{{100, "node1,node3"}}));
  bool said = false;
  for (const std::string& why : Whys(v, "restart"))
    said = said || why.find(
                       "node3 (a spare) takes node2's place; node2 taken out of Slurm job "
                       "100, whose processes there Slurm ends") != std::string::npos;
  EXPECT_TRUE(said) << v.experiment.reason;
  Poll();
  EXPECT_EQ(slurm_.shrunk.size(), 1u) << "asked once";
  for (auto& ch : spares) EXPECT_EQ(ch->All<NextAttemptMsg>().size(), 1u);
}

TEST_F(SpareNodesTest, WithNoSpareWaitingTheRestartGoesToANewJob) {
  RunWithSpares("a", /*spares_wait=*/false);
  auto waiting = FailNode2("a");
  Poll();
  ASSERT_EQ(slurm_.cancelled.size(), 1u);
  for (auto& ch : waiting) EXPECT_EQ(ch->All<ReleaseMsg>().size(), 1u);
  bool said = false;
  for (const std::string& why : Whys(View("a"), "restart"))
    said = said || why.find("too few spare nodes wait in it") != std::string::npos;
  EXPECT_TRUE(said) << View("a").experiment.reason;
}

TEST_F(SpareNodesTest, ASpareThatRegistersBeforeAnyTaskWaits) {
  ASSERT_TRUE(experiments_->Submit(SpareSpec("a"), "alice", false).ok());
  // No poll has seen the job run, and no task proved it yet.
  auto first = std::make_shared<RecordingChannel>();
  experiments_->OnRegister(JobRef("a", 5, 1), Info(5, false), first);
  EXPECT_EQ(first->All<SpareMsg>().size(), 1u);
  auto standby = std::make_shared<RecordingChannel>();
  experiments_->OnRegister(JobRef("a", 5, 1), Info(5, true), standby);
  EXPECT_TRUE(standby->All<ReleaseMsg>().empty()) << "the attempt has not ended";
  EXPECT_EQ(View("a").spares.size(), 1u);
}

TEST_F(SpareNodesTest, SparesAreReleasedWhenTrainingSucceeds) {
  auto spares = RunWithSpares("a");
  for (int p = 0; p < 4; ++p)
    ASSERT_TRUE(experiments_->OnExited(JobRef("a", p, 1), 0, std::nullopt, false).ok());
  EXPECT_EQ(View("a").experiment.state, ExperimentState::kSucceeded);
  for (auto& ch : spares) EXPECT_EQ(ch->All<ReleaseMsg>().size(), 1u) << "else the job never ends";
}

}  // namespace
}  // namespace tfslurm

namespace tfslurm {
namespace {

class ResumeChangesTest : public ExperimentsTest {
 protected:
  // Experiment "a" (PsSpec), its attempt 1 failed for good.
  void SubmitAndFail() {
    ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
    slurm_.SetState(100, JobState::kFailed, 1);
    Poll();
    ASSERT_EQ(View("a").experiment.state, ExperimentState::kFailed);
  }
};

TEST_F(ResumeChangesTest, TheChangedSpecIsTheNextRevisionAndTheNewAttemptRunsIt) {
  ASSERT_NO_FATAL_FAILURE(SubmitAndFail());
  json changes = {{"resources", {{"time_limit", "02:00:00"}}},
                  {"command", {"python3", "train.py", "--steps", "2000"}},
                  {"env", {{"LR", "0.1"}}},
                  {"restart", {{"max_restarts", 5}}}};
  auto attempt = experiments_->Resume("a", changes);
  ASSERT_TRUE(attempt.ok()) << attempt.status().message();
  EXPECT_EQ(attempt->spec_revision, 2);
  EXPECT_EQ(slurm_.submitted.back().time_limit_minutes, 120);
  auto v = View("a");
  EXPECT_EQ(v.experiment.spec_revision, 2);
  ASSERT_EQ(v.attempts.size(), 2u);
  EXPECT_EQ(v.attempts[0].spec_revision, 1) << "attempt 1 ran the spec as submitted";
  EXPECT_EQ(v.attempts[1].spec_revision, 2);
  ASSERT_EQ(v.spec_revisions.size(), 2u);
  const std::string& what = v.spec_revisions[1].changes;
  EXPECT_NE(what.find("resources.time_limit \"01:00:00\" -> \"02:00:00\""), std::string::npos)
      << what;
  EXPECT_NE(what.find("restart.max_restarts 1 -> 5"), std::string::npos) << what;
  EXPECT_NE(what.find("env.LR"), std::string::npos) << what;
  EXPECT_EQ(what.find("0.1"), std::string::npos) << "an env value may be a secret: " << what;
  EXPECT_NE(v.experiment.reason.find("spec revision 2"), std::string::npos) << v.experiment.reason;
  json spec = json::parse(v.experiment.spec_json);
  EXPECT_EQ(spec["restart"]["max_restarts"], 5);
  EXPECT_EQ(spec["env"]["LR"], "0.1");
  // Both revisions are stored whole.
  auto stored = store_->ListSpecRevisions("a");
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ(json::parse(stored->at(0).spec_json)["resources"]["time_limit"], "01:00:00");
  EXPECT_EQ(json::parse(stored->at(1).spec_json)["resources"]["time_limit"], "02:00:00");
  // The tasks get the new command and environment.
  auto channels = RegisterAll("a", 2);
  auto assigned = channels[0]->All<AssignmentMsg>();
  ASSERT_EQ(assigned.size(), 1u);
  EXPECT_EQ(assigned[0].command,
            (std::vector<std::string>{"python3", "train.py", "--steps", "2000"}));
  EXPECT_EQ(assigned[0].env.at("LR"), "0.1");
}

TEST_F(ResumeChangesTest, AChangeThatWouldNotFitTheCheckpointIsRefusedAndNothingIsStored) {
  ASSERT_NO_FATAL_FAILURE(SubmitAndFail());
  json changes = {{"cluster", {{"worker", 2}}},
                  {"resources", {{"nodes", 2}, {"time_limit", "02:00:00"}}},
                  {"model_dir", "/elsewhere"}};
  auto attempt = experiments_->Resume("a", changes);
  ASSERT_EQ(attempt.status().code(), StatusCode::kInvalidArgument);
  std::set<std::string> fields;
  for (const FieldError& f : attempt.status().fields()) {
    fields.insert(f.field);
    EXPECT_NE(f.reason.find("cannot change on resume"), std::string::npos) << f.reason;
  }
  EXPECT_EQ(fields, (std::set<std::string>{"cluster.worker", "resources.nodes", "model_dir"}))
      << attempt.status().message();
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed);
  EXPECT_EQ(v.experiment.spec_revision, 1);
  EXPECT_EQ(v.attempts.size(), 1u);
  EXPECT_EQ(slurm_.submitted.size(), 1u);
  EXPECT_EQ(store_->ListSpecRevisions("a")->size(), 1u);
}

TEST_F(ResumeChangesTest, ChangesAreCheckedAsANewSpecNamingTheField) {
  ASSERT_NO_FATAL_FAILURE(SubmitAndFail());
  // One minute is shorter than the default 120 s grace the user never set.
  auto short_limit = experiments_->Resume("a", {{"resources", {{"time_limit", "1"}}}});
  ASSERT_EQ(short_limit.status().code(), StatusCode::kInvalidArgument);
  ASSERT_FALSE(short_limit.status().fields().empty());
  EXPECT_EQ(short_limit.status().fields()[0].field, "checkpoint.signal_grace_s");
  auto negative = experiments_->Resume("a", {{"restart", {{"max_restarts", -1}}}});
  ASSERT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.status().fields().at(0).field, "restart.max_restarts");
  auto unknown = experiments_->Resume("a", {{"restart", {{"max_restart", 2}}}});
  ASSERT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().fields().at(0).field, "restart.max_restart");
  EXPECT_EQ(experiments_->Resume("a", json::array()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(View("a").attempts.size(), 1u) << "nothing stored for a refused change";
  // The same spec again is no new revision.
  auto same = experiments_->Resume("a", json::object());
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_EQ(same->spec_revision, 1);
}

class DeleteTest : public ResumeChangesTest {};

TEST_F(DeleteTest, AnEndedExperimentGoesWithItsFilesAndItsIdIsFree) {
  RecordingMetrics metrics;
  metrics_ = &metrics;
  Restart();
  ASSERT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
  auto open = experiments_->Delete("a", true);
  ASSERT_EQ(open.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(open.status().message().find("is queued"), std::string::npos)
      << open.status().message();
  slurm_.SetState(100, JobState::kFailed, 1);
  Poll();
  ASSERT_EQ(View("a").experiment.state, ExperimentState::kFailed);
  const std::string dir = (dir_ / "out" / "a").string();
  auto deleted = experiments_->Delete("a", true);
  ASSERT_TRUE(deleted.ok()) << deleted.status().message();
  EXPECT_EQ(deleted->files_removed_from, dir);
  EXPECT_EQ(files_.set_aside, (std::vector<std::string>{dir}));
  EXPECT_EQ(files_.removed.at(dir + ".aside"), "alice") << "removed as the owner's account";
  EXPECT_EQ(experiments_->Get("a").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->ListSpecRevisions("a")->empty());
  EXPECT_EQ(metrics.deleted, (std::vector<std::pair<bool, int64_t>>{{false, 1}}));
  EXPECT_EQ(experiments_->Delete("a", false).status().code(), StatusCode::kNotFound);
  // The id is free again.
  EXPECT_TRUE(experiments_->Submit(PsSpec("a"), "alice", false).ok());
}

TEST_F(DeleteTest, WithoutFilesOnlyTheRecordGoes) {
  ASSERT_NO_FATAL_FAILURE(SubmitAndFail());
  auto deleted = experiments_->Delete("a", false);
  ASSERT_TRUE(deleted.ok()) << deleted.status().message();
  EXPECT_EQ(deleted->files_removed_from, "");
  EXPECT_TRUE(files_.set_aside.empty());
  EXPECT_TRUE(files_.removed.empty());
}

TEST_F(DeleteTest, TheRetentionSweepDeletesRowsOfExperimentsEndedLongAgoOnly) {
  config_.retain_ended_ms = 24 * 3600 * 1000;
  Restart();
  ASSERT_NO_FATAL_FAILURE(SubmitAndFail());  // "a", job 100
  clock_.Advance(config_.retain_ended_ms / 2);
  ASSERT_TRUE(experiments_->Submit(PsSpec("b"), "alice", false).ok());  // job 101, stays queued
  experiments_->Tick();
  EXPECT_TRUE(experiments_->Get("a").ok()) << "ended half a day ago: kept";
  clock_.Advance(config_.retain_ended_ms / 2 + config_.retention_sweep_ms);
  experiments_->Tick();
  EXPECT_EQ(experiments_->Get("a").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(experiments_->Get("b").ok()) << "an open experiment is never swept";
  EXPECT_TRUE(files_.removed.empty()) << "the sweep keeps the files";
}

}  // namespace
}  // namespace tfslurm

namespace tfslurm {
namespace {

// A TF worker restarted alone (restart.max_task_restarts, core/lone_restart.h).
// PsSpec, spread: ps 0 and 1 are tasks 0 and 2, workers 0-3 tasks 1, 3, 4
// and 5; worker 0 reports, as there is no chief; in_allocation false, so
// only the tasks that may restart alone stay.
class LoneRestartTest : public ExperimentsTest {
 protected:
  static json Spec(const std::string& id, int max_task_restarts) {
    json spec = PsSpec(id);
    spec["restart"]["max_task_restarts"] = max_task_restarts;
    return spec;
  }
  // Submits `spec` (the n-th submission: Slurm job 100 + n), starts its job
  // and registers every task.
  std::vector<std::shared_ptr<RecordingChannel>> Running(const json& spec, int n = 0) {
    EXPECT_TRUE(experiments_->Submit(spec, "alice", false).ok());
    attempt_offset_ = n;
    slurm_.SetState(100 + n, JobState::kRunning);
    Poll();
    return RegisterAll(spec["id"]);
  }
  // Task `proc`'s agent, its program reported dead, comes back in standby.
  std::shared_ptr<RecordingChannel> StandBy(const std::string& id, int proc) {
    auto ch = std::make_shared<RecordingChannel>();
    RegisterInfo info;
    info.node_name = "node" + std::to_string(proc / 2 + 1);
    info.address = "host" + std::to_string(proc / 2 + 1);
    info.port = 5000 + proc;
    info.standby = true;
    experiments_->OnRegister(Ref(id, proc), info, ch);
    return ch;
  }
  int EventsNamed(const ExperimentView& v, const std::string& what) {
    return static_cast<int>(
        std::count_if(v.events.begin(), v.events.end(),
                      [&](const EventRecord& e) { return EventCodeName(e.what) == what; }));
  }
};

TEST_F(LoneRestartTest, AKilledWorkerRestartsAloneAndTheAttemptRunsOn) {
  RecordingMetrics m;
  metrics_ = &m;
  Restart();
  auto channels = Running(Spec("a", 2));
  for (int p = 0; p < 6; ++p) {
    auto assigned = channels[p]->All<AssignmentMsg>();
    ASSERT_EQ(assigned.size(), 1u) << p;
    // Only workers but the reporting one may restart alone: their agents stay.
    EXPECT_EQ(assigned[0].stay_for_next_attempt, p == 3 || p == 4 || p == 5) << p;
  }
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 4), std::nullopt, SIGKILL, false).ok());
  auto v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kRunning) << v.experiment.reason;
  EXPECT_EQ(v.tasks[4].restarts, 1);
  EXPECT_EQ(v.tasks[4].state, TaskState::kRunning);
  ASSERT_EQ(EventsNamed(v, "restarted_alone"), 1);
  EXPECT_EQ(v.events.back().why,
            "worker:2 (task 4 on node3) was killed by signal 9; its program starts again alone at "
            "host3:5004 (restart 1 of 2 in this attempt), and the chief trains on");
  EXPECT_EQ(m.alone, std::vector<std::string>{"worker"});
  // A re-sent report (the ack was lost) counts once.
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 4), std::nullopt, SIGKILL, false).ok());
  EXPECT_EQ(View("a").tasks[4].restarts, 1);
  for (int p = 0; p < 6; ++p) EXPECT_TRUE(channels[p]->All<ShutdownMsg>().empty()) << p;

  // Its agent comes back in standby and is given its Assignment again.
  auto again = StandBy("a", 4);
  auto assigned = again->All<AssignmentMsg>();
  ASSERT_EQ(assigned.size(), 1u);
  EXPECT_EQ(assigned[0].role, "worker");
  EXPECT_EQ(assigned[0].index, 2);
  EXPECT_EQ(assigned[0].cluster->json, channels[4]->All<AssignmentMsg>()[0].cluster->json)
      << "the same TF_CONFIG: the same addresses";
  EXPECT_TRUE(experiments_->OnHeartbeat(Ref("a", 4)).ok());
  Poll();
  v = View("a");
  EXPECT_EQ(v.attempts.size(), 1u);
  EXPECT_EQ(slurm_.submitted.size(), 1u);
  EXPECT_TRUE(slurm_.cancelled.empty());
  EXPECT_EQ(v.experiment.state, ExperimentState::kRunning);

  // Every worker exits 0 (the reporting one last): success, in attempt 1.
  for (int p = 3; p < 6; ++p)
    ASSERT_TRUE(experiments_->OnExited(Ref("a", p), 0, std::nullopt, false).ok());
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 1), 0, std::nullopt, false).ok());
  v = View("a");
  EXPECT_EQ(v.experiment.state, ExperimentState::kSucceeded) << v.experiment.reason;
  EXPECT_EQ(v.tasks[4].state, TaskState::kSucceeded);
}

TEST_F(LoneRestartTest, PastTheCapTheDeathCountsAsTheTasksExit) {
  Running(Spec("a", 1));
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 3), std::nullopt, SIGKILL, false).ok());
  StandBy("a", 3);
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 5), 137, std::nullopt, false).ok());
  auto v = View("a");
  EXPECT_EQ(v.tasks[5].restarts, 0);
  EXPECT_EQ(v.tasks[5].state, TaskState::kFailed);
  bool said = false;
  for (const EventRecord& e : v.events)
    said |= e.what == EventCode::kRestart &&
            e.why.find(
                "not restarted alone: 1 of 1 lone restarts of this attempt are used "
                "(restart.max_task_restarts)") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_NE(
      v.experiment.reason.find("attempt 1 failed: worker:3 (task 5 on node3) exited with code 137"),
      std::string::npos)
      << v.experiment.reason;
}

TEST_F(LoneRestartTest, ASigtermOrAProgramsOwnExitCodeIsNotRestartedAlone) {
  // Exit 1 is the program's own verdict.
  Running(Spec("a", 3));
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 3), 1, std::nullopt, false).ok());
  // SIGTERM is Slurm's at a time limit or a preemption; the job's end decides.
  Running(Spec("b", 3), 1);
  ASSERT_TRUE(experiments_->OnExited(Ref("b", 3), std::nullopt, SIGTERM, false).ok());
  for (const char* id : {"a", "b"}) {
    auto v = View(id);
    EXPECT_EQ(v.tasks[3].restarts, 0) << id;
    EXPECT_EQ(v.tasks[3].state, TaskState::kFailed) << id;
    EXPECT_EQ(EventsNamed(v, "restarted_alone"), 0) << id;
  }
}

TEST_F(LoneRestartTest, TheReportingTaskAndThePsRestartTheAttempt) {
  Running(Spec("a", 3));
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 0), std::nullopt, SIGKILL, false).ok());  // ps 0
  auto v = View("a");
  EXPECT_EQ(EventsNamed(v, "restarted_alone"), 0);
  EXPECT_NE(v.experiment.reason.find("attempt 1 failed: ps:0"), std::string::npos)
      << v.experiment.reason;
}

TEST_F(LoneRestartTest, NoLoneRestartWhileAPsIsGone) {
  auto channels = Running(Spec("a", 3));
  experiments_->OnDisconnect(Ref("a", 2), channels[2].get());  // ps 1's agent vanished
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 3), std::nullopt, SIGKILL, false).ok());
  EXPECT_EQ(View("a").tasks[3].restarts, 0);
}

TEST_F(LoneRestartTest, AnAttemptThatEndsWhileTheProgramIsDownDoesNotStartItAgain) {
  auto channels = Running(Spec("a", 3));
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 3), std::nullopt, SIGKILL, false).ok());
  // Worker 0 (the reporting task) fails before worker 1's agent is back.
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 1), 1, std::nullopt, false).ok());
  // It is reaped with the others (TaskPhase::kStoppingAlone), once.
  EXPECT_EQ(channels[3]->All<ShutdownMsg>().size(), 1u);
  auto back = StandBy("a", 3);
  EXPECT_TRUE(back->All<AssignmentMsg>().empty());
  EXPECT_EQ(back->All<ReleaseMsg>().size(), 1u) << "in_allocation false: nothing follows here";
  auto v = View("a");
  EXPECT_EQ(v.tasks[3].state, TaskState::kFailed);
  EXPECT_EQ(v.tasks[3].signal, SIGKILL);
}

TEST_F(LoneRestartTest, AServiceRestartBetweenTheDeathAndTheStandbyStillRestartsIt) {
  Running(Spec("a", 3));
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 3), std::nullopt, SIGKILL, false).ok());
  EXPECT_EQ(View("a").tasks[3].signal, SIGKILL) << "the death is on record while it restarts";
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  auto back = StandBy("a", 3);
  ASSERT_EQ(back->All<AssignmentMsg>().size(), 1u);
  auto v = View("a");
  EXPECT_EQ(v.tasks[3].state, TaskState::kRunning);
  EXPECT_FALSE(v.tasks[3].signal.has_value()) << "running again: no death on record";
  EXPECT_EQ(v.tasks[3].restarts, 1);
}

TEST_F(LoneRestartTest, TheCountSurvivesAServiceRestart) {
  Running(Spec("a", 1));
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 3), std::nullopt, SIGKILL, false).ok());
  StandBy("a", 3);
  Restart();
  ASSERT_TRUE(experiments_->Recover().ok());
  RegisterAll("a");
  ASSERT_TRUE(experiments_->OnExited(Ref("a", 4), std::nullopt, SIGKILL, false).ok());
  auto v = View("a");
  EXPECT_EQ(v.tasks[3].restarts, 1);
  EXPECT_EQ(v.tasks[4].restarts, 0) << "the cap (1) was used before the restart";
  EXPECT_EQ(v.tasks[4].state, TaskState::kFailed);
}

}  // namespace
}  // namespace tfslurm
