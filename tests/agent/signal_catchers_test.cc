#include "agent/signal_catchers.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "agent/child_process.h"
#include "tests/agent/temp_dir.h"

namespace tfslurm::agent {
namespace {

using testing::TempDir;

TEST(SignalCatchersTest, ReadsSigCgtFromProcStatus) {
  // As Linux 6.1 writes it: SIGUSR1 (bit 9) and SIGTERM (bit 14) caught.
  std::string status =
      "Name:\tpython3\nState:\tS (sleeping)\nSigPnd:\t0000000000000000\n"
      "SigBlk:\t0000000000000000\nSigIgn:\t0000000001001000\nSigCgt:\t0000000000004200\n"
      "CapInh:\t0000000000000000\n";
  std::optional<uint64_t> caught = ParseCaughtSignals(status);
  ASSERT_TRUE(caught.has_value());
  EXPECT_EQ(*caught, 0x4200u);
  EXPECT_TRUE((*caught >> (SIGUSR1 - 1)) & 1);
  EXPECT_FALSE((*caught >> (SIGUSR2 - 1)) & 1);
  EXPECT_EQ(ParseCaughtSignals("Name:\tx\nSigIgn:\t0000000000000200\n"), std::nullopt);
  EXPECT_EQ(ParseCaughtSignals("SigCgt:\tzz\n"), std::nullopt);
}

TEST(SignalCatchersTest, ReadsTheProcessGroupAfterTheCommandName) {
  EXPECT_EQ(ParseProcessGroup("4242 (python3) S 4240 4241 4241 0 -1"), 4241);
  // A command name may hold spaces and parentheses of its own.
  EXPECT_EQ(ParseProcessGroup("17 (a) b (c)) R 1 99 17 0"), 99);
  EXPECT_EQ(ParseProcessGroup("17 (no end"), std::nullopt);
  EXPECT_EQ(ParseProcessGroup("17 (x) S 1"), std::nullopt);
}

// A program started as the agent starts it, that writes "ready" once its
// handlers are set.
ChildProcess StartPython(const std::string& code, const TempDir& dir) {
  ChildSpec spec;
  spec.argv = {"/usr/bin/python3", "-c", code};
  spec.workdir = dir.path();
  spec.env = {"PATH=/usr/bin:/bin"};
  auto child = ChildProcess::Start(spec);
  EXPECT_TRUE(child.ok()) << child.status().message();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(dir.Path("ready")) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return std::move(child).value();
}

TEST(SignalCatchersTest, FindsWhichProcessesOfTheProgramsGroupCatchTheSignal) {
  TempDir dir;
  // A launcher that does not catch SIGUSR1 and a child in its group that does.
  ChildProcess child = StartPython(
      "import signal, subprocess, sys\n"
      "c = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
      "signal.signal(signal.SIGUSR1, lambda *a: None); open(\"ready\", \"w\").close(); "
      "time.sleep(60)'])\n"
      "c.wait()\n",
      dir);
  SignalCatchers found = FindSignalCatchers(child.pid(), SIGUSR1);
  EXPECT_EQ(found.members.size(), 2u);
  ASSERT_EQ(found.catching.size(), 1u);
  EXPECT_NE(found.catching[0], child.pid()) << "the child catches it, not the launcher";
  EXPECT_TRUE(FindSignalCatchers(child.pid(), SIGUSR2).catching.empty());
  EXPECT_TRUE(FindSignalCatchers(999999999, SIGUSR1).members.empty());
  ASSERT_TRUE(child.Signal(SIGKILL).ok());
  child.Wait();
  child.KillLeftovers();
}

TEST(SignalCatchersTest, AProgramStartsWithSigusr1IgnoredAndAHandlerReplacesThat) {
  TempDir dir;
  ChildProcess plain = StartPython(
      "import signal, time\n"
      "assert signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN\n"
      "open('ready', 'w').close(); time.sleep(60)\n",
      dir);
  SignalCatchers found = FindSignalCatchers(plain.pid(), SIGUSR1);
  EXPECT_EQ(found.members, std::vector<pid_t>{plain.pid()});
  EXPECT_TRUE(found.catching.empty());
  // Slurm's own copy of the warning reaches the program directly: ignored.
  // (SIGTERM after it: a program that did not ignore SIGUSR1 would have died
  // of that one, the first sent and the lower number.)
  ASSERT_TRUE(plain.Signal(SIGUSR1).ok());
  ASSERT_TRUE(plain.Signal(SIGTERM).ok());
  EXPECT_EQ(plain.Wait().signal, SIGTERM) << "a program without a handler survives SIGUSR1";

  TempDir dir2;
  ChildProcess handler = StartPython(
      "import signal, time\n"
      "signal.signal(signal.SIGUSR1, lambda *a: open('warned', 'w').close())\n"
      "open('ready', 'w').close(); time.sleep(60)\n",
      dir2);
  EXPECT_EQ(FindSignalCatchers(handler.pid(), SIGUSR1).catching, std::vector<pid_t>{handler.pid()});
  ASSERT_TRUE(handler.Signal(SIGUSR1).ok());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(dir2.Path("warned")) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(std::filesystem::exists(dir2.Path("warned"))) << "the handler ran";
  ASSERT_TRUE(handler.Signal(SIGKILL).ok());
  handler.Wait();
}

// A /proc of one process, 100, in process group 100, whose SigCgt is `caught`.
void FakeProc(const TempDir& proc, const std::string& caught) {
  std::filesystem::create_directories(proc.Path("100"));
  testing::WriteFile(proc.Path("100/stat"), "100 (python3) S 1 100 100 0 -1\n");
  testing::WriteFile(proc.Path("100/status"), "Name:\tpython3\nSigCgt:\t" + caught + "\n");
}

TEST(TimeLimitWarningTest, AWarningIsHeldUntilTheProgramCatchesIt) {
  TempDir proc;
  FakeProc(proc, "0000000000000000");
  TimeLimitWarning warning;
  EXPECT_FALSE(warning.HeldOneIsDue(100, proc.path())) << "nothing held yet";
  EXPECT_FALSE(warning.PassOnNow(100, proc.path())) << "no handler: not passed on";
  EXPECT_FALSE(warning.HeldOneIsDue(100, proc.path())) << "still no handler";
  FakeProc(proc, "0000000000000200");  // the program installed its handler
  EXPECT_TRUE(warning.HeldOneIsDue(100, proc.path()));
  EXPECT_FALSE(warning.HeldOneIsDue(100, proc.path())) << "passed on once";
  EXPECT_TRUE(warning.PassOnNow(100, proc.path())) << "a program with a handler gets it at once";
  EXPECT_TRUE(warning.PassOnNow(4242, proc.path())) << "nothing seen of the group: as before";
}

}  // namespace
}  // namespace tfslurm::agent
