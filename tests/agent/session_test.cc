// Tests of the agent's Session in this process, where the test decides when
// the session hears of its program's end: its signal fd is a pipe the test
// writes signalfd records into, so "the program has exited but its SIGCHLD
// is not handled yet" is a state the test holds for as long as it likes
// (with the real signalfd it lasts microseconds). The end-to-end tests of
// the real binary are in agent_end_to_end_test.cc.
#include "agent/session.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <thread>

#include "tests/agent/fake_agent_service.h"
#include "tests/agent/temp_dir.h"

namespace tfslurm::agent::testing {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kTimeout = std::chrono::seconds(30);

template <typename Condition>
bool Eventually(Condition condition, milliseconds timeout = kTimeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// True once `pid` is a zombie: it has exited and nobody has waited for it.
bool IsZombie(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::pipe2(signal_pipe_, O_NONBLOCK | O_CLOEXEC), 0); }
  void TearDown() override {
    ::close(signal_pipe_[0]);
    ::close(signal_pipe_[1]);
  }

  // What the kernel would write to the session's signalfd.
  void DeliverSignal(int sig) {
    signalfd_siginfo info{};
    info.ssi_signo = static_cast<uint32_t>(sig);
    EXPECT_EQ(::write(signal_pipe_[1], &info, sizeof(info)), static_cast<ssize_t>(sizeof(info)));
  }

  // Runs a session for `script` (/bin/sh -c) on its own thread; its exit
  // status comes through the future.
  std::future<int> RunSession(const std::string& script) {
    v1::Assignment assignment;
    assignment.set_role("worker");
    assignment.set_index(1);
    assignment.add_command("/bin/sh");
    assignment.add_command("-c");
    assignment.add_command(script);
    assignment.set_workdir(dir_.path());
    (*assignment.mutable_env())["TEST_DIR"] = dir_.path();
    assignment.set_heartbeat_interval_ms(100);
    assignment.set_shutdown_grace_ms(200);
    server_.service().SetRegisterReply([assignment](const v1::AgentMessage&, int) {
      return std::vector<v1::ServiceMessage>{AssignmentMessage(assignment)};
    });
    SessionOptions options;
    options.stream.target = server_.target();
    options.experiment_id = "exp-session";
    options.attempt = 1;
    options.secret = "s3cret";
    options.address = "127.0.0.1";
    options.port = 1;
    options.exit_ack_timeout = std::chrono::seconds(10);
    options.exit_report_timeout = std::chrono::seconds(30);
    TaskIdentity identity{
        .slurm_job_id = 7, .proc_id = 1, .node_id = 0, .local_id = 0, .node_name = "node1"};
    const int fd = signal_pipe_[0];
    return std::async(std::launch::async, [options, identity, fd] {
      Session session(options, identity, fd);
      return session.Run();
    });
  }

  std::vector<v1::Exited> Exits() {
    std::vector<v1::Exited> out;
    for (const auto& r : server_.service().received())
      if (r.message.body_case() == v1::AgentMessage::kExited) out.push_back(r.message.exited());
    return out;
  }

  bool WaitForExit(milliseconds timeout) {
    return server_.service().WaitUntil(
        [](const std::vector<FakeAgentService::Received>& received) {
          return std::any_of(received.begin(), received.end(), [](const auto& r) {
            return r.message.body_case() == v1::AgentMessage::kExited;
          });
        },
        timeout);
  }

  TempDir dir_;
  FakeServer server_;
  int signal_pipe_[2] = {-1, -1};
};

// The service decided the attempt (another task failed) and sends Shutdown
// to a task whose program had just exited 127 on its own. Its exit is its
// own: reported with its code and reaped false, and the agent ends with it.
TEST_F(SessionTest, AProgramThatEndedBeforeTheShutdownIsNotReportedReaped) {
  std::future<int> status = RunSession(R"(echo $$ > "$TEST_DIR/pid.tmp";
    mv "$TEST_DIR/pid.tmp" "$TEST_DIR/pid"; exit 127)");
  const std::string pid_file = dir_.Path("pid");
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(pid_file); }));
  const pid_t pid = std::stoi(ReadFile(pid_file));
  ASSERT_TRUE(Eventually([&] { return IsZombie(pid); })) << "the program has exited";
  ASSERT_TRUE(Exits().empty()) << "no SIGCHLD delivered yet: the session has not seen the end";

  server_.service().Send(ShutdownMessage("worker:0 exited with code 127", 0));
  // The session collects the ended program when the Shutdown comes. (Were
  // it to SIGTERM it and wait for a SIGCHLD instead, the report would come
  // only with the SIGCHLD below, and say reaped.)
  if (!WaitForExit(std::chrono::seconds(3))) DeliverSignal(SIGCHLD);
  ASSERT_TRUE(WaitForExit(kTimeout));
  std::vector<v1::Exited> exits = Exits();
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code(), 127);
  EXPECT_EQ(exits[0].signal(), 0);
  EXPECT_FALSE(exits[0].reaped()) << "the program ended on its own";
  ASSERT_EQ(status.wait_for(kTimeout), std::future_status::ready);
  EXPECT_EQ(status.get(), 127) << "the agent ends with its program's own status";
}

// The same Shutdown to a program still running: reaped, and the agent ends
// with 0 (the control for the test above).
TEST_F(SessionTest, AProgramStillRunningWhenTheShutdownComesIsReaped) {
  std::future<int> status = RunSession(R"(trap 'exit 0' TERM; touch "$TEST_DIR/ready";
    while :; do sleep 0.05; done)");
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(dir_.Path("ready")); }));
  server_.service().Send(ShutdownMessage("attempt failed", 5000));
  // The program exits on the SIGTERM; tell the session, as the kernel would.
  ASSERT_TRUE(Eventually([&] {
    DeliverSignal(SIGCHLD);
    return WaitForExit(milliseconds(100));
  }));
  std::vector<v1::Exited> exits = Exits();
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].reaped());
  ASSERT_EQ(status.wait_for(kTimeout), std::future_status::ready);
  EXPECT_EQ(status.get(), 0);
}

// Slurm's warning before the time limit (SIGUSR1) is passed on only to a
// program that catches it. This one set its default action back (it would
// die of it) and catches nothing: the warning is not passed on, so the
// SIGTERM after it is what ends it. (Passed on, the SIGUSR1 would have
// killed it first: it is sent first and is the lower number.)
TEST_F(SessionTest, TheTimeLimitWarningIsNotPassedOnToAProgramThatDoesNotCatchIt) {
  std::future<int> status = RunSession(R"(exec /usr/bin/python3 -c '
import signal, time
signal.signal(signal.SIGUSR1, signal.SIG_DFL)
open("ready", "w").close()
time.sleep(60)')");
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(dir_.Path("ready")); }));
  DeliverSignal(SIGUSR1);
  DeliverSignal(SIGTERM);
  ASSERT_TRUE(Eventually([&] {
    DeliverSignal(SIGCHLD);
    return WaitForExit(milliseconds(100));
  }));
  std::vector<v1::Exited> exits = Exits();
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal(), SIGTERM);
  ASSERT_EQ(status.wait_for(kTimeout), std::future_status::ready);
}

// The control: a program with a handler gets the warning.
TEST_F(SessionTest, TheTimeLimitWarningIsPassedOnToAProgramThatCatchesIt) {
  std::future<int> status = RunSession(R"(exec /usr/bin/python3 -c '
import signal, sys, time
signal.signal(signal.SIGUSR1, lambda *a: sys.exit(7))
open("ready", "w").close()
time.sleep(60)')");
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(dir_.Path("ready")); }));
  DeliverSignal(SIGUSR1);
  ASSERT_TRUE(Eventually([&] {
    DeliverSignal(SIGCHLD);
    return WaitForExit(milliseconds(100));
  }));
  std::vector<v1::Exited> exits = Exits();
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code(), 7) << "its handler ran";
  ASSERT_EQ(status.wait_for(kTimeout), std::future_status::ready);
  EXPECT_EQ(status.get(), 7);
}

}  // namespace
}  // namespace tfslurm::agent::testing
