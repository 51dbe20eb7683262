#include "agent/child_process.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>

#include "tests/agent/temp_dir.h"

namespace tfslurm::agent {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

ChildSpec Shell(const std::string& script, const TempDir& dir) {
  ChildSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.workdir = dir.path();
  spec.env = {"PATH=/usr/bin:/bin", "OUT=" + dir.path()};
  return spec;
}

ExitStatus RunToEnd(const ChildSpec& spec, std::optional<std::string>* launch_error = nullptr) {
  auto child = ChildProcess::Start(spec);
  EXPECT_TRUE(child.ok()) << child.status().message();
  if (!child.ok()) return ExitStatus{.exit_code = -1};
  if (launch_error != nullptr) *launch_error = child->launch_error();
  return child->Wait();
}

TEST(ChildProcessTest, ExitCodeAndSignal) {
  TempDir dir;
  EXPECT_EQ(RunToEnd(Shell("exit 0", dir)).exit_code, 0);
  ExitStatus three = RunToEnd(Shell("exit 3", dir));
  EXPECT_EQ(three.exit_code, 3);
  EXPECT_EQ(three.ShellStatus(), 3);
  ExitStatus killed = RunToEnd(Shell("kill -9 $$", dir));
  EXPECT_EQ(killed.signal, 9);
  EXPECT_EQ(killed.ShellStatus(), 137);
  EXPECT_EQ(killed.Describe(), "was killed by signal 9 (SIGKILL)");
  EXPECT_FALSE(killed.core_dumped);
}

TEST(ChildProcessTest, ACoreDumpIsSaid) {
  // What waitpid gives for a SIGSEGV that wrote a core file (the 0x80 bit,
  // WCOREDUMP), and for one that did not (RLIMIT_CORE 0).
  ExitStatus dumped = DecodeWaitStatus(SIGSEGV | 0x80);
  EXPECT_EQ(dumped.signal, SIGSEGV);
  EXPECT_TRUE(dumped.core_dumped);
  EXPECT_EQ(dumped.Describe(), "was killed by signal 11 (SIGSEGV), core dumped");
  ExitStatus not_dumped = DecodeWaitStatus(SIGSEGV);
  EXPECT_FALSE(not_dumped.core_dumped);
  EXPECT_EQ(not_dumped.Describe(), "was killed by signal 11 (SIGSEGV)");
}

TEST(ChildProcessTest, EnvironmentIsExactlyTheSpecs) {
  TempDir dir;
  ChildSpec spec = Shell(R"(env > "$OUT/env"; pwd -P > "$OUT/cwd")", dir);
  spec.env.push_back("MULTI=a\nb");
  ASSERT_EQ(RunToEnd(spec).exit_code, 0);
  std::string env = ReadFile(dir.Path("env"));
  EXPECT_NE(env.find("MULTI=a\nb\n"), std::string::npos);
  EXPECT_EQ(env.find("HOME="), std::string::npos);  // not inherited from the test
  EXPECT_EQ(ReadFile(dir.Path("cwd")), std::filesystem::canonical(dir.path()).string() + "\n");
}

TEST(ChildProcessTest, SearchesThePathOfTheProgramsEnvironment) {
  TempDir dir;
  std::filesystem::create_directory(dir.Path("bin"));
  WriteFile(dir.Path("bin/my-tool"), "#!/bin/sh\necho ran > \"$OUT/ran\"\n");
  ASSERT_EQ(chmod(dir.Path("bin/my-tool").c_str(), 0755), 0);
  ChildSpec spec;
  spec.argv = {"my-tool"};
  spec.env = {"PATH=/nonexistent:" + dir.Path("bin"), "OUT=" + dir.path()};
  ASSERT_EQ(RunToEnd(spec).exit_code, 0);
  EXPECT_EQ(ReadFile(dir.Path("ran")), "ran\n");
}

TEST(ChildProcessTest, ScriptWithoutShebangRunsWithTheShell) {
  TempDir dir;
  WriteFile(dir.Path("script"), "echo \"$1\" > \"$OUT/arg\"\nexit 4\n");
  ASSERT_EQ(chmod(dir.Path("script").c_str(), 0755), 0);
  ChildSpec spec;
  spec.argv = {dir.Path("script"), "first arg"};
  spec.env = {"OUT=" + dir.path()};
  EXPECT_EQ(RunToEnd(spec).exit_code, 4);
  EXPECT_EQ(ReadFile(dir.Path("arg")), "first arg\n");
}

TEST(ChildProcessTest, NotFoundIs127WithAReason) {
  TempDir dir;
  ChildSpec spec;
  spec.argv = {"tfslurm-no-such-program"};
  spec.env = {"PATH=/usr/bin:/bin"};
  std::optional<std::string> error;
  EXPECT_EQ(RunToEnd(spec, &error).exit_code, 127);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("cannot run 'tfslurm-no-such-program': No such file or directory"),
            std::string::npos);
  EXPECT_NE(error->find("PATH=/usr/bin:/bin"), std::string::npos);

  spec.argv = {dir.Path("missing")};
  EXPECT_EQ(RunToEnd(spec, &error).exit_code, 127);
}

TEST(ChildProcessTest, NotExecutableIs126) {
  TempDir dir;
  WriteFile(dir.Path("data"), "not a program\n");
  ASSERT_EQ(chmod(dir.Path("data").c_str(), 0644), 0);
  ChildSpec spec;
  spec.argv = {dir.Path("data")};
  std::optional<std::string> error;
  EXPECT_EQ(RunToEnd(spec, &error).exit_code, 126);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("Permission denied"), std::string::npos);

  // Found in PATH but not executable: also 126, like execvp's EACCES.
  spec.argv = {"data"};
  spec.env = {"PATH=" + dir.path()};
  EXPECT_EQ(RunToEnd(spec, &error).exit_code, 126);
}

TEST(ChildProcessTest, MissingWorkdirIsReported) {
  TempDir dir;
  ChildSpec spec = Shell("exit 0", dir);
  spec.workdir = dir.Path("does-not-exist");
  std::optional<std::string> error;
  EXPECT_EQ(RunToEnd(spec, &error).exit_code, 127);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("working directory"), std::string::npos);
}

// The hexadecimal mask on the `field:` line of /proc/PID/status.
uint64_t StatusMask(const std::string& status, const std::string& field) {
  size_t at = status.find(field + ":\t");
  if (at == std::string::npos) return ~uint64_t{0};
  return std::stoull(status.substr(at + field.size() + 2, 16), nullptr, 16);
}

TEST(ChildProcessTest, RunsInItsOwnGroupWithDefaultSignals) {
  TempDir dir;
  // The agent blocks these and ignores SIGPIPE; the program must not inherit that.
  sigset_t block;
  sigset_t old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  sigaddset(&block, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &block, &old_mask), 0);
  struct sigaction ignore = {};
  struct sigaction old_pipe = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &old_pipe);

  // Field 5 of /proc/PID/stat is the process group. The status is read by
  // `cat` exec'd in place of the shell (a shell blocks signals while it forks).
  auto child = ChildProcess::Start(Shell(
      R"(cut -d' ' -f5 /proc/$$/stat > "$OUT/pgid"; exec cat /proc/self/status > "$OUT/status")",
      dir));
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  sigaction(SIGPIPE, &old_pipe, nullptr);
  ASSERT_TRUE(child.ok());
  ASSERT_EQ(child->Wait().exit_code, 0);

  EXPECT_EQ(std::stoi(ReadFile(dir.Path("pgid"))), child->pid());
  std::string status = ReadFile(dir.Path("status"));
  EXPECT_EQ(StatusMask(status, "SigBlk"), 0u) << status;
  EXPECT_EQ(StatusMask(status, "SigIgn") & (uint64_t{1} << (SIGPIPE - 1)), 0u) << status;
}

TEST(ChildProcessTest, SignalReachesTheWholeGroup) {
  TempDir dir;
  auto child = ChildProcess::Start(
      Shell(R"(sleep 1000 & echo $! > "$OUT/grandchild"; touch "$OUT/ready"; wait)", dir));
  ASSERT_TRUE(child.ok());
  for (int i = 0; i < 30000 && !std::filesystem::exists(dir.Path("ready")); ++i) usleep(1000);
  ASSERT_TRUE(std::filesystem::exists(dir.Path("ready")));
  ASSERT_TRUE(child->Signal(SIGTERM).ok());
  ExitStatus status = child->Wait();
  EXPECT_EQ(status.signal, SIGTERM);
  pid_t grandchild = std::stoi(ReadFile(dir.Path("grandchild")));
  // The grandchild is our child's child, reparented to init once the shell died.
  for (int i = 0; i < 2000; ++i) {
    std::string stat = ReadFile("/proc/" + std::to_string(grandchild) + "/stat");
    if (stat.empty() || stat.find(") Z") != std::string::npos) return;
    usleep(1000);
  }
  FAIL() << "grandchild " << grandchild << " survived SIGTERM to the group";
}

TEST(ChildProcessTest, EmptyCommandIsAnError) {
  EXPECT_FALSE(ChildProcess::Start(ChildSpec{}).ok());
}

TEST(ResolveProgramTest, FindsTheFileExecveRunsAsExecvpWould) {
  TempDir dir;
  std::filesystem::create_directories(dir.Path("venv/bin"));
  std::filesystem::create_symlink("/bin/sh", dir.Path("venv/bin/python"));
  WriteFile(dir.Path("notes"), "not executable\n");
  ChildSpec spec;
  spec.workdir = dir.path();
  spec.env = {"PATH=" + dir.Path("venv/bin") + ":/usr/bin:/bin"};
  spec.argv = {"python"};
  EXPECT_EQ(ResolveProgram(spec), dir.Path("venv/bin/python")) << "the first in PATH";
  spec.argv = {"sh"};
  EXPECT_EQ(ResolveProgram(spec), "/usr/bin/sh");
  spec.argv = {"./notes"};
  EXPECT_EQ(ResolveProgram(spec), "") << "not executable";
  spec.argv = {"no-such-program"};
  EXPECT_EQ(ResolveProgram(spec), "");
}

}  // namespace
}  // namespace tfslurm::agent
