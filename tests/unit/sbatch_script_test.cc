// The script must be safe: hostile strings in the spec stay data. Checked
// by running the generated script with bash, with a stand-in `srun` on PATH
// that records its argv: nothing may run, and the arguments must arrive
// byte for byte.
#include "service/core/sbatch_script.h"
#include "tests/unit/job_plans.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tfslurm::slurm {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kHostile = {
    "it's",      "\"double\"",          "$(touch PWNED)",  "`touch PWNED`",
    "a\nb",      "; touch PWNED #",     "$HOME",           "\\",
    "ünïcødé ✓", "' ; touch PWNED ; '", "--flag=$((1+1))", "tab\there",
    "",
};

ExperimentSpec HostileSpec() {
  ExperimentSpec s;
  s.id = "x-1";
  s.command = {"python3"};
  for (const auto& h : kHostile) s.command.push_back(h);
  for (size_t i = 0; i < kHostile.size(); ++i) s.env["V" + std::to_string(i)] = kHostile[i];
  s.workdir = "/tmp/$(touch PWNED)/it's";
  s.cluster = {0, 1, 1, 0};
  s.resources.nodes = 1;
  s.resources.tasks_per_node = 2;
  return s;
}

std::string Slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class SbatchScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sbatch-test-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "bin");
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SbatchScriptTest, HeaderMatchesRequest) {
  MemoryPlan mem{2000, 2000, "auto: test"};
  ExperimentSpec s = HostileSpec();
  s.resources.partition = "debug";
  s.resources.time_limit_minutes = 90;
  s.signal_grace_s = 120;
  auto r = BuildSubmitRequest(
      s, testing::PlanOf(s, mem),
      {3, {"/out/x-1/logs/attempt-3"}, "/out/x-1/logs/attempt-3/attempt.secret", {}},
      {"/opt/tfslurm-agent", "svc:9"}, {"PATH=/usr/bin"});
  EXPECT_EQ(r.job_name, "tfx-x-1-a3");
  EXPECT_EQ(r.mem_per_cpu_mb, 2000);
  const std::string& script = r.script;
  for (const char* line :
       {"#SBATCH --job-name=tfx-x-1-a3\n", "#SBATCH --partition=debug\n", "#SBATCH --nodes=1\n",
        "#SBATCH --ntasks-per-node=2\n", "#SBATCH --mem-per-cpu=2000\n",
        "#SBATCH --time=01:30:00\n", "#SBATCH --signal=USR1@120\n",
        "#SBATCH --output=/out/x-1/logs/attempt-3/batch.out\n"})
    EXPECT_NE(script.find(line), std::string::npos) << line << "\n" << script;
  // The job's environment names the secret's file; the secret is in neither.
  EXPECT_NE(std::find(r.environment.begin(), r.environment.end(),
                      "TFSLURM_SECRET_FILE=/out/x-1/logs/attempt-3/attempt.secret"),
            r.environment.end());
  for (const std::string& e : r.environment) EXPECT_FALSE(e.starts_with("TFSLURM_SECRET=")) << e;
}

TEST_F(SbatchScriptTest, SpareNodesAddNodesAndNoKillOnTheJobAndTheStep) {
  MemoryPlan mem{2000, 2000, "auto: test"};
  ExperimentSpec s = HostileSpec();
  s.resources.spare_nodes = 2;
  auto r = BuildSubmitRequest(s, testing::PlanOf(s, mem), {1, {"/out/x-1/logs/attempt-1"}, "s", {}},
                              {"/opt/tfslurm-agent", "svc:9"}, {});
  EXPECT_EQ(r.nodes, 3) << "1 node for the tasks and 2 spares";
  EXPECT_TRUE(r.no_kill);
  EXPECT_NE(r.script.find("#SBATCH --nodes=3\n"), std::string::npos) << r.script;
  EXPECT_NE(r.script.find("#SBATCH --no-kill\n"), std::string::npos) << r.script;
  EXPECT_NE(r.script.find("exec srun --kill-on-bad-exit=0 --no-kill "), std::string::npos)
      << "without it slurmctld kills the whole step when a node fails\n"
      << r.script;

  s.resources.spare_nodes = 0;
  auto plain = BuildSubmitRequest(s, testing::PlanOf(s, mem), {1, {"/o"}, "s", {}},
                                  {"/opt/tfslurm-agent", "svc:9"}, {});
  EXPECT_EQ(plain.nodes, 1);
  EXPECT_FALSE(plain.no_kill);
  EXPECT_EQ(plain.script.find("no-kill"), std::string::npos) << plain.script;
}

TEST_F(SbatchScriptTest, HostileStringsRunNothingAndArgvArrivesIntact) {
  MemoryPlan mem{2000, 2000, "auto: $(touch PWNED)"};
  // The agent path and service address are admin-controlled, but quoted too.
  std::string agent = (dir_ / "bin" / "agent dir's $(x)").string();
  auto r = BuildSubmitRequest(HostileSpec(), testing::PlanOf(HostileSpec(), mem),
                              {1, {(dir_ / "logs").string()}, "s", {}}, {agent, "host:1"}, {});
  fs::path script = dir_ / "job.sh";
  std::ofstream(script) << r.script;

  // Stand-in srun: writes each argument NUL-terminated.
  fs::path srun = dir_ / "bin" / "srun";
  std::ofstream(srun) << "#!/bin/bash\nprintf '%s\\0' \"$@\" > \"$ARGV_OUT\"\n";
  fs::permissions(srun, fs::perms::owner_all);

  std::string cmd = "cd '" + dir_.string() + "' && bash -n job.sh && PATH='" +
                    (dir_ / "bin").string() + ":/usr/bin:/bin' ARGV_OUT='" +
                    (dir_ / "argv").string() + "' bash job.sh";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << r.script;
  EXPECT_FALSE(fs::exists(dir_ / "PWNED")) << "the script executed user text";

  std::string raw = Slurp(dir_ / "argv");
  std::vector<std::string> argv;
  size_t start = 0;
  for (size_t i = 0; i < raw.size(); ++i)
    if (raw[i] == '\0') {
      argv.push_back(raw.substr(start, i - start));
      start = i + 1;
    }
  std::vector<std::string> expected = {"--kill-on-bad-exit=0",
                                       "--output=" + (dir_ / "logs").string() + "/task-%t.out",
                                       agent,
                                       "--service",
                                       "host:1",
                                       "--experiment",
                                       "x-1",
                                       "--attempt",
                                       "1",
                                       "--address",
                                       "hostname"};
  EXPECT_EQ(argv, expected);
  // The command is only in a one-line comment: JSON keeps newlines escaped.
  for (const std::string& line : {std::string("#   command: [\"python3\",\"it's\"")})
    EXPECT_NE(r.script.find(line), std::string::npos) << r.script;
  EXPECT_NE(r.script.find("\"a\\nb\""), std::string::npos);
}

TEST(ShellQuote, QuotesSingleQuotes) {
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
}

}  // namespace
}  // namespace tfslurm::slurm
