#include "service/core/attempt_run.h"

#include <gtest/gtest.h>

#include <csignal>
#include <map>

namespace tfslurm {
namespace {

ExperimentSpec PsSpec(SuccessPolicy policy = SuccessPolicy::kAuto, int chief = 0) {
  ExperimentSpec s;
  s.id = "exp";
  s.cluster = {chief, 2, 4 - chief, 0};
  s.resources.nodes = 3;
  s.resources.tasks_per_node = 2;
  s.placement.kind = PlacementKind::kPack;  // [chief] ps0 ps1 workers...
  s.success = policy;
  return s;
}

std::vector<TaskIndex> Tasks(std::initializer_list<int> indices) {
  std::vector<TaskIndex> out;
  for (int i : indices) out.push_back(TaskIndex(i));
  return out;
}

void RegisterAll(AttemptRun& run) {
  for (int i = 0; i < run.size(); ++i) {
    bool done = run.Register(TaskIndex(i), "node" + std::to_string(i / 2 + 1),
                             "h:" + std::to_string(1000 + i), i / 2, i % 2);
    EXPECT_EQ(done, i == run.size() - 1);
  }
  run.MarkAssigned();
}

TEST(AttemptRun, BarrierCompletesOnLastRegistrationOnly) {
  AttemptRun run(PsSpec(), 1);
  EXPECT_EQ(run.MissingRegistrations().size(), 6u);
  RegisterAll(run);
  EXPECT_TRUE(run.MissingRegistrations().empty());
  // Registering again (a reconnect) does not complete the barrier again.
  EXPECT_FALSE(run.Register(TaskIndex(3), "node2", "h:1003", 1, 1));
}

TEST(AttemptRun, AutoWithoutChiefNeedsEveryWorker) {
  AttemptRun run(PsSpec(), 1);
  RegisterAll(run);
  for (int w = 2; w < 5; ++w)
    EXPECT_EQ(run.OnExit(TaskIndex(w), 0, std::nullopt, false).kind, Outcome::kUndecided);
  Outcome o = run.OnExit(TaskIndex(5), 0, std::nullopt, false);
  EXPECT_EQ(o.kind, Outcome::kSucceeded);
  // The ps are still running: they are what is reaped.
  EXPECT_EQ(run.TasksToReap(), (Tasks({0, 1})));
}

TEST(AttemptRun, AutoWithChiefWaitsForChiefOnly) {
  AttemptRun run(PsSpec(SuccessPolicy::kAuto, 1), 1);
  RegisterAll(run);
  EXPECT_EQ(run.task(TaskIndex(0)).role.role, "chief");
  EXPECT_EQ(run.OnExit(TaskIndex(4), 1, std::nullopt, false).kind, Outcome::kUndecided)
      << "worker under auto+chief";
  EXPECT_EQ(run.OnExit(TaskIndex(0), 0, std::nullopt, false).kind, Outcome::kSucceeded);
  EXPECT_EQ(run.TasksToReap().size(), 4u);
}

TEST(AttemptRun, Worker0Policy) {
  AttemptRun run(PsSpec(SuccessPolicy::kWorker0), 1);
  RegisterAll(run);
  EXPECT_EQ(run.OnExit(TaskIndex(3), 0, std::nullopt, false).kind, Outcome::kUndecided);  // worker1
  EXPECT_EQ(run.OnExit(TaskIndex(2), 0, std::nullopt, false).kind, Outcome::kSucceeded);  // worker0
}

TEST(AttemptRun, PsFailureFailsFastAndIsNotRetryableForExitOne) {
  AttemptRun run(PsSpec(), 1);
  RegisterAll(run);
  Outcome o = run.OnExit(TaskIndex(0), 1, std::nullopt, false);
  EXPECT_EQ(o.kind, Outcome::kFailed);
  EXPECT_EQ(o.failure, EndReason::kPermanentExit);
  EXPECT_NE(o.reason.find("ps:0"), std::string::npos) << o.reason;
  EXPECT_NE(o.reason.find("exited with code 1"), std::string::npos) << o.reason;
  EXPECT_EQ(run.TasksToReap().size(), 5u);
}

// Found by bench/soak.py: kill -9 of a ps's agent takes the ps program with
// it (PR_SET_PDEATHSIG) without any exit report; a worker then fails with
// exit 1 on the refused connection, and that report used to decide the
// attempt as permanent_exit, never restarted.
TEST(AttemptRun, AFailureAfterAnotherAgentVanishedIsRetryableAndNamesIt) {
  AttemptRun run(PsSpec(), 1);
  RegisterAll(run);
  run.SetVanished(TaskIndex(1), true);  // ps:1's stream ended without an exit report
  Outcome o = run.OnExit(TaskIndex(3), 1, std::nullopt, false);
  EXPECT_EQ(o.kind, Outcome::kFailed);
  EXPECT_EQ(o.failure, EndReason::kRetryableExit);
  EXPECT_NE(o.reason.find("worker:1 (task 3 on node2) exited with code 1, after the agent of ps:1 "
                          "(task 1 on node1) had vanished"),
            std::string::npos)
      << o.reason;
}

TEST(AttemptRun, AVanishedAgentThatCameBackChangesNothing) {
  AttemptRun run(PsSpec(), 1);
  RegisterAll(run);
  run.SetVanished(TaskIndex(1), true);
  EXPECT_FALSE(run.Register(TaskIndex(1), "node1", "h:1001", 0, 1));  // it reconnected
  Outcome o = run.OnExit(TaskIndex(3), 1, std::nullopt, false);
  EXPECT_EQ(o.kind, Outcome::kFailed);
  EXPECT_EQ(o.failure, EndReason::kPermanentExit) << o.reason;
}

TEST(AttemptRun, AVanishedAgentDoesNotExcuseItsOwnFailure) {
  AttemptRun run(PsSpec(), 1);
  RegisterAll(run);
  run.SetVanished(TaskIndex(3), true);  // its stream broke, then its report came on a new one
  Outcome o = run.OnExit(TaskIndex(3), 1, std::nullopt, false);
  EXPECT_EQ(o.failure, EndReason::kPermanentExit) << o.reason;
}

TEST(AttemptRun, AStartupFailureBeforeTheFirstStepIsAStartupError) {
  AttemptRun run(PsSpec(), 1);
  RegisterAll(run);
  Outcome o =
      run.OnExit(TaskIndex(3), 1, std::nullopt, false, "ModuleNotFoundError: No module named 'tf'",
                 /*at_startup=*/true);
  EXPECT_EQ(o.kind, Outcome::kFailed);
  EXPECT_EQ(o.failure, EndReason::kStartupError) << o.reason;
  EXPECT_TRUE(run.task(TaskIndex(3)).failed_at_startup());
}

TEST(AttemptRun, TheSameFailureAfterAStepIsAPermanentExit) {
  // A module imported late, after training began: the start-up worked.
  AttemptRun run(PsSpec(), 1);
  RegisterAll(run);
  run.MarkStepTrained();
  Outcome o =
      run.OnExit(TaskIndex(3), 1, std::nullopt, false, "ImportError: x", /*at_startup=*/true);
  EXPECT_EQ(o.failure, EndReason::kPermanentExit) << o.reason;
  EXPECT_FALSE(run.task(TaskIndex(3)).failed_at_startup());
}

TEST(AttemptRun, AStartupFailureAfterAnotherAgentVanishedIsRetryable) {
  AttemptRun run(PsSpec(), 1);
  RegisterAll(run);
  run.SetVanished(TaskIndex(1), true);
  Outcome o =
      run.OnExit(TaskIndex(3), 127, std::nullopt, false, "cannot run 'x'", /*at_startup=*/true);
  EXPECT_EQ(o.failure, EndReason::kRetryableExit) << o.reason;
}

TEST(AttemptRun, KilledTaskIsRetryable) {
  AttemptRun run(PsSpec(), 1);
  RegisterAll(run);
  Outcome o = run.OnExit(TaskIndex(4), std::nullopt, 9, false);
  EXPECT_EQ(o.kind, Outcome::kFailed);
  EXPECT_EQ(o.failure, EndReason::kRetryableExit);
  EXPECT_TRUE(IsRetryableExit(137, std::nullopt));
  EXPECT_TRUE(IsRetryableExit(143, std::nullopt));
  for (int code : {1, 2, 126, 127}) EXPECT_FALSE(IsRetryableExit(code, std::nullopt)) << code;
}

// SIGUSR1 is Slurm's warning before the time limit (checkpoint.signal_grace_s):
// a program killed by it ends where the limit would have ended it, and the
// reason says what it was and what to do (agent/README.md).
TEST(AttemptRun, ATaskKilledByTheTimeLimitWarningIsATimeoutThatSaysWhatToDo) {
  AttemptRun run(PsSpec(), 1);
  RegisterAll(run);
  Outcome o = run.OnExit(TaskIndex(4), std::nullopt, SIGUSR1, false);
  EXPECT_EQ(o.kind, Outcome::kFailed);
  EXPECT_EQ(o.failure, EndReason::kTimeout);
  EXPECT_FALSE(o.by_sigterm);
  EXPECT_NE(o.reason.find("was killed by SIGUSR1 (signal 10), Slurm's warning 120 s before the "
                          "time limit (checkpoint.signal_grace_s)"),
            std::string::npos)
      << o.reason;
  EXPECT_NE(o.reason.find("tfslurm.task"), std::string::npos) << o.reason;

  // Without a warning configured, SIGUSR1 is any other signal.
  ExperimentSpec no_warning = PsSpec();
  no_warning.signal_grace_s = 0;
  AttemptRun plain(no_warning, 1);
  RegisterAll(plain);
  Outcome killed = plain.OnExit(TaskIndex(4), std::nullopt, SIGUSR1, false);
  EXPECT_EQ(killed.failure, EndReason::kRetryableExit);
  EXPECT_NE(killed.reason.find("was killed by signal 10"), std::string::npos) << killed.reason;
}

TEST(AttemptRun, UntrackedWorkerFailureUnderChiefPolicyIsTolerated) {
  AttemptRun run(PsSpec(SuccessPolicy::kChief, 1), 1);
  RegisterAll(run);
  EXPECT_EQ(run.OnExit(TaskIndex(4), 1, std::nullopt, false).kind, Outcome::kUndecided);
  EXPECT_EQ(run.OnExit(TaskIndex(0), 0, std::nullopt, false).kind, Outcome::kSucceeded);
}

TEST(AttemptRun, ReapedExitsDoNotChangeTheOutcome) {
  AttemptRun run(PsSpec(), 1);
  RegisterAll(run);
  for (int w = 2; w < 6; ++w) run.OnExit(TaskIndex(w), 0, std::nullopt, false);
  EXPECT_FALSE(run.AnyUnconfirmedShutdown());
  for (TaskIndex p : run.TasksToReap()) run.MarkShutdownSent(TaskIndex(p));
  EXPECT_EQ(run.UnconfirmedShutdowns(), (Tasks({0, 1})));
  EXPECT_TRUE(run.AnyUnconfirmedShutdown());
  EXPECT_EQ(run.OnExit(TaskIndex(0), std::nullopt, 15, true).kind, Outcome::kSucceeded);
  EXPECT_EQ(run.task(TaskIndex(0)).state, TaskState::kReaped);
  EXPECT_EQ(run.UnconfirmedShutdowns(), (Tasks({1})));
  EXPECT_TRUE(run.AnyUnconfirmedShutdown());
  run.OnExit(TaskIndex(1), std::nullopt, 15, true);
  EXPECT_FALSE(run.AnyUnconfirmedShutdown());
}

TEST(AttemptRun, AShutdownSentAfterTheCursorPassedItsTaskIsUnconfirmedAgain) {
  AttemptRun run(PsSpec(), 1);
  RegisterAll(run);
  run.MarkShutdownSent(TaskIndex(5));
  run.OnExit(TaskIndex(5), std::nullopt, 15, true);
  EXPECT_FALSE(run.AnyUnconfirmedShutdown());  // the cursor is past every task now
  run.MarkShutdownSent(TaskIndex(2));
  EXPECT_TRUE(run.AnyUnconfirmedShutdown());
  EXPECT_EQ(run.UnconfirmedShutdowns(), (Tasks({2})));
}

TEST(AttemptRun, TaskEnvCarriesIdentityAndLeavesGpusToSlurm) {
  ExperimentSpec s = PsSpec();
  s.env = {{"DATA", "x"}};
  s.resources.gpus_per_node = 4;
  AttemptRun run(s, 2);
  RegisterAll(run);
  std::map<std::string, std::string> env;
  for (auto& [k, v] : run.TaskEnv(TaskIndex(3), "/out/exp")) env[k] = v;
  EXPECT_EQ(env["DATA"], "x");
  EXPECT_EQ(env["MODEL_DIR"], "/out/exp");
  EXPECT_EQ(env["EXPERIMENT_ID"], "exp");
  EXPECT_EQ(env["TFSLURM_ATTEMPT"], "2");
  EXPECT_EQ(env["TFSLURM_ROLE"], "worker");
  EXPECT_EQ(env["TFSLURM_INDEX"], "1");
  EXPECT_EQ(env["TFSLURM_PORT"], "1003");
  // 4 GPUs shared by 2 tasks a node: slurmstepd sets CUDA_VISIBLE_DEVICES,
  // never tfslurm (a second mapping on top of Slurm's binding).
  EXPECT_FALSE(env.contains("CUDA_VISIBLE_DEVICES"));
  EXPECT_EQ(run.CheckpointingTask(), TaskIndex(2));  // worker 0 without a chief
}

ExperimentSpec TorchExperimentSpec() {
  ExperimentSpec s;
  s.id = "ddp";
  s.framework = Framework::kPytorch;
  s.resources.nodes = 3;
  s.resources.tasks_per_node = 2;
  s.resources.cpus_per_task = 2;
  s.restart.max_restarts = 5;
  return s;
}

std::map<std::string, std::string> EnvOf(const AttemptRun& run, int task) {
  auto env = run.TaskEnv(TaskIndex(task), "/m");
  return {env.begin(), env.end()};
}

TEST(AttemptRun, PytorchTasksAreRanksWithTorchrunsEnvironment) {
  AttemptRun run(TorchExperimentSpec(), 2);
  ASSERT_EQ(run.size(), 6);
  for (int i = 0; i < run.size(); ++i) {
    EXPECT_EQ(run.task(TaskIndex(i)).role.role, kRankRole);
    EXPECT_EQ(run.task(TaskIndex(i)).role.index, i);
  }
  // Rank 0 registers from node1 on the port its agent holds.
  for (int i = 0; i < run.size(); ++i)
    run.Register(TaskIndex(i), "node" + std::to_string(i / 2 + 1),
                 "n" + std::to_string(i / 2 + 1) + ":" + std::to_string(4000 + i), i / 2, i % 2);
  run.MarkAssigned();
  EXPECT_EQ(run.CheckpointingTask(), TaskIndex(0));
  auto env = EnvOf(run, 3);
  EXPECT_EQ(env["RANK"], "3");
  EXPECT_EQ(env["WORLD_SIZE"], "6");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["NODE_RANK"], "1");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["GROUP_WORLD_SIZE"], "3");
  EXPECT_EQ(env["MASTER_ADDR"], "n1");
  EXPECT_EQ(env["MASTER_PORT"], "4000");
  EXPECT_EQ(env["TFSLURM_PORT"], "4003");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "2");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "1");
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "5");
  EXPECT_EQ(env["TFSLURM_ATTEMPT"], "2");
  EXPECT_EQ(env["EXPERIMENT_ID"], "ddp");
  EXPECT_FALSE(env.contains("TFSLURM_ROLE"));
  EXPECT_EQ(run.ClusterSpec(), "{}");  // no TF_CONFIG cluster: no roles
}

TEST(AttemptRun, PytorchMasterAddressIsAnUnbracketedIpv6Literal) {
  ExperimentSpec spec = TorchExperimentSpec();
  spec.resources.nodes = 1;
  spec.resources.tasks_per_node = 1;
  spec.pytorch.omp_num_threads = 7;
  AttemptRun run(spec, 1);
  run.Register(TaskIndex(0), "node1", "[fd00::1]:4000", 0, 0);
  auto env = EnvOf(run, 0);
  EXPECT_EQ(env["MASTER_ADDR"], "fd00::1");
  EXPECT_EQ(env["MASTER_PORT"], "4000");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "7");
}

TEST(AttemptRun, JaxTasksAreProcessesWithJaxDistributedsArguments) {
  ExperimentSpec spec = TorchExperimentSpec();
  spec.id = "jx";
  spec.framework = Framework::kJax;
  AttemptRun run(spec, 2);
  ASSERT_EQ(run.size(), 6);
  for (int i = 0; i < run.size(); ++i) {
    EXPECT_EQ(run.task(TaskIndex(i)).role.role, kRankRole);
    EXPECT_EQ(run.task(TaskIndex(i)).role.index, i);
    run.Register(TaskIndex(i), "node" + std::to_string(i / 2 + 1),
                 "n" + std::to_string(i / 2 + 1) + ":" + std::to_string(4000 + i), i / 2, i % 2);
  }
  run.MarkAssigned();
  EXPECT_EQ(run.CheckpointingTask(), TaskIndex(0));
  auto env = EnvOf(run, 3);
  // Process 0's address and the port its agent holds, as "host:port".
  EXPECT_EQ(env["JAX_COORDINATOR_ADDRESS"], "n1:4000");
  EXPECT_EQ(env["JAX_NUM_PROCESSES"], "6");
  EXPECT_EQ(env["JAX_PROCESS_ID"], "3");
  EXPECT_EQ(env["TFSLURM_PORT"], "4003");
  EXPECT_EQ(env["TFSLURM_ATTEMPT"], "2");
  EXPECT_EQ(env["EXPERIMENT_ID"], "jx");
  EXPECT_FALSE(env.contains("TFSLURM_SCALARS_FILE"));  // process 0 reports
  EXPECT_TRUE(EnvOf(run, 0).contains("TFSLURM_SCALARS_FILE"));
  // Neither TensorFlow's nor torch's names; JAX_LOCAL_DEVICE_IDS is the agent's.
  for (const char* name : {"TFSLURM_ROLE", "RANK", "MASTER_ADDR", "OMP_NUM_THREADS",
                           "JAX_LOCAL_DEVICE_IDS", "CUDA_VISIBLE_DEVICES"})
    EXPECT_FALSE(env.contains(name)) << name;
  EXPECT_EQ(run.ClusterSpec(), "{}");
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(run.OnExit(TaskIndex(i), 0, std::nullopt, false).kind, Outcome::kUndecided);
  EXPECT_EQ(run.OnExit(TaskIndex(5), 0, std::nullopt, false).reason,
            "every rank exited 0 (6 ranks)");
}

TEST(AttemptRun, PytorchSucceedsWhenEveryRankExitsZero) {
  AttemptRun run(TorchExperimentSpec(), 1);
  RegisterAll(run);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(run.OnExit(TaskIndex(i), 0, std::nullopt, false).kind, Outcome::kUndecided);
  Outcome o = run.OnExit(TaskIndex(5), 0, std::nullopt, false);
  EXPECT_EQ(o.kind, Outcome::kSucceeded);
  EXPECT_EQ(o.reason, "every rank exited 0 (6 ranks)");
}

TEST(AttemptRun, PytorchAnyRankFailingFailsTheAttempt) {
  AttemptRun run(TorchExperimentSpec(), 1);
  RegisterAll(run);
  EXPECT_EQ(run.OnExit(TaskIndex(0), 0, std::nullopt, false).kind, Outcome::kUndecided);
  Outcome o = run.OnExit(TaskIndex(4), std::nullopt, 9, false);
  EXPECT_EQ(o.kind, Outcome::kFailed);
  EXPECT_EQ(o.failure, EndReason::kRetryableExit);
  EXPECT_EQ(o.reason, "rank 4 (on node3) was killed by signal 9");
  EXPECT_EQ(run.TasksToReap(), (Tasks({1, 2, 3, 5})));
}

}  // namespace
}  // namespace tfslurm
