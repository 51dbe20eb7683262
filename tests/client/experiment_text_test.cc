#include "client/tfctl/experiment_text.h"

#include <gtest/gtest.h>

namespace tfslurm::tfctl {
namespace {

using client::Task;

TEST(FormatTaskTableTest, AlignsColumnsAndShowsExitSignalAndHeartbeat) {
  Task ps{0, "ps", 0, "node1", "node1:40001", "running", std::nullopt, std::nullopt, 0.42};
  Task worker{1, "worker", 0, "node2", "node2:40002", "succeeded", 0, std::nullopt, std::nullopt};
  Task lost{2, "worker", 1, "node3", "node3:40003", "failed", std::nullopt, 9, std::nullopt};
  Task pending{3, "evaluator", 0, "", "", "pending", std::nullopt, std::nullopt, std::nullopt};
  Task slow{4, "worker", 12, "node10", "node10:1", "running", std::nullopt, std::nullopt, 75.0};
  EXPECT_EQ(FormatTaskTable({ps, worker, lost, pending, slow}),
            "ROLE       INDEX  NODE    ADDRESS      STATE      EXIT      HEARTBEAT\n"
            "ps         0      node1   node1:40001  running    -         0.4s ago\n"
            "worker     0      node2   node2:40002  succeeded  0         -\n"
            "worker     1      node3   node3:40003  failed     signal 9  -\n"
            "evaluator  0      -       -            pending    -         -\n"
            "worker     12     node10  node10:1     running    -         1m15s ago\n");
}

TEST(FormatTaskTableTest, AHeterogeneousJobShowsEachTasksComponent) {
  Task w0{0, "worker", 0, "node2", "node2:1", "running", std::nullopt, std::nullopt, 1.0, 0, 0};
  Task w1{1, "worker", 1, "node3", "node3:2", "running", std::nullopt, std::nullopt, 1.0, 0, 0};
  Task ps{2, "ps", 0, "node1", "node1:3", "running", std::nullopt, std::nullopt, 1.0, 0, 1};
  EXPECT_EQ(FormatTaskTable({w0, w1, ps}),
            "ROLE    INDEX  COMPONENT  NODE   ADDRESS  STATE    EXIT  HEARTBEAT\n"
            "worker  0      0          node2  node2:1  running  -     1.0s ago\n"
            "worker  1      0          node3  node3:2  running  -     1.0s ago\n"
            "ps      0      1          node1  node1:3  running  -     1.0s ago\n");
}

TEST(FormatTaskTableTest, EmptyTableIsJustTheHeader) {
  EXPECT_EQ(FormatTaskTable({}), "ROLE  INDEX  NODE  ADDRESS  STATE  EXIT  HEARTBEAT\n");
}

TEST(FormatDurationTest, PicksAReadableUnit) {
  EXPECT_EQ(FormatDuration(0.04), "0.0s");
  EXPECT_EQ(FormatDuration(9.94), "9.9s");
  EXPECT_EQ(FormatDuration(42), "42s");
  EXPECT_EQ(FormatDuration(185), "3m05s");
  EXPECT_EQ(FormatDuration(7800), "2h10m");
  EXPECT_EQ(FormatDuration(3 * 86400 + 4 * 3600 + 59), "3d04h");
  EXPECT_EQ(FormatDuration(-5), "0.0s");
}

TEST(ParseTimestampTest, ReadsTheServicesFormat) {
  EXPECT_EQ(ParseTimestamp("1970-01-02T00:00:01.500Z"), 86401);
  EXPECT_EQ(ParseTimestamp(""), std::nullopt);
  EXPECT_EQ(ParseTimestamp("yesterday"), std::nullopt);
}

client::Experiment Summary(const std::string& id, const std::string& state) {
  client::Experiment e;
  e.id = id;
  e.state = state;
  e.attempt = 1;
  e.created_at = "1970-01-01T00:00:00.000Z";
  return e;
}

TEST(ExperimentListTest, OpenExperimentsComeFirstInServiceOrder) {
  auto sorted = RunningFirst({Summary("done-new", "succeeded"), Summary("queued-new", "queued"),
                              Summary("run-new", "running"), Summary("failed", "failed"),
                              Summary("run-old", "running"), Summary("restart", "restarting"),
                              Summary("start", "starting")});
  std::vector<std::string> ids;
  for (const auto& e : sorted) ids.push_back(e.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"run-new", "run-old", "start", "restart", "queued-new",
                                           "done-new", "failed"}));
}

TEST(ExperimentListTest, ShowsTaskCountsJobCheckpointAndAge) {
  client::Experiment running = Summary("mnist", "running");
  running.slurm_job_id = 42;
  running.nodes = "node[1-3]";
  running.checkpoint_step = 1200;
  running.task_counts = {{"ps", {2, 2, 2, 0, 0}}, {"worker", {4, 4, 3, 1, 0}}};
  running.reason = "all 6 tasks running";
  client::Experiment done = Summary("old", "succeeded");
  EXPECT_EQ(
      FormatExperimentList({running, done}, 3725),
      "ID     STATE      ATTEMPT  TASKS  JOB  NODES      CHECKPOINT  AGE    REASON\n"
      "mnist  running    1        5/6    42   node[1-3]  step 1200   1h02m  all 6 tasks running\n"
      "old    succeeded  1        -      -    -          -           1h02m  -\n");
}

TEST(ExperimentListTest, ALongReasonIsCutSoTheTableStaysReadable) {
  client::Experiment failed = Summary("f", "failed");
  failed.reason =
      "attempt 1 permanent_exit: worker:1 (task 1 on node2) exited with code 127: cannot run "
      "'trian.py': No such file or directory (PATH=/usr/local/bin:/usr/bin:/bin) (not "
      "restarted: permanent_exit is not in restart.on)";
  std::string table = FormatExperimentList({failed}, 0);
  std::string row = table.substr(table.find("\nf ") + 1);
  EXPECT_NE(row.find("exited with code 127: cannot run 'trian.py': No such file or directory"),
            std::string::npos)
      << "the cause stays in: " << table;
  EXPECT_EQ(row.substr(row.size() - 4), "...\n") << table;
}

TEST(ExperimentListTest, IdsOneALineInTheGivenOrder) {
  EXPECT_EQ(
      FormatExperimentIds(RunningFirst({Summary("old", "succeeded"), Summary("mnist", "running")})),
      "mnist\nold\n");
  EXPECT_EQ(FormatExperimentIds({}), "");
}

TEST(FormatStatusTest, ShowsTheExperimentItsAttemptsAndTasks) {
  client::Experiment e = Summary("hello", "running");
  e.reason = "all 1 tasks running";
  e.slurm_job_id = 7;
  e.slurm_state = "RUNNING";
  e.nodes = "node1";
  e.model_dir = "/out/hello";
  e.mem_per_task_mb = 2000;
  e.mem_explanation = "DefMemPerCPU 2000 MB x 1 CPU";
  e.attempts = {{1, 7, "tfx-hello-a1", "running", "RUNNING", "", "", "node1", std::nullopt,
                 "1970-01-01T00:00:01.000Z", "1970-01-01T00:00:02.000Z", ""}};
  e.tasks = {{0, "worker", 0, "node1", "node1:5000", "running", std::nullopt, std::nullopt, 1.5}};
  EXPECT_EQ(FormatStatus(e),
            "experiment  hello\n"
            "state       running: all 1 tasks running\n"
            "attempt     1 (0 automatic restarts)\n"
            "slurm job   7 RUNNING on node1\n"
            "checkpoint  none yet\n"
            "model dir   /out/hello\n"
            "memory      2000 MB per task (DefMemPerCPU 2000 MB x 1 CPU)\n"
            "created     1970-01-01T00:00:00Z\n"
            "\n"
            "ATTEMPT  JOB  STATE    SLURM    NODES  FROM STEP  SUBMITTED             ENDED  END\n"
            "1        7    running  RUNNING  node1  -          1970-01-01T00:00:01Z  -      -\n"
            "\n"
            "ROLE    INDEX  NODE   ADDRESS     STATE    EXIT  HEARTBEAT\n"
            "worker  0      node1  node1:5000  running  -     1.5s ago\n");
}

TEST(FormatAttemptTableTest, AnAttemptRestartedInPlaceSaysSoBesideItsJob) {
  client::Attempt first{1,  7,       "tfx-a-a1",   "ended", "RUNNING", "retryable_exit",
                        "", "node1", std::nullopt, "",      "",        ""};
  client::Attempt second = first;
  second.number = 2;
  second.state = "running";
  second.end_reason = "";
  second.in_place = true;
  std::string table = FormatAttemptTable({first, second});
  EXPECT_NE(table.find("\n1        7             ended"), std::string::npos) << table;
  EXPECT_NE(table.find("\n2        7 (in place)  running"), std::string::npos) << table;
}

TEST(FormatStatusTest, SpareNodesHaveALineSayingWhetherTheyWait) {
  client::Experiment e = Summary("spare", "running");
  e.slurm_job_id = 7;
  e.slurm_state = "RUNNING";
  e.nodes = "node[1-3]";
  e.raw = nlohmann::json::parse(
      R"({"spares": [{"node": "node3", "waiting": true}, {"node": "", "waiting": false},
                     {"node": "evil\u001b]0;x\u0007", "waiting": false}]})");
  std::string text = FormatStatus(e);
  EXPECT_NE(text.find("slurm job   7 RUNNING on node[1-3]\nspares      node3 (waiting), a node not "
                      "registered yet (starting), evil"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << "escaped for the terminal";
  e.raw = nlohmann::json::parse(R"({"spares": []})");
  EXPECT_EQ(FormatStatus(e).find("spares"), std::string::npos);
}

TEST(FormatStatusTest, TasksThatSaidWhyTheyEndedAreExplainedUnderTheTable) {
  client::Experiment e = Summary("typo", "failed");
  e.tasks = {{0, "worker", 0, "node1", "node1:5000", "succeeded", 0, std::nullopt, std::nullopt},
             {1, "worker", 1, "node2", "node2:5000", "failed", 127, std::nullopt, std::nullopt}};
  e.tasks[1].detail = "cannot run 'trian.py': No such file or directory";
  std::string text = FormatStatus(e);
  EXPECT_EQ(text.substr(text.rfind("HEARTBEAT")),
            "HEARTBEAT\n"
            "worker  0      node1  node1:5000  succeeded  0     -\n"
            "worker  1      node2  node2:5000  failed     127   -\n"
            "worker:1: cannot run 'trian.py': No such file or directory\n");
}

TEST(FormatStatusTest, AJobStillRunningAfterTheExperimentEndedIsShownAsEnding) {
  client::Experiment e = Summary("done", "succeeded");
  e.slurm_job_id = 2;
  e.slurm_state = "RUNNING";
  e.nodes = "node[1-3]";
  EXPECT_NE(FormatStatus(e).find("\nslurm job   2 RUNNING on node[1-3] (ending: the experiment has "
                                 "ended, Slurm's end follows)\n"),
            std::string::npos)
      << FormatStatus(e);
  e.slurm_state = "COMPLETED";
  EXPECT_NE(FormatStatus(e).find("\nslurm job   2 COMPLETED on node[1-3]\n"), std::string::npos)
      << FormatStatus(e);
  e.state = "running";
  e.slurm_state = "RUNNING";
  EXPECT_NE(FormatStatus(e).find("\nslurm job   2 RUNNING on node[1-3]\n"), std::string::npos)
      << FormatStatus(e);
}

TEST(FormatStatusTest, ShowsTheCheckpointStepAndItsPath) {
  client::Experiment e = Summary("mnist", "succeeded");
  e.checkpoint_step = 300;
  e.checkpoint_path = "/out/mnist/model.ckpt-300";
  EXPECT_NE(FormatStatus(e).find("\ncheckpoint  step 300 (/out/mnist/model.ckpt-300)\n"),
            std::string::npos)
      << FormatStatus(e);
}

TEST(FormatEventsTest, TableAndSingleLine) {
  client::Event e{3, "1970-01-01T00:00:05.250Z", 2, "submitted", "Slurm job 9 (tfx-x-a2)"};
  EXPECT_EQ(FormatEventTable({e}),
            "TIME                  ATTEMPT  WHAT       WHY\n"
            "1970-01-01T00:00:05Z  2        submitted  Slurm job 9 (tfx-x-a2)\n");
  EXPECT_EQ(FormatEventLine(e),
            "1970-01-01T00:00:05Z  attempt 2  submitted: Slurm job 9 (tfx-x-a2)");
}

}  // namespace
}  // namespace tfslurm::tfctl
