// Core's half of issue 45: in site mode only the job's uid may act for its
// tasks, whatever secret it holds; and a job whose agents could not verify
// the service ends startup_error with the reason from task 0's log.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "schema/agent_exit.h"
#include "service/core/core.h"
#include "tests/unit/core_test.h"

namespace tfslurm {
namespace {

using nlohmann::json;
using testing::RecordingChannel;

json Spec(const std::string& id) {
  return {{"id", id},
          {"command", {"python3", "train.py"}},
          {"cluster", {{"worker", 2}}},
          {"resources", {{"partition", "debug"}, {"nodes", 1}, {"tasks_per_node", 2}}},
          {"restart", {{"max_restarts", 0}}}};
}

class AgentTrustTest : public testing::CoreTest {
 protected:
  AgentTrustTest() : CoreTest("agent-trust-test") {}
  void SetUp() override { CoreTest::SetUp(); }
  void TearDown() override {
    experiments_.reset();
    CoreTest::TearDown();
  }
  void Start(bool prove_uid) {
    config_.agents_prove_uid = prove_uid;
    experiments_ = NewCore(Ports(), config_, nullptr);
    ASSERT_TRUE(experiments_->Submit(Spec("a"), "alice", false).ok());
    slurm_.SetState(100, JobState::kRunning);
    Poll();
  }
  void Poll() {
    clock_.Advance(config_.poll_interval_ms);
    experiments_->Tick();
  }
  TaskRef Ref(int proc, std::optional<uint32_t> uid) {
    TaskRef r{"a", 1, testing::FakeSlurm::SecretOf(slurm_.submitted.at(0)), ProcId(proc)};
    r.proven_uid = uid;
    return r;
  }
  std::vector<RefusedMsg> Register(const TaskRef& ref) {
    auto ch = std::make_shared<RecordingChannel>();
    RegisterInfo info;
    info.node_name = "node1";
    info.address = "node1";
    info.port = 5000 + ref.proc_id.value();
    experiments_->OnRegister(ref, info, ch);
    return ch->All<RefusedMsg>();
  }

  std::unique_ptr<Core> experiments_;
};

TEST_F(AgentTrustTest, SiteModeRefusesTheRightSecretFromAnotherUid) {
  ASSERT_NO_FATAL_FAILURE(Start(/*prove_uid=*/true));
  const uint32_t alice = accounts_.ForOwner("alice")->uid;
  const uint32_t bob = accounts_.ForOwner("bob")->uid;
  auto from_bob = Register(Ref(0, bob));
  ASSERT_EQ(from_bob.size(), 1u);
  EXPECT_TRUE(from_bob[0].permanent);
  EXPECT_EQ(from_bob[0].reason, "site mode: only uid " + std::to_string(alice) +
                                    " may act for 'a' attempt 1 task 0; this agent runs as uid " +
                                    std::to_string(bob));
  auto unproven = Register(Ref(0, std::nullopt));
  ASSERT_EQ(unproven.size(), 1u);
  EXPECT_NE(unproven[0].reason.find("carries none"), std::string::npos);
  EXPECT_TRUE(Register(Ref(0, alice)).empty());
  EXPECT_EQ(experiments_->OnHeartbeat(Ref(0, bob)).code(), StatusCode::kPermissionDenied)
      << "a report from another uid is refused as a registration is";
  EXPECT_TRUE(experiments_->OnHeartbeat(Ref(0, alice)).ok());
}

TEST_F(AgentTrustTest, PersonalModeKeepsTheSecretAlone) {
  ASSERT_NO_FATAL_FAILURE(Start(/*prove_uid=*/false));
  EXPECT_TRUE(Register(Ref(0, std::nullopt)).empty());
  EXPECT_TRUE(Register(Ref(1, 4242)).empty());
}

TEST_F(AgentTrustTest, AgentsThatCouldNotVerifyTheServiceEndItStartupErrorWithTheirReason) {
  ASSERT_NO_FATAL_FAILURE(Start(false));
  files_.files[config_.output_root + "/a/logs/attempt-1/task-0.out"] =
      "[tfslurm-agent exp=a attempt=1 proc=0] 2026-11-28T05:00:00.000 info: Slurm job 100 task 0\n"
      "[tfslurm-agent exp=a attempt=1 proc=0] 2026-11-28T05:00:00.100 error: " +
      std::string(kUnverifiedServiceLine) +
      "svc:1: certificate has expired (CN=tfslurmd, on 2026-11-01 00:00:00 UTC) (checked "
      "against TFSLURM_CA); not registering\n";
  slurm_.SetState(100, JobState::kFailed, kAgentExitUnverifiedService);
  Poll();
  ExperimentView v = experiments_->Get("a").value();
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed);
  ASSERT_EQ(v.attempts.size(), 1u);
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kStartupError);
  EXPECT_EQ(v.attempts[0].reason,
            "Slurm job 100: no agent registered, they could not verify tfslurmd's TLS "
            "certificate with the job's TFSLURM_CA (tfslurm-agent exit 4): cannot verify the "
            "service at svc:1: certificate has expired (CN=tfslurmd, on 2026-11-01 00:00:00 UTC) "
            "(checked against TFSLURM_CA); not registering");
}

TEST_F(AgentTrustTest, ExitFourFromAProgramThatRanIsItsOwnExit) {
  ASSERT_NO_FATAL_FAILURE(Start(false));
  ASSERT_TRUE(Register(Ref(0, std::nullopt)).empty());
  slurm_.SetState(100, JobState::kFailed, kAgentExitUnverifiedService);
  Poll();
  ExperimentView v = experiments_->Get("a").value();
  ASSERT_EQ(v.attempts.size(), 1u);
  EXPECT_NE(v.attempts[0].end_reason, EndReason::kStartupError);
  EXPECT_EQ(v.attempts[0].reason.find("could not verify"), std::string::npos);
}

TEST_F(AgentTrustTest, WithoutTheLogLineTheReasonSaysWhereToLook) {
  ASSERT_NO_FATAL_FAILURE(Start(false));
  slurm_.SetState(100, JobState::kFailed, kAgentExitUnverifiedService);
  Poll();
  ExperimentView v = experiments_->Get("a").value();
  ASSERT_EQ(v.attempts.size(), 1u);
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kStartupError);
  EXPECT_NE(v.attempts[0].reason.find("(tfslurm-agent exit 4); the tasks' logs say why"),
            std::string::npos)
      << v.attempts[0].reason;
}

// Issue 44: the agent inside a pyxis container fails before registering
// (here the service refused it: in site mode its uid unproven, as when
// munged's socket is not in the container). Every start would fail alike:
// startup_error in the agent's own words, not retried.
TEST_F(AgentTrustTest, AnAgentFailingInItsContainerBeforeRegisteringIsAStartupErrorInItsWords) {
  config_.agents_prove_uid = true;
  experiments_ = NewCore(Ports(), config_, nullptr);
  json spec = Spec("a");
  spec["container"] = {{"image", "nvcr.io#nvidia/tensorflow:24.01-tf2-py3"}, {"runtime", "pyxis"}};
  spec["restart"] = {{"max_restarts", 3}};
  ASSERT_TRUE(experiments_->Submit(spec, "alice", false).ok());
  slurm_.SetState(100, JobState::kRunning);
  Poll();
  files_.files[config_.output_root + "/a/logs/attempt-1/task-0.out"] =
      "[tfslurm-agent exp=a attempt=1 proc=0] 2026-11-28T05:00:00.000 info: Slurm job 100 task 0\n"
      "[tfslurm-agent exp=a attempt=1 proc=0] 2026-11-28T05:00:00.100 error: the service refused "
      "this task: site mode: the registration carries no proven uid\n"
      "[tfslurm-agent exp=a attempt=1 proc=0] 2026-11-28T05:00:00.101 info: exiting 3\n";
  slurm_.SetState(100, JobState::kFailed, kAgentExitRefused);
  Poll();
  ExperimentView v = experiments_->Get("a").value();
  EXPECT_EQ(v.experiment.state, ExperimentState::kFailed);
  ASSERT_EQ(v.attempts.size(), 1u) << "not retried: max_restarts 3 does not cover a startup_error";
  EXPECT_EQ(v.attempts[0].end_reason, EndReason::kStartupError);
  EXPECT_EQ(v.attempts[0].reason,
            "Slurm job 100: no task's agent registered from the container (tfslurm-agent exit 3): "
            "the service refused this task: site mode: the registration carries no proven uid");
}

TEST_F(AgentTrustTest, ExitThreeWithoutAContainerIsNotTheAgentsStartup) {
  ASSERT_NO_FATAL_FAILURE(Start(false));  // no container
  slurm_.SetState(100, JobState::kFailed, kAgentExitRefused);
  Poll();
  ExperimentView v = experiments_->Get("a").value();
  ASSERT_EQ(v.attempts.size(), 1u);
  EXPECT_NE(v.attempts[0].end_reason, EndReason::kStartupError) << v.attempts[0].reason;
}

TEST_F(AgentTrustTest, TheSecretTravelsInTheOwnersFileNotInTheJobsEnvironment) {
  ASSERT_NO_FATAL_FAILURE(Start(false));
  const SubmitRequest& r = slurm_.submitted.at(0);
  const std::string path = config_.output_root + "/a/logs/attempt-1/attempt.secret";
  ASSERT_TRUE(files_.files.contains(path));
  const std::string secret = files_.files[path];
  ASSERT_FALSE(secret.empty());
  EXPECT_EQ(files_.created_as[path], accounts_.ForOwner("alice")->user);
  EXPECT_NE(std::find(r.environment.begin(), r.environment.end(), "TFSLURM_SECRET_FILE=" + path),
            r.environment.end());
  for (const std::string& e : r.environment)
    EXPECT_EQ(e.find(secret), std::string::npos) << "the secret in the job's environment: " << e;
  EXPECT_EQ(r.script.find(secret), std::string::npos);
  EXPECT_TRUE(Register(Ref(0, std::nullopt)).empty()) << "the file's secret is the attempt's";
}

}  // namespace
}  // namespace tfslurm
