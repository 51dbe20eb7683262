// End-to-end tests of the real tfslurm-agent binary against an in-process
// fake AgentService: the agent runs as a separate process with a Slurm-like
// environment, and its program is /bin/sh scripts that write what they saw
// into a temp directory.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "schema/agent_exit.h"
#include "schema/tf_config_wire.h"
#include "tests/agent/fake_agent_service.h"
#include "tests/agent/temp_dir.h"
#include "tls/certificate_maker.h"

#ifndef TFSLURM_AGENT_BINARY
#error "TFSLURM_AGENT_BINARY must name the tfslurm-agent binary under test"
#endif

extern char** environ;

namespace tfslurm::agent::testing {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kTimeout = std::chrono::seconds(30);
constexpr char kSecret[] = "s3cret-attempt-2";

// Polls `condition` every few milliseconds until it holds or `timeout` passes.
// For conditions no one can notify us of (a file another process writes).
template <typename Condition>
bool Eventually(Condition condition, milliseconds timeout = kTimeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

// True once `pid` is gone or a zombie.
bool ProcessIsDead(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

// The agent as a child process of the test, its stdout and stderr in a file.
class AgentProcess {
 public:
  AgentProcess(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
               std::string log_path)
      : log_path_(std::move(log_path)) {
    std::vector<std::string> argv_strings = {TFSLURM_AGENT_BINARY};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<std::string> env_strings;
    for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);
    // Sanitizer builds: the agent honours the same options as the test.
    for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"}) {
      if (const char* value = std::getenv(name); value != nullptr && !env.contains(name)) {
        env_strings.push_back(std::string(name) + "=" + value);
      }
    }
    auto pointers = [](std::vector<std::string>& strings) {
      std::vector<char*> out;
      for (auto& s : strings) out.push_back(s.data());
      out.push_back(nullptr);
      return out;
    };
    std::vector<char*> argv = pointers(argv_strings);
    std::vector<char*> envp = pointers(env_strings);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, log_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 2, 1);
    int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("posix_spawn " + argv_strings[0]);
  }

  ~AgentProcess() {
    if (!status_) {
      ::kill(pid_, SIGKILL);
      int ignored;
      ::waitpid(pid_, &ignored, 0);
    }
  }

  pid_t pid() const { return pid_; }
  std::string Log() const { return ReadFile(log_path_); }

  // The agent's exit status (128 + signal when killed), or nullopt when it
  // is still running after `timeout`.
  std::optional<int> WaitForExit(milliseconds timeout = kTimeout) {
    if (status_) return status_;
    Eventually(
        [&] {
          int wait_status;
          if (::waitpid(pid_, &wait_status, WNOHANG) != pid_) return false;
          status_ = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
          return true;
        },
        timeout);
    return status_;
  }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

std::map<std::string, std::string> ParseEnvDump(const std::string& dump) {
  std::map<std::string, std::string> vars;
  size_t start = 0;
  while (start < dump.size()) {
    size_t end = dump.find('\0', start);
    if (end == std::string::npos) end = dump.size();
    std::string entry = dump.substr(start, end - start);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) vars[entry.substr(0, eq)] = entry.substr(eq + 1);
    start = end + 1;
  }
  return vars;
}

class AgentEndToEndTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // TFSLURM_TEST_SHOW_AGENT_LOG=1 shows it for passing tests too.
    if (agent_ && (HasFailure() || std::getenv("TFSLURM_TEST_SHOW_AGENT_LOG") != nullptr)) {
      std::cerr << "---- tfslurm-agent output ----\n" << agent_->Log() << "------\n";
    }
    agent_.reset();
  }

  FakeAgentService& service() { return server_->service(); }

  // As tfslurmd's jobs start it: the secret in a file the environment names.
  std::map<std::string, std::string> AgentEnv() const {
    WriteFile(dir_.Path("attempt.secret"), kSecret);
    return {
        {"PATH", "/usr/local/bin:/usr/bin:/bin"},
        {"SLURM_JOB_ID", "4242"},
        {"SLURM_PROCID", "3"},
        {"SLURM_NODEID", "1"},
        {"SLURM_LOCALID", "0"},
        {"SLURMD_NODENAME", "node1"},
        {"TFSLURM_SECRET_FILE", dir_.Path("attempt.secret")},
        {"TFSLURM_TEST_INHERITED", "from the agent"},
        {"TFSLURM_TEST_OVERRIDDEN", "from the agent"},
    };
  }

  // Starts the agent with AgentArgs(flags).
  void StartAgent(const std::map<std::string, std::string>& flags = {},
                  std::optional<std::map<std::string, std::string>> env = std::nullopt) {
    agent_ = std::make_unique<AgentProcess>(AgentArgs(flags), env.value_or(AgentEnv()),
                                            dir_.Path("agent.log"));
  }

  // The agent's flags for the fake service; `flags` override or add to them.
  std::vector<std::string> AgentArgs(const std::map<std::string, std::string>& flags = {}) const {
    std::map<std::string, std::string> all = {
        {"--service", server_->target()},
        {"--experiment", "exp-e2e"},
        {"--attempt", "2"},
        {"--address", "interface:lo"},
        {"--exit-ack-timeout", "10"},
        {"--exit-report-timeout", "30"},
        {"--log-level", "debug"},
    };
    for (const auto& [flag, value] : flags) all[flag] = value;
    std::vector<std::string> args;
    for (const auto& [flag, value] : all) {
      args.push_back(flag);
      args.push_back(value);
    }
    return args;
  }

  // A program: `/bin/sh -c script`, run in the temp dir, which it finds in
  // $TEST_DIR.
  v1::Assignment ShellAssignment(const std::string& script) const {
    v1::Assignment assignment;
    assignment.set_role("worker");
    assignment.set_index(1);
    assignment.add_command("/bin/sh");
    assignment.add_command("-c");
    assignment.add_command(script);
    assignment.set_workdir(dir_.path());
    (*assignment.mutable_env())["TEST_DIR"] = dir_.path();
    assignment.set_heartbeat_interval_ms(100);
    assignment.set_shutdown_grace_ms(5000);
    return assignment;
  }

  // Answers the first Register of every stream with `assignment`, like the
  // service does (a repeat after a reconnect must be ignored by the agent).
  void AssignOnRegister(const v1::Assignment& assignment) {
    service().SetRegisterReply([assignment](const v1::AgentMessage&, int) {
      return std::vector<v1::ServiceMessage>{AssignmentMessage(assignment)};
    });
  }

  // The service goes, as if killed, and comes back on its port once the
  // agent has tried to reconnect, answering Registers with `assignment`;
  // `while_away` runs while it is gone.
  void ServiceGoesAndComesBack(
      const v1::Assignment& assignment, const std::function<void()>& while_away = [] {}) {
    const int port = server_->port();
    server_.reset();
    while_away();
    ASSERT_TRUE(Eventually([&] { return agent_->Log().find("(attempt 2)") != std::string::npos; }));
    server_ = std::make_unique<FakeServer>(port);
    AssignOnRegister(assignment);
  }

  std::vector<v1::AgentMessage> Messages(v1::AgentMessage::BodyCase body) const {
    std::vector<v1::AgentMessage> out;
    for (const auto& received : server_->service().received()) {
      if (received.message.body_case() == body) out.push_back(received.message);
    }
    return out;
  }

  bool WaitForBody(v1::AgentMessage::BodyCase body, size_t count = 1) {
    return service().WaitUntil(
        [&](const std::vector<FakeAgentService::Received>& received) {
          return static_cast<size_t>(std::count_if(received.begin(), received.end(), [&](auto& r) {
                   return r.message.body_case() == body;
                 })) >= count;
        },
        kTimeout);
  }

  // The Exited the agent reported; fails the test when there is none.
  v1::Exited ReportedExit() {
    EXPECT_TRUE(WaitForBody(v1::AgentMessage::kExited));
    auto exits = Messages(v1::AgentMessage::kExited);
    EXPECT_EQ(exits.size(), 1u);
    return exits.empty() ? v1::Exited() : exits.back().exited();
  }

  TempDir dir_;
  std::unique_ptr<FakeServer> server_ = std::make_unique<FakeServer>();
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(AgentEndToEndTest, RegistersAndPassesTheEnvironmentByteForByte) {
  const std::string tf_config =
      R"({"cluster": {"chief": ["node1:2222"], "ps": ["node1:2223"], "worker": ["node2:2224", "node2:2225"]}, )"
      R"("task": {"type": "worker", "index": 1}})";
  const std::map<std::string, std::string> assigned = {
      {"TF_CONFIG", tf_config},
      {"EXPERIMENT_ID", "exp-e2e"},
      {"MODEL_DIR", dir_.Path("model dir with spaces")},
      {"TFSLURM_ROLE", "worker"},
      {"TFSLURM_INDEX", "1"},
      {"TFSLURM_ATTEMPT", "2"},
      {"CUDA_VISIBLE_DEVICES", "1"},
      {"HOSTILE_QUOTES", R"(it's "quoted" `uname` $(touch /tmp/tfslurm-pwned) ${HOME} \ end)"},
      {"HOSTILE_NEWLINES", "line one\nline two\n\nTF_CONFIG=injected\n"},
      {"HOSTILE_UNICODE", "ünïcödé ✓ 日本語 🚀"},
      {"EMPTY_VALUE", ""},
      {"TFSLURM_TEST_OVERRIDDEN", "from the service"},
  };
  const std::string hostile_arg = "arg with 'single' \"double\" $(id) `id` ; | & * \n ünï";

  v1::Assignment assignment = ShellAssignment(
      R"(env -0 > "$TEST_DIR/env"; pwd -P > "$TEST_DIR/cwd"; printf '%s' "$1" > "$TEST_DIR/arg")");
  assignment.add_command("sh");  // $0
  assignment.add_command(hostile_arg);
  for (const auto& [name, value] : assigned) (*assignment.mutable_env())[name] = value;
  // Even when the service names it, the secret must not reach the program.
  (*assignment.mutable_env())["TFSLURM_SECRET"] = "must not pass";
  AssignOnRegister(assignment);

  StartAgent();
  ASSERT_EQ(agent_->WaitForExit(), 0);

  auto registers = Messages(v1::AgentMessage::kRegister);
  ASSERT_EQ(registers.size(), 1u);
  const v1::AgentMessage& reg = registers[0];
  EXPECT_EQ(reg.task().experiment_id(), "exp-e2e");
  EXPECT_EQ(reg.task().attempt(), 2);
  EXPECT_EQ(reg.task().secret(), kSecret);
  EXPECT_EQ(reg.task().proc_id(), 3);
  EXPECT_EQ(reg.register_().slurm_job_id(), 4242);
  EXPECT_EQ(reg.register_().node_id(), 1);
  EXPECT_EQ(reg.register_().local_id(), 0);
  EXPECT_EQ(reg.register_().node_name(), "node1");
  EXPECT_EQ(reg.register_().address(), "127.0.0.1");
  EXPECT_GT(reg.register_().port(), 0);
  EXPECT_FALSE(reg.register_().reconnect());
  EXPECT_EQ(reg.register_().child_pid(), 0);

  std::map<std::string, std::string> env = ParseEnvDump(ReadFile(dir_.Path("env")));
  for (const auto& [name, value] : assigned) {
    EXPECT_TRUE(env.contains(name)) << name;
    EXPECT_EQ(env[name], value) << name;
  }
  EXPECT_FALSE(env.contains("TFSLURM_SECRET"));
  EXPECT_FALSE(env.contains("TFSLURM_SECRET_FILE"));
  EXPECT_EQ(env["TFSLURM_PORT"], std::to_string(reg.register_().port()));
  EXPECT_EQ(env["TFSLURM_TEST_INHERITED"], "from the agent");
  EXPECT_EQ(ReadFile(dir_.Path("arg")), hostile_arg);
  EXPECT_EQ(ReadFile(dir_.Path("cwd")), std::filesystem::canonical(dir_.path()).string() + "\n");
  EXPECT_FALSE(Exists("/tmp/tfslurm-pwned"));

  v1::Exited exited = ReportedExit();
  EXPECT_EQ(exited.exit_code(), 0);
  EXPECT_EQ(exited.signal(), 0);
  EXPECT_FALSE(exited.reaped());
  // Every message carries the task's identity.
  for (const auto& received : service().received()) {
    EXPECT_EQ(received.message.task().secret(), kSecret);
    EXPECT_EQ(received.message.task().proc_id(), 3);
  }
}

// A TensorFlow cluster of 16,384 tasks: TF_CONFIG (about 280 KB) is longer
// than Linux passes in one environment variable, so the agent passes it in
// a file of its own directory (agent/tf_config_file.h), which it removes
// when it ends; the program, a real python3, reads it in os.environ.
TEST_F(AgentEndToEndTest, ATfConfigOf16384TasksReachesAPythonProgram) {
  std::string workers;
  for (int i = 1; i < 16384; ++i)
    workers += (i > 1 ? ", " : "") + std::string("\"node") + std::to_string(i / 8) + ":" +
               std::to_string(40000 + i % 8) + "\"";
  const std::string cluster = R"({"chief": ["node0:40000"], "worker": [)" + workers + "]}";
  const std::string tf_config = wire::TfConfigForTask(cluster, "worker", 1);
  ASSERT_GT(tf_config.size(), wire::kMaxTfConfigBytes);

  v1::Assignment assignment = ShellAssignment("");
  assignment.clear_command();
  for (const char* arg :
       {"python3", "-c",
        "import os; open(os.environ['TEST_DIR'] + '/seen', 'w').write("
        "os.environ['TF_CONFIG'] + '\\n' + os.environ['TFSLURM_TF_CONFIG_FILE'])"})
    assignment.add_command(arg);
  assignment.set_cluster_zlib(wire::CompressCluster(cluster));
  AssignOnRegister(assignment);
  std::map<std::string, std::string> env = AgentEnv();
  env["TMPDIR"] = dir_.path();
  StartAgent({}, env);
  ASSERT_EQ(agent_->WaitForExit(), 0);

  const std::string seen = ReadFile(dir_.Path("seen"));
  const size_t newline = seen.rfind('\n');
  ASSERT_NE(newline, std::string::npos);
  EXPECT_EQ(seen.substr(0, newline), tf_config);
  const std::string file = seen.substr(newline + 1);
  EXPECT_EQ(file.rfind(dir_.path() + "/tfslurm-agent-", 0), 0u) << file;
  EXPECT_FALSE(Exists(std::filesystem::path(file).parent_path()))
      << "the agent left its directory behind";
  EXPECT_NE(agent_->Log().find("TF_CONFIG is longer than Linux passes"), std::string::npos);
  EXPECT_EQ(ReportedExit().exit_code(), 0);
}

TEST_F(AgentEndToEndTest, ProgramExitCodeIsReportedAndMirrored) {
  // The program also leaves a process behind, which must not outlive it.
  AssignOnRegister(ShellAssignment(R"(sleep 1000 & echo $! > "$TEST_DIR/leftover"; exit 3)"));
  StartAgent();
  ASSERT_EQ(agent_->WaitForExit(), 3);
  v1::Exited exited = ReportedExit();
  EXPECT_EQ(exited.exit_code(), 3);
  EXPECT_EQ(exited.signal(), 0);
  EXPECT_FALSE(exited.reaped());
  pid_t leftover = std::stoi(ReadFile(dir_.Path("leftover")));
  EXPECT_TRUE(Eventually([&] { return ProcessIsDead(leftover); }));
}

TEST_F(AgentEndToEndTest, ShutdownKillsAProgramThatIgnoresSigtermAfterTheGrace) {
  v1::Assignment assignment = ShellAssignment(R"(
    trap '' TERM
    sleep 1000 & echo $! > "$TEST_DIR/grandchild"
    touch "$TEST_DIR/ready"
    while :; do sleep 0.05; done)");
  assignment.set_shutdown_grace_ms(300);  // used: the Shutdown below has no grace
  AssignOnRegister(assignment);
  StartAgent();
  ASSERT_TRUE(Eventually([&] { return Exists(dir_.Path("ready")); }));

  const auto sent = std::chrono::steady_clock::now();
  service().Send(ShutdownMessage("success decided", 0));
  ASSERT_EQ(agent_->WaitForExit(), 0);  // reaped is the normal end
  EXPECT_GE(std::chrono::steady_clock::now() - sent, milliseconds(300));

  v1::Exited exited = ReportedExit();
  EXPECT_EQ(exited.signal(), SIGKILL);
  EXPECT_EQ(exited.exit_code(), 0);
  EXPECT_TRUE(exited.reaped());
  // The whole process group got the signals, not just the shell.
  pid_t grandchild = std::stoi(ReadFile(dir_.Path("grandchild")));
  EXPECT_TRUE(Eventually([&] { return ProcessIsDead(grandchild); }));
  EXPECT_NE(agent_->Log().find("SIGKILL"), std::string::npos);
}

TEST_F(AgentEndToEndTest, ShutdownOfACooperativeProgramReportsReaped) {
  AssignOnRegister(ShellAssignment(R"(
    trap 'exit 0' TERM
    touch "$TEST_DIR/ready"
    while :; do sleep 0.05; done)"));
  StartAgent();
  ASSERT_TRUE(Eventually([&] { return Exists(dir_.Path("ready")); }));
  service().Send(ShutdownMessage("attempt failed", 20000));
  ASSERT_EQ(agent_->WaitForExit(), 0);
  v1::Exited exited = ReportedExit();
  EXPECT_EQ(exited.exit_code(), 0);
  EXPECT_EQ(exited.signal(), 0);
  EXPECT_TRUE(exited.reaped());
}

// The program catches SIGUSR1 (a shell could not: it starts ignored, and a
// non-interactive shell cannot trap a signal ignored on entry; the agent's
// README says so).
TEST_F(AgentEndToEndTest, ForwardsSigusr1ToTheProgram) {
  AssignOnRegister(ShellAssignment(R"(exec /usr/bin/python3 -c '
import os, signal, sys, time
def on_usr1(*_):
    open(os.environ["TEST_DIR"] + "/got", "w").write("usr1\n")
    sys.exit(5)
signal.signal(signal.SIGUSR1, on_usr1)
open(os.environ["TEST_DIR"] + "/ready", "w").close()
time.sleep(60)')"));
  StartAgent();
  ASSERT_TRUE(Eventually([&] { return Exists(dir_.Path("ready")); }));
  ASSERT_EQ(::kill(agent_->pid(), SIGUSR1), 0);
  ASSERT_EQ(agent_->WaitForExit(), 5);
  EXPECT_EQ(ReadFile(dir_.Path("got")), "usr1\n");
  EXPECT_EQ(ReportedExit().exit_code(), 5);
}

TEST_F(AgentEndToEndTest, SigtermBeforeTheAssignmentEndsTheAgent) {
  StartAgent();  // the service never answers
  ASSERT_TRUE(WaitForBody(v1::AgentMessage::kRegister));
  ASSERT_EQ(::kill(agent_->pid(), SIGTERM), 0);
  EXPECT_EQ(agent_->WaitForExit(), 128 + SIGTERM);
}

TEST_F(AgentEndToEndTest, ReconnectsAfterTheServiceRestartsAndReportsTheExit) {
  v1::Assignment assignment = ShellAssignment(R"(
    echo started >> "$TEST_DIR/starts"
    echo $$ > "$TEST_DIR/pid"
    while [ ! -e "$TEST_DIR/go" ]; do sleep 0.05; done
    exit 4)");
  AssignOnRegister(assignment);
  StartAgent();
  ASSERT_TRUE(Eventually([&] { return Exists(dir_.Path("pid")); }));
  const int first_port = Messages(v1::AgentMessage::kRegister).at(0).register_().port();

  // The service restarts on the same port while the program runs.
  const int service_port = server_->port();
  server_.reset();
  server_ = std::make_unique<FakeServer>(service_port);
  AssignOnRegister(assignment);  // a repeated Assignment must be ignored

  ASSERT_TRUE(WaitForBody(v1::AgentMessage::kRegister));
  v1::AgentMessage reg = Messages(v1::AgentMessage::kRegister).at(0);
  EXPECT_TRUE(reg.register_().reconnect());
  EXPECT_EQ(reg.register_().child_pid(), std::stoi(ReadFile(dir_.Path("pid"))));
  EXPECT_EQ(reg.register_().port(), first_port);
  EXPECT_EQ(reg.task().secret(), kSecret);

  WriteFile(dir_.Path("go"), "");
  ASSERT_EQ(agent_->WaitForExit(), 4);
  EXPECT_EQ(ReportedExit().exit_code(), 4);
  EXPECT_EQ(ReadFile(dir_.Path("starts")), "started\n");  // never started twice
}

TEST_F(AgentEndToEndTest, ResendsTheExitReportWhenTheServiceComesBack) {
  v1::Assignment assignment = ShellAssignment(R"(
    touch "$TEST_DIR/ready"
    while [ ! -e "$TEST_DIR/go" ]; do sleep 0.05; done
    exit 6)");
  AssignOnRegister(assignment);
  StartAgent();
  ASSERT_TRUE(Eventually([&] { return Exists(dir_.Path("ready")); }));

  const int service_port = server_->port();
  server_.reset();
  WriteFile(dir_.Path("go"), "");
  // The program ends while the service is away.
  ASSERT_TRUE(Eventually(
      [&] { return agent_->Log().find("the program exited with code 6") != std::string::npos; }));
  // ...and the agent fails to reconnect at least twice.
  ASSERT_TRUE(Eventually([&] { return agent_->Log().find("(attempt 2)") != std::string::npos; }));
  ASSERT_EQ(agent_->WaitForExit(milliseconds(0)), std::nullopt);

  server_ = std::make_unique<FakeServer>(service_port);
  ASSERT_EQ(agent_->WaitForExit(), 6);
  auto registers = Messages(v1::AgentMessage::kRegister);
  ASSERT_FALSE(registers.empty());
  EXPECT_TRUE(registers[0].register_().reconnect());
  EXPECT_EQ(ReportedExit().exit_code(), 6);
}

TEST_F(AgentEndToEndTest, ResendsAnExitReportTheServiceDidNotAcknowledge) {
  service().SetAcknowledgeExit(false);
  AssignOnRegister(ShellAssignment("exit 8"));
  StartAgent();
  ASSERT_TRUE(WaitForBody(v1::AgentMessage::kExited));

  // The service goes away after receiving the report but before recording it.
  const int service_port = server_->port();
  server_.reset();
  server_ = std::make_unique<FakeServer>(service_port);
  ASSERT_EQ(agent_->WaitForExit(), 8);
  auto registers = Messages(v1::AgentMessage::kRegister);
  ASSERT_EQ(registers.size(), 1u);
  EXPECT_TRUE(registers[0].register_().reconnect());
  EXPECT_EQ(ReportedExit().exit_code(), 8);
}

TEST_F(AgentEndToEndTest, GivesUpWaitingForAnAcknowledgmentAfterTheDeadline) {
  service().SetAcknowledgeExit(false);
  AssignOnRegister(ShellAssignment("exit 7"));
  StartAgent({{"--exit-ack-timeout", "0.3"}});
  ASSERT_EQ(agent_->WaitForExit(), 7);
  EXPECT_EQ(ReportedExit().exit_code(), 7);
  EXPECT_NE(agent_->Log().find("did not acknowledge"), std::string::npos);
}

TEST_F(AgentEndToEndTest, PermanentRefusalExits3) {
  service().SetRegisterReply([](const v1::AgentMessage&, int) {
    return std::vector<v1::ServiceMessage>{RefusedMessage("wrong attempt secret", true)};
  });
  StartAgent();
  ASSERT_EQ(agent_->WaitForExit(), 3);
  EXPECT_NE(agent_->Log().find("wrong attempt secret"), std::string::npos);
  EXPECT_EQ(Messages(v1::AgentMessage::kRegister).size(), 1u);
}

TEST_F(AgentEndToEndTest, TemporaryRefusalIsRetried) {
  v1::Assignment assignment = ShellAssignment("exit 0");
  service().SetRegisterReply([assignment](const v1::AgentMessage&, int stream) {
    if (stream == 0) return std::vector<v1::ServiceMessage>{RefusedMessage("busy", false)};
    return std::vector<v1::ServiceMessage>{AssignmentMessage(assignment)};
  });
  StartAgent();
  ASSERT_EQ(agent_->WaitForExit(), 0);
  auto registers = Messages(v1::AgentMessage::kRegister);
  ASSERT_EQ(registers.size(), 2u);
  EXPECT_FALSE(registers[1].register_().reconnect());  // no assignment yet
  EXPECT_EQ(ReportedExit().exit_code(), 0);
}

TEST_F(AgentEndToEndTest, AServiceThatDoesNotKnowTheExperimentIsRetriedUntilItDoes) {
  // Another tfslurmd answered first (the job's own was down and another took
  // its port); then the right one is back.
  v1::Assignment assignment = ShellAssignment("exit 0");
  service().SetRegisterReply([assignment](const v1::AgentMessage& m, int stream) {
    if (stream < 3) {
      return std::vector<v1::ServiceMessage>{UnknownExperimentMessage(m.task().experiment_id())};
    }
    return std::vector<v1::ServiceMessage>{AssignmentMessage(assignment)};
  });
  StartAgent();
  ASSERT_EQ(agent_->WaitForExit(), 0);
  EXPECT_EQ(Messages(v1::AgentMessage::kRegister).size(), 4u);
  EXPECT_EQ(ReportedExit().exit_code(), 0);
  EXPECT_NE(agent_->Log().find("may be another tfslurmd than the one that started this job"),
            std::string::npos)
      << agent_->Log();
}

TEST_F(AgentEndToEndTest, AServiceThatNeverKnowsTheExperimentIsGivenUpAfterTheTimeout) {
  service().SetRegisterReply([](const v1::AgentMessage& m, int) {
    return std::vector<v1::ServiceMessage>{UnknownExperimentMessage(m.task().experiment_id())};
  });
  const auto start = std::chrono::steady_clock::now();
  StartAgent({{"--unknown-experiment-timeout", "1"}});
  ASSERT_EQ(agent_->WaitForExit(), 3);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_GE(Messages(v1::AgentMessage::kRegister).size(), 2u);
  EXPECT_NE(agent_->Log().find("still does not know experiment"), std::string::npos)
      << agent_->Log();
}

TEST_F(AgentEndToEndTest, ProgramNotFoundExits127) {
  v1::Assignment assignment = ShellAssignment("");
  assignment.clear_command();
  assignment.add_command("tfslurm-no-such-program");
  assignment.add_command("--flag");
  AssignOnRegister(assignment);
  StartAgent();
  ASSERT_EQ(agent_->WaitForExit(), 127);
  EXPECT_EQ(ReportedExit().exit_code(), 127);
  EXPECT_EQ(ReportedExit().detail().rfind(
                "cannot run 'tfslurm-no-such-program': No such file or directory (PATH=", 0),
            0u)
      << "the service is told why: " << ReportedExit().detail();
  const std::string log = agent_->Log();
  EXPECT_NE(log.find("cannot run 'tfslurm-no-such-program': No such file or directory"),
            std::string::npos);
}

// Issue 41: a last error line in Latin-1 made the exit report a string
// protobuf refuses; the service never read it, and the cause was lost.
TEST_F(AgentEndToEndTest, AnErrorLineThatIsNotUtf8ReachesTheServiceEscaped) {
  AssignOnRegister(ShellAssignment(
      R"(printf 'Traceback (most recent call last):\n  File "x"\nValueError: caf\351 au lait\n' >&2; exit 1)"));
  StartAgent();
  ASSERT_EQ(agent_->WaitForExit(), 1);
  EXPECT_EQ(ReportedExit().detail(), "ValueError: caf\\xe9 au lait");
}

TEST_F(AgentEndToEndTest, AMissingWorkdirIsReportedAsTheCause) {
  v1::Assignment assignment = ShellAssignment("exit 0");
  assignment.set_workdir(dir_.Path("gone"));
  AssignOnRegister(assignment);
  StartAgent();
  ASSERT_EQ(agent_->WaitForExit(), 127);
  EXPECT_EQ(ReportedExit().exit_code(), 127);
  EXPECT_EQ(ReportedExit().detail(), "cannot change to the working directory '" +
                                         dir_.Path("gone") + "': No such file or directory");
}

TEST_F(AgentEndToEndTest, ProgramNotExecutableExits126) {
  WriteFile(dir_.Path("not-executable"), "#!/bin/sh\nexit 0\n");
  ASSERT_EQ(::chmod(dir_.Path("not-executable").c_str(), 0644), 0);
  v1::Assignment assignment = ShellAssignment("");
  assignment.clear_command();
  assignment.add_command(dir_.Path("not-executable"));
  AssignOnRegister(assignment);
  StartAgent();
  ASSERT_EQ(agent_->WaitForExit(), 126);
  EXPECT_EQ(ReportedExit().exit_code(), 126);
  EXPECT_EQ(ReportedExit().detail(),
            "cannot run '" + dir_.Path("not-executable") + "': Permission denied");
  EXPECT_NE(agent_->Log().find("Permission denied"), std::string::npos);
}

TEST_F(AgentEndToEndTest, HeartbeatsAndReportsCheckpoints) {
  const std::string model_dir = dir_.Path("model");
  std::filesystem::create_directory(model_dir);
  WriteFile(model_dir + "/checkpoint",
            "model_checkpoint_path: \"model.ckpt-100\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-100\"\n");
  v1::Assignment assignment = ShellAssignment(R"(
    while [ ! -e "$TEST_DIR/go" ]; do sleep 0.05; done)");
  assignment.set_heartbeat_interval_ms(50);
  assignment.set_report_checkpoints(true);
  assignment.set_model_dir(model_dir);
  AssignOnRegister(assignment);
  StartAgent();

  // The checkpoint a resumed attempt starts from, right after the start.
  ASSERT_TRUE(WaitForBody(v1::AgentMessage::kProgress));
  auto progress = Messages(v1::AgentMessage::kProgress);
  EXPECT_EQ(progress[0].progress().checkpoint_step(), 100);
  EXPECT_EQ(progress[0].progress().checkpoint_path(), model_dir + "/model.ckpt-100");

  // TensorFlow replaces the file atomically; here with an absolute path.
  WriteFile(model_dir + "/checkpoint.tmp",
            "model_checkpoint_path: \"/elsewhere/model.ckpt-200\"\n");
  std::filesystem::rename(model_dir + "/checkpoint.tmp", model_dir + "/checkpoint");
  ASSERT_TRUE(WaitForBody(v1::AgentMessage::kProgress, 2));
  ASSERT_TRUE(WaitForBody(v1::AgentMessage::kHeartbeat, 3));

  WriteFile(dir_.Path("go"), "");
  ASSERT_EQ(agent_->WaitForExit(), 0);
  progress = Messages(v1::AgentMessage::kProgress);
  ASSERT_EQ(progress.size(), 2u);  // each step once
  EXPECT_EQ(progress[1].progress().checkpoint_step(), 200);
  EXPECT_EQ(progress[1].progress().checkpoint_path(), "/elsewhere/model.ckpt-200");
}

// Tags and steps of every Scalars message received, in order; fails the
// test when one comes after the Exited report.
std::vector<std::string> ScalarsBeforeExit(
    const std::vector<FakeAgentService::Received>& received) {
  std::vector<std::string> points;
  bool exited = false;
  for (const auto& r : received) {
    if (r.message.body_case() == v1::AgentMessage::kExited) exited = true;
    if (r.message.body_case() != v1::AgentMessage::kScalars) continue;
    EXPECT_FALSE(exited) << "Scalars after Exited";
    for (const auto& s : r.message.scalars().scalars()) {
      points.push_back(s.tag() + "@" + std::to_string(s.step()));
    }
  }
  return points;
}

TEST_F(AgentEndToEndTest, ReportsTheScalarsThisAttemptWritesBeforeTheExit) {
  // MODEL_DIR as an earlier attempt left it: an event file and a JSON line.
  const std::string model_dir = dir_.Path("model");
  const std::string testdata = TFSLURM_AGENT_TESTDATA "/tfevents";
  std::filesystem::create_directories(model_dir + "/old");
  for (const auto& entry : std::filesystem::directory_iterator(testdata + "/v2")) {
    std::filesystem::copy(entry.path(), model_dir + "/old/");
  }
  WriteFile(model_dir + "/tfslurm-scalars.jsonl", "{\"step\": 0, \"loss\": 9}\n");
  std::string keras_train;
  for (const auto& entry : std::filesystem::directory_iterator(testdata + "/keras/train")) {
    keras_train = entry.path();
  }
  v1::Assignment assignment = ShellAssignment(R"(
    echo '{"step": 1, "loss": 0.5}' >> model/tfslurm-scalars.jsonl
    mkdir -p model/train && cp "$KERAS_TRAIN" model/train/
    while [ ! -e "$TEST_DIR/go" ]; do sleep 0.05; done
    echo '{"step": 2, "loss": 0.25}' >> model/tfslurm-scalars.jsonl)");
  assignment.set_report_checkpoints(true);
  assignment.set_model_dir("model");  // relative to the workdir, as the scalars file
  (*assignment.mutable_env())["TFSLURM_SCALARS_FILE"] = "model/tfslurm-scalars.jsonl";
  (*assignment.mutable_env())["KERAS_TRAIN"] = keras_train;
  AssignOnRegister(assignment);
  StartAgent();

  // Polled while the program runs...
  ASSERT_TRUE(WaitForBody(v1::AgentMessage::kScalars));
  // ...and once more when it has ended: the line written just before exiting.
  WriteFile(dir_.Path("go"), "");
  ASSERT_EQ(agent_->WaitForExit(), 0);
  std::vector<std::string> points = ScalarsBeforeExit(service().received());
  std::sort(points.begin(), points.end());
  EXPECT_EQ(points, (std::vector<std::string>{"loss@1", "loss@2", "train/epoch_learning_rate@0",
                                              "train/epoch_learning_rate@1", "train/epoch_loss@0",
                                              "train/epoch_loss@1", "train/epoch_mae@0",
                                              "train/epoch_mae@1"}))
      << "nothing of the earlier attempt (old/loss, loss@0), each point once";
  EXPECT_NE(agent_->Log().find("following training scalars"), std::string::npos);
}

TEST_F(AgentEndToEndTest, ScalarsWrittenWhileTheServiceIsAwayArriveAfterItComesBack) {
  v1::Assignment assignment = ShellAssignment(R"(
    touch "$TEST_DIR/ready"
    while [ ! -e "$TEST_DIR/write" ]; do sleep 0.05; done
    echo '{"step": 7, "acc": 0.75}' >> scalars.jsonl
    while [ ! -e "$TEST_DIR/go" ]; do sleep 0.05; done)");
  assignment.set_report_checkpoints(true);
  (*assignment.mutable_env())["TFSLURM_SCALARS_FILE"] = "scalars.jsonl";
  AssignOnRegister(assignment);
  StartAgent();
  ASSERT_TRUE(Eventually([&] { return Exists(dir_.Path("ready")); }));

  ServiceGoesAndComesBack(assignment, [&] { WriteFile(dir_.Path("write"), ""); });
  ASSERT_TRUE(WaitForBody(v1::AgentMessage::kScalars));
  WriteFile(dir_.Path("go"), "");
  ASSERT_EQ(agent_->WaitForExit(), 0);
  EXPECT_EQ(ScalarsBeforeExit(service().received()), (std::vector<std::string>{"acc@7"}));
}

// A service killed -9 may die with the last Scalars unread in its socket:
// the agent sends its last points again on the stream after (the store
// keeps a point once, by tag, attempt and step).
TEST_F(AgentEndToEndTest, TheLastScalarsSentBeforeTheServiceDiedAreSentAgainWhenItComesBack) {
  v1::Assignment assignment = ShellAssignment(R"(
    echo '{"step": 3, "acc": 0.5}' >> scalars.jsonl
    while [ ! -e "$TEST_DIR/go" ]; do sleep 0.05; done)");
  assignment.set_report_checkpoints(true);
  (*assignment.mutable_env())["TFSLURM_SCALARS_FILE"] = "scalars.jsonl";
  AssignOnRegister(assignment);
  StartAgent();
  ASSERT_TRUE(WaitForBody(v1::AgentMessage::kScalars));
  EXPECT_EQ(ScalarsBeforeExit(service().received()), (std::vector<std::string>{"acc@3"}));

  ServiceGoesAndComesBack(assignment);  // as if it had died before reading them
  ASSERT_TRUE(WaitForBody(v1::AgentMessage::kScalars));
  WriteFile(dir_.Path("go"), "");
  ASSERT_EQ(agent_->WaitForExit(), 0);
  EXPECT_EQ(ScalarsBeforeExit(service().received()), (std::vector<std::string>{"acc@3"}))
      << "sent again, once";
}

TEST_F(AgentEndToEndTest, MissingSlurmVariableExits2) {
  auto env = AgentEnv();
  env.erase("SLURM_NODEID");
  StartAgent({}, env);
  ASSERT_EQ(agent_->WaitForExit(), 2);
  EXPECT_NE(agent_->Log().find("SLURM_NODEID"), std::string::npos);
  EXPECT_EQ(service().streams(), 0);
}

TEST_F(AgentEndToEndTest, MissingSecretExits2) {
  auto env = AgentEnv();
  env.erase("TFSLURM_SECRET_FILE");
  StartAgent({}, env);
  ASSERT_EQ(agent_->WaitForExit(), 2);
  EXPECT_NE(agent_->Log().find("TFSLURM_SECRET_FILE and TFSLURM_SECRET are not set"),
            std::string::npos);
}

TEST_F(AgentEndToEndTest, AMissingOrLinkedSecretFileExits2NamingIt) {
  auto env = AgentEnv();
  env["TFSLURM_SECRET_FILE"] = dir_.Path("no-such-secret");
  StartAgent({}, env);
  ASSERT_EQ(agent_->WaitForExit(), 2);
  EXPECT_NE(agent_->Log().find("cannot read the attempt secret from TFSLURM_SECRET_FILE '" +
                               dir_.Path("no-such-secret") + "': No such file or directory"),
            std::string::npos);
  EXPECT_EQ(service().streams(), 0);
  // A symlink in the secret's place is not followed (O_NOFOLLOW).
  ASSERT_EQ(::symlink(dir_.Path("attempt.secret").c_str(), dir_.Path("linked.secret").c_str()), 0);
  env["TFSLURM_SECRET_FILE"] = dir_.Path("linked.secret");
  StartAgent({}, env);
  ASSERT_EQ(agent_->WaitForExit(), 2);
  EXPECT_NE(
      agent_->Log().find("'" + dir_.Path("linked.secret") + "': Too many levels of symbolic links"),
      std::string::npos);
}

TEST_F(AgentEndToEndTest, TheSecretFromTheEnvironmentStillServesAnAgentStartedByHand) {
  v1::Assignment assignment = ShellAssignment("exit 0");
  AssignOnRegister(assignment);
  auto env = AgentEnv();
  env.erase("TFSLURM_SECRET_FILE");
  env["TFSLURM_SECRET"] = kSecret;
  StartAgent({}, env);
  ASSERT_EQ(agent_->WaitForExit(), 0);
  auto registers = Messages(v1::AgentMessage::kRegister);
  ASSERT_EQ(registers.size(), 1u);
  EXPECT_EQ(registers[0].task().secret(), kSecret);
}

TEST_F(AgentEndToEndTest, UnknownInterfaceExits2) {
  StartAgent({{"--address", "interface:tfslurm-no-such-if0"}});
  ASSERT_EQ(agent_->WaitForExit(), 2);
  EXPECT_NE(agent_->Log().find("no network interface named 'tfslurm-no-such-if0'"),
            std::string::npos);
}

TEST_F(AgentEndToEndTest, MalformedServiceExits2) {
  StartAgent({{"--service", "tfslurmd.example.org"}});
  ASSERT_EQ(agent_->WaitForExit(), 2);
  EXPECT_NE(agent_->Log().find("is not HOST:PORT"), std::string::npos);
}

TEST_F(AgentEndToEndTest, StaysInTheJobAndRunsTheNextAttemptInPlace) {
  // Attempt 2's program fails; the agent waits in the job (standby), is told
  // attempt 3 runs here, registers for it on a fresh port with its output in
  // attempt 3's log directory, runs the program again, and exits with its
  // status once released.
  v1::Assignment assignment = ShellAssignment(
      R"(echo "$TFSLURM_PORT" > "$TEST_DIR/port-$TFSLURM_ATTEMPT"; echo "program of attempt $TFSLURM_ATTEMPT"; )"
      R"([ "$TFSLURM_ATTEMPT" = 3 ] && exit 0; exit 3)");
  assignment.set_stay_for_next_attempt(true);
  const std::string log_dir = dir_.Path("attempt-3");
  std::filesystem::create_directories(log_dir);
  service().SetRegisterReply([assignment, log_dir](const v1::AgentMessage& m, int) {
    v1::ServiceMessage reply;
    if (!m.register_().standby()) {
      v1::Assignment a = assignment;
      (*a.mutable_env())["TFSLURM_ATTEMPT"] = std::to_string(m.task().attempt());
      return std::vector<v1::ServiceMessage>{AssignmentMessage(a)};
    }
    if (m.task().attempt() == 2) {
      reply.mutable_next_attempt()->set_attempt(3);
      reply.mutable_next_attempt()->set_reason("worker:1 exited with code 3; restart 1 of 3");
      reply.mutable_next_attempt()->set_log_dir(log_dir);
    } else {
      reply.mutable_release()->set_reason("training succeeded");
    }
    return std::vector<v1::ServiceMessage>{reply};
  });
  StartAgent();
  ASSERT_EQ(agent_->WaitForExit(), 0) << "the status of attempt 3's program";

  auto registers = Messages(v1::AgentMessage::kRegister);
  ASSERT_EQ(registers.size(), 4u);
  std::vector<std::pair<int, bool>> seen;
  for (const auto& r : registers) seen.push_back({r.task().attempt(), r.register_().standby()});
  EXPECT_EQ(seen,
            (std::vector<std::pair<int, bool>>{{2, false}, {2, true}, {3, false}, {3, true}}));
  for (const auto& r : registers) EXPECT_EQ(r.task().secret(), kSecret) << "the job's secret";
  const int first_port = registers[0].register_().port();
  const int second_port = registers[2].register_().port();
  EXPECT_NE(first_port, second_port) << "a fresh port for the attempt in place";
  EXPECT_EQ(ReadFile(dir_.Path("port-2")), std::to_string(first_port) + "\n");
  EXPECT_EQ(ReadFile(dir_.Path("port-3")), std::to_string(second_port) + "\n");

  auto exits = Messages(v1::AgentMessage::kExited);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].task().attempt(), 2);
  EXPECT_EQ(exits[0].exited().exit_code(), 3);
  EXPECT_EQ(exits[1].task().attempt(), 3);
  EXPECT_EQ(exits[1].exited().exit_code(), 0);
  // From the move on, the task's output (the agent's and the program's) is
  // in attempt 3's log directory, as the service's log route expects it.
  const std::string moved = ReadFile(log_dir + "/task-3.out");
  EXPECT_NE(moved.find("program of attempt 3"), std::string::npos) << moved;
  EXPECT_NE(moved.find("attempt=3"), std::string::npos) << moved;
  EXPECT_EQ(moved.find("program of attempt 2"), std::string::npos) << moved;
}

TEST_F(AgentEndToEndTest, ASpareWaitsWithNoProgramThenRunsTheNextAttemptInItsNodesPlace) {
  // The service answers attempt 2's registration with Spare: the agent
  // starts nothing and waits (standby); NextAttempt 3 gives its node a
  // failed node's place, and it runs attempt 3's program.
  v1::Assignment assignment = ShellAssignment(
      R"(echo "program of attempt $TFSLURM_ATTEMPT" > "$TEST_DIR/ran-$TFSLURM_ATTEMPT"; exit 0)");
  assignment.set_stay_for_next_attempt(true);
  service().SetRegisterReply([assignment](const v1::AgentMessage& m, int) {
    v1::ServiceMessage reply;
    if (m.task().attempt() == 2 && !m.register_().standby()) {
      reply.mutable_spare()->set_reason("node node3 is a spare of Slurm job 1");
    } else if (m.task().attempt() == 2) {
      reply.mutable_next_attempt()->set_attempt(3);
      reply.mutable_next_attempt()->set_reason("node3 (a spare) takes node2's place");
    } else if (!m.register_().standby()) {
      v1::Assignment a = assignment;
      (*a.mutable_env())["TFSLURM_ATTEMPT"] = "3";
      return std::vector<v1::ServiceMessage>{AssignmentMessage(a)};
    } else {
      reply.mutable_release()->set_reason("training succeeded");
    }
    return std::vector<v1::ServiceMessage>{reply};
  });
  StartAgent();
  ASSERT_EQ(agent_->WaitForExit(), 0);
  auto registers = Messages(v1::AgentMessage::kRegister);
  std::vector<std::pair<int, bool>> seen;
  for (const auto& r : registers) seen.push_back({r.task().attempt(), r.register_().standby()});
  EXPECT_EQ(seen,
            (std::vector<std::pair<int, bool>>{{2, false}, {2, true}, {3, false}, {3, true}}));
  EXPECT_FALSE(std::filesystem::exists(dir_.Path("ran-2"))) << "a spare runs no program";
  EXPECT_EQ(ReadFile(dir_.Path("ran-3")), "program of attempt 3\n");
  auto exits = Messages(v1::AgentMessage::kExited);
  ASSERT_EQ(exits.size(), 1u) << "only attempt 3's program ran and exited";
  EXPECT_EQ(exits[0].task().attempt(), 3);
}

TEST_F(AgentEndToEndTest, AnAssignmentInStandbyRestartsTheProgramAloneOnTheSamePort) {
  // A TF worker's program dies (kill -9); the service answers the standby
  // with the task's Assignment for the same attempt: the program runs again
  // on the same port, and its second run's exit is reported in attempt 2.
  v1::Assignment assignment =
      ShellAssignment(R"(echo "$TFSLURM_PORT" >> "$TEST_DIR/ports"; )"
                      R"([ -e "$TEST_DIR/ran" ] && exit 0; touch "$TEST_DIR/ran"; kill -9 $$)");
  assignment.set_stay_for_next_attempt(true);
  auto standbys = std::make_shared<std::atomic<int>>(0);
  service().SetRegisterReply([assignment, standbys](const v1::AgentMessage& m, int) {
    if (!m.register_().standby())
      return std::vector<v1::ServiceMessage>{AssignmentMessage(assignment)};
    if (++*standbys == 1) return std::vector<v1::ServiceMessage>{AssignmentMessage(assignment)};
    v1::ServiceMessage release;
    release.mutable_release()->set_reason("training succeeded");
    return std::vector<v1::ServiceMessage>{release};
  });
  StartAgent();
  ASSERT_EQ(agent_->WaitForExit(), 0) << "the second run's status";

  auto registers = Messages(v1::AgentMessage::kRegister);
  std::vector<std::pair<int, bool>> seen;
  for (const auto& r : registers) seen.push_back({r.task().attempt(), r.register_().standby()});
  EXPECT_EQ(seen, (std::vector<std::pair<int, bool>>{{2, false}, {2, true}, {2, true}}));
  const std::string port = std::to_string(registers[0].register_().port());
  EXPECT_EQ(ReadFile(dir_.Path("ports")), port + "\n" + port + "\n") << "the same port both times";
  auto exits = Messages(v1::AgentMessage::kExited);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].task().attempt(), 2);
  EXPECT_EQ(exits[0].exited().signal(), SIGKILL);
  EXPECT_EQ(exits[1].task().attempt(), 2);
  EXPECT_EQ(exits[1].exited().exit_code(), 0);
  EXPECT_NE(agent_->Log().find(
                "restarts this task's program alone in attempt 2, on the same port " + port),
            std::string::npos)
      << agent_->Log();
}

// The service of a task that waits in the job for attempt 3: its program
// exits 4 in attempt 2 and 0 in attempt 3; a standby in attempt 2 gets no
// word yet (the test sends NextAttempt), one in attempt 3 gets Release.
FakeAgentService::RegisterReply WaitForAttempt3Reply(const v1::Assignment& assignment) {
  return [assignment](const v1::AgentMessage& m, int) {
    if (m.register_().standby()) {
      if (m.task().attempt() == 2) return std::vector<v1::ServiceMessage>{};
      v1::ServiceMessage release;
      release.mutable_release()->set_reason("training succeeded");
      return std::vector<v1::ServiceMessage>{release};
    }
    v1::Assignment a = assignment;
    (*a.mutable_env())["TFSLURM_ATTEMPT"] = std::to_string(m.task().attempt());
    return std::vector<v1::ServiceMessage>{AssignmentMessage(a)};
  };
}

bool StandingBy(const std::vector<FakeAgentService::Received>& received) {
  return std::any_of(received.begin(), received.end(), [](const auto& r) {
    return r.message.has_register_() && r.message.register_().standby();
  });
}

TEST_F(AgentEndToEndTest, WaitsForTheNextAttemptLongerThanTheExitReportTimeout) {
  // A task done early waits while the others train: the exit report's
  // deadline (1 s here) must not end the wait.
  v1::Assignment assignment = ShellAssignment(R"([ "$TFSLURM_ATTEMPT" = 3 ] && exit 0; exit 4)");
  assignment.set_stay_for_next_attempt(true);
  service().SetRegisterReply(WaitForAttempt3Reply(assignment));
  StartAgent({{"--exit-report-timeout", "1"}});
  ASSERT_TRUE(service().WaitUntil(StandingBy, kTimeout));
  EXPECT_FALSE(agent_->WaitForExit(std::chrono::milliseconds(2500)).has_value())
      << "still waiting after twice the exit report's deadline";
  v1::ServiceMessage next;
  next.mutable_next_attempt()->set_attempt(3);
  service().Send(next);
  EXPECT_EQ(agent_->WaitForExit(), 0) << "attempt 3's program exited 0, then Release";
}

TEST_F(AgentEndToEndTest, AStandbyStreamBackAfterAServiceRestartWaitsOn) {
  // The service restarts while the agent waits in the job: once its standby
  // stream is back, the deadline for waiting without one (1 s here) is off.
  v1::Assignment assignment = ShellAssignment(R"([ "$TFSLURM_ATTEMPT" = 3 ] && exit 0; exit 4)");
  assignment.set_stay_for_next_attempt(true);
  service().SetRegisterReply(WaitForAttempt3Reply(assignment));
  StartAgent({{"--exit-report-timeout", "1"}});
  ASSERT_TRUE(service().WaitUntil(StandingBy, kTimeout));
  const int service_port = server_->port();
  server_.reset();
  server_ = std::make_unique<FakeServer>(service_port);
  service().SetRegisterReply(WaitForAttempt3Reply(assignment));
  ASSERT_TRUE(service().WaitUntil(StandingBy, kTimeout)) << "registered in standby again";
  EXPECT_FALSE(agent_->WaitForExit(std::chrono::milliseconds(2500)).has_value())
      << "still waiting, on its new stream, after twice the deadline";
  v1::ServiceMessage next;
  next.mutable_next_attempt()->set_attempt(3);
  service().Send(next);
  EXPECT_EQ(agent_->WaitForExit(), 0) << "attempt 3's program exited 0, then Release";
}

TEST_F(AgentEndToEndTest, SigtermWhileWaitingForTheNextAttemptEndsTheAgent) {
  v1::Assignment assignment = ShellAssignment("exit 5");
  assignment.set_stay_for_next_attempt(true);
  service().SetRegisterReply([assignment](const v1::AgentMessage& m, int) {
    if (m.register_().standby()) return std::vector<v1::ServiceMessage>{};  // no word yet
    return std::vector<v1::ServiceMessage>{AssignmentMessage(assignment)};
  });
  StartAgent();
  ASSERT_TRUE(service().WaitUntil(StandingBy, kTimeout));
  ::kill(agent_->pid(), SIGTERM);
  EXPECT_EQ(agent_->WaitForExit(), 5) << "the program's own status";
}

// TLS (issue 45): the agent verifies the service against the job's
// TFSLURM_CA and the host it dials, and refuses to register with one it
// cannot verify, exiting kAgentExitUnverifiedService with the reason.
class AgentTlsTest : public AgentEndToEndTest {
 protected:
  static tls::MadeCertificate Ca(const std::string& name) {
    const int64_t now = time(nullptr);
    return tls::MakeCa({name, {}, {}, now - 60, now + 86400}).value();
  }
  static tls::MadeCertificate Server(const tls::MadeCertificate& ca, int64_t not_after_from_now) {
    const int64_t now = time(nullptr);
    return tls::MakeServerCertificate(
               {"tfslurmd", {}, {"127.0.0.1"}, now - 120, now + not_after_from_now}, ca)
        .value();
  }
  void ServeTls(const tls::MadeCertificate& ca, const tls::MadeCertificate& server) {
    server_ = std::make_unique<FakeServer>(server.cert_pem + ca.cert_pem, server.key_pem);
  }
  std::map<std::string, std::string> EnvWithCa(const std::string& ca_pem) const {
    auto env = AgentEnv();
    env["TFSLURM_CA"] = ca_pem;
    return env;
  }
};

TEST_F(AgentTlsTest, RegistersWithAServiceItVerifiesAndKeepsTheCaFromItsProgram) {
  tls::MadeCertificate ca = Ca("site CA");
  ServeTls(ca, Server(ca, 86400));
  AssignOnRegister(ShellAssignment("tr '\\0' '\\n' < /proc/self/environ > \"$TEST_DIR/env\""));
  StartAgent({}, EnvWithCa(ca.cert_pem));
  ASSERT_TRUE(WaitForBody(v1::AgentMessage::kRegister));
  EXPECT_EQ(ReportedExit().exit_code(), 0);
  EXPECT_EQ(agent_->WaitForExit(), 0);
  std::string env = ReadFile(dir_.Path("env"));
  EXPECT_EQ(env.find("TFSLURM_CA="), std::string::npos) << "the agent's setting, not the program's";
}

TEST_F(AgentTlsTest, AWrongCaIsRefusedWithTheReasonAndNothingIsSent) {
  tls::MadeCertificate ca = Ca("site CA"), other = Ca("another CA");
  ServeTls(ca, Server(ca, 86400));
  StartAgent({}, EnvWithCa(other.cert_pem));
  ASSERT_EQ(agent_->WaitForExit(), kAgentExitUnverifiedService);
  EXPECT_NE(agent_->Log().find(std::string(kUnverifiedServiceLine) + server_->target() +
                               ": self-signed certificate in certificate chain (the service's "
                               "certificate: CN=tfslurmd, issued by CN=site CA) (checked against "
                               "TFSLURM_CA); not registering"),
            std::string::npos)
      << agent_->Log();
  EXPECT_TRUE(service().received().empty()) << "no message reached a service it could not verify";
}

TEST_F(AgentTlsTest, AnExpiredCertificateIsRefusedWithItsDate) {
  tls::MadeCertificate ca = Ca("site CA");
  ServeTls(ca, Server(ca, -60));
  StartAgent({}, EnvWithCa(ca.cert_pem));
  ASSERT_EQ(agent_->WaitForExit(), kAgentExitUnverifiedService);
  EXPECT_NE(agent_->Log().find(": certificate has expired (CN=tfslurmd, on "), std::string::npos)
      << agent_->Log();
  EXPECT_TRUE(service().received().empty());
}

TEST_F(AgentTlsTest, APlaintextServiceIsRefusedWhenTheJobSaysTls) {
  // server_ is the plaintext fake: someone answering without TLS where the
  // job expects tfslurmd's TLS.
  tls::MadeCertificate ca = Ca("site CA");
  StartAgent({}, EnvWithCa(ca.cert_pem));
  ASSERT_EQ(agent_->WaitForExit(), kAgentExitUnverifiedService);
  EXPECT_NE(agent_->Log().find(": no TLS handshake with 127.0.0.1:"), std::string::npos)
      << agent_->Log();
  EXPECT_TRUE(service().received().empty());
}

// Takes 127.0.0.1:`port` without listening on it: a connection to it is
// refused, as to a service that is down, and no other test's server (ctest
// runs two at once) can take the port meanwhile. Retries while the server
// that had it lets it go.
int HoldPortWithoutListening(int port) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

TEST_F(AgentTlsTest, AServiceThatIsDownIsRetriedNotRefused) {
  tls::MadeCertificate ca = Ca("site CA"), server = Server(ca, 86400);
  const int port = server_->port();
  server_ = std::make_unique<FakeServer>();  // elsewhere: nothing listens on `port`
  const int held = HoldPortWithoutListening(port);
  ASSERT_GE(held, 0) << "port " << port << " was not let go";
  StartAgent({{"--service", "127.0.0.1:" + std::to_string(port)}}, EnvWithCa(ca.cert_pem));
  EXPECT_FALSE(agent_->WaitForExit(std::chrono::seconds(2))) << agent_->Log();
  ::close(held);
  server_ = std::make_unique<FakeServer>(server.cert_pem + ca.cert_pem, server.key_pem, port);
  EXPECT_TRUE(WaitForBody(v1::AgentMessage::kRegister)) << "it registers once the service is up";
  EXPECT_EQ(agent_->Log().find(kUnverifiedServiceLine), std::string::npos) << agent_->Log();
}

TEST_F(AgentTlsTest, ATrustedCaThatIsNoCertificateIsAUsageError) {
  StartAgent({}, EnvWithCa("not a certificate"));
  ASSERT_EQ(agent_->WaitForExit(), 2);
  EXPECT_NE(agent_->Log().find("TFSLURM_CA holds no certificate"), std::string::npos)
      << agent_->Log();
}

// The node's relay (issue 49, agent/relay/): with TFSLURM_AGENT_RELAY=node
// a node's agents reach the service through one relay process and one
// connection, and nothing of what they do changes.
class AgentRelayTest : public AgentTlsTest {
 protected:
  void TearDown() override {
    AgentTlsTest::TearDown();
    for (pid_t pid : Relays()) ::kill(pid, SIGKILL);
  }

  // Task `proc` of job 4242's step 0 on node1, `local`-th there.
  std::map<std::string, std::string> RelayEnv(int proc = 3, int local = 0) const {
    auto env = AgentEnv();
    env["TFSLURM_AGENT_RELAY"] = "node";
    env["SLURM_STEP_ID"] = "0";
    env["TMPDIR"] = dir_.path();
    env["SLURM_PROCID"] = std::to_string(proc);
    env["SLURM_LOCALID"] = std::to_string(local);
    return env;
  }

  // The relays this test's agents started (their sockets are in dir_).
  std::vector<pid_t> Relays() const {
    std::vector<pid_t> pids;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string name = entry.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cmdline = ReadFile(entry.path() / "cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      if (cmdline.find(" relay --socket " + dir_.path() + "/") != std::string::npos &&
          !ProcessIsDead(std::stoi(name)))
        pids.push_back(std::stoi(name));
    }
    return pids;
  }

  // The relay's log (relay_route.h names it by job, step, node and service).
  std::string RelayLog() const {
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path() + "/tfslurm-relay-" +
                                                                 std::to_string(getuid()))) {
      const std::string name = entry.path().filename();
      if (name.starts_with("4242.0.node1.") && name.ends_with(".log"))
        return ReadFile(entry.path());
    }
    return "";
  }
};

TEST_F(AgentRelayTest, TwoAgentsOfANodeShareOneRelayAndOneConnection) {
  AssignOnRegister(ShellAssignment("exit 0"));
  StartAgent({}, RelayEnv(3, 0));
  AgentProcess second(AgentArgs(), RelayEnv(4, 1), dir_.Path("agent2.log"));
  EXPECT_EQ(agent_->WaitForExit(), 0);
  EXPECT_EQ(second.WaitForExit(), 0) << second.Log();
  EXPECT_TRUE(WaitForBody(v1::AgentMessage::kExited, 2));
  const std::vector<std::string> peers = service().peers();
  ASSERT_EQ(peers.size(), 2u);
  EXPECT_EQ(peers[0], peers[1]) << "one connection for both agents' streams";
  EXPECT_EQ(Relays().size(), 1u) << "one relay for the node";
  EXPECT_NE(agent_->Log().find("registering with the service at " + server_->target() +
                               " through the node's relay"),
            std::string::npos)
      << agent_->Log();
  EXPECT_NE(RelayLog().find("relay: serving the node's agents at "), std::string::npos)
      << RelayLog();
}

// tfslurmd sends the TF cluster's bytes once per connection to streams
// that ask by digest (agent.proto, Register.cluster_by_digest), as the relay
// does: the second agent's Assignment names the cluster alone, and its
// program gets the whole TF_CONFIG all the same.
TEST_F(AgentRelayTest, TheClusterComesOnceAndEveryProgramOfTheNodeGetsItsTfConfig) {
  const std::string cluster = R"({"worker": ["node1:40000", "node1:40001"]})";
  v1::Assignment assignment =
      ShellAssignment(R"(printf '%s' "$TF_CONFIG" > "$TEST_DIR/tf.$TEST_INDEX")");
  assignment.set_cluster_digest("c0ffee");
  service().SetRegisterReply([assignment, cluster](const v1::AgentMessage& m, int stream) {
    v1::Assignment a = assignment;
    a.set_index(m.task().proc_id() - 3);
    (*a.mutable_env())["TEST_INDEX"] = std::to_string(a.index());
    if (stream == 0) a.set_cluster_zlib(wire::CompressCluster(cluster));
    return std::vector<v1::ServiceMessage>{AssignmentMessage(a)};
  });
  StartAgent({}, RelayEnv(3, 0));
  ASSERT_TRUE(WaitForBody(v1::AgentMessage::kRegister, 1));
  AgentProcess second(AgentArgs(), RelayEnv(4, 1), dir_.Path("agent2.log"));
  EXPECT_EQ(agent_->WaitForExit(), 0);
  EXPECT_EQ(second.WaitForExit(), 0) << second.Log();
  EXPECT_EQ(ReadFile(dir_.Path("tf.0")), wire::TfConfigForTask(cluster, "worker", 0));
  EXPECT_EQ(ReadFile(dir_.Path("tf.1")), wire::TfConfigForTask(cluster, "worker", 1))
      << "filled in by the relay";
  for (const v1::AgentMessage& m : Messages(v1::AgentMessage::kRegister))
    EXPECT_TRUE(m.register_().cluster_by_digest()) << "asked by the relay";
}

TEST_F(AgentRelayTest, AKilledRelayIsReplacedAndTheProgramCarriesOn) {
  AssignOnRegister(ShellAssignment(R"(
    echo $$ > "$TEST_DIR/pid"
    while [ ! -e "$TEST_DIR/go" ]; do sleep 0.05; done
    exit 4)"));
  StartAgent({}, RelayEnv());
  ASSERT_TRUE(Eventually([&] { return Exists(dir_.Path("pid")); }));
  const std::vector<pid_t> first = Relays();
  ASSERT_EQ(first.size(), 1u);
  ::kill(first[0], SIGKILL);
  ASSERT_TRUE(service().WaitUntil(
      [](const std::vector<FakeAgentService::Received>& received) {
        return std::any_of(received.begin(), received.end(), [](const auto& r) {
          return r.message.has_register_() && r.message.register_().reconnect();
        });
      },
      kTimeout))
      << agent_->Log();
  const std::vector<pid_t> second = Relays();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NE(second[0], first[0]) << "a new relay";
  WriteFile(dir_.Path("go"), "");
  EXPECT_EQ(agent_->WaitForExit(), 4);
  EXPECT_EQ(ReportedExit().exit_code(), 4);
}

TEST_F(AgentRelayTest, TheRelayCarriesItsAgentsAcrossARestartOfTheService) {
  v1::Assignment assignment = ShellAssignment(R"(
    echo started >> "$TEST_DIR/starts"
    while [ ! -e "$TEST_DIR/go" ]; do sleep 0.05; done
    exit 4)");
  AssignOnRegister(assignment);
  StartAgent({}, RelayEnv());
  ASSERT_TRUE(Eventually([&] { return Exists(dir_.Path("starts")); }));
  const std::vector<pid_t> relay = Relays();
  ASSERT_EQ(relay.size(), 1u);
  const int service_port = server_->port();
  server_.reset();
  server_ = std::make_unique<FakeServer>(service_port);
  AssignOnRegister(assignment);
  ASSERT_TRUE(WaitForBody(v1::AgentMessage::kRegister)) << agent_->Log();
  EXPECT_TRUE(Messages(v1::AgentMessage::kRegister).at(0).register_().reconnect());
  EXPECT_EQ(Relays(), relay) << "the same relay, its connection made again";
  WriteFile(dir_.Path("go"), "");
  EXPECT_EQ(agent_->WaitForExit(), 4);
  EXPECT_EQ(ReportedExit().exit_code(), 4);
  EXPECT_EQ(ReadFile(dir_.Path("starts")), "started\n");
}

TEST_F(AgentRelayTest, ThroughTheRelayTheServiceIsVerifiedInTls) {
  tls::MadeCertificate ca = Ca("site CA");
  ServeTls(ca, Server(ca, 86400));
  AssignOnRegister(ShellAssignment("exit 0"));
  auto env = RelayEnv();
  env["TFSLURM_CA"] = ca.cert_pem;
  StartAgent({}, env);
  EXPECT_EQ(ReportedExit().exit_code(), 0);
  EXPECT_EQ(agent_->WaitForExit(), 0);
  EXPECT_NE(RelayLog().find(" (TLS)"), std::string::npos) << RelayLog();
}

TEST_F(AgentRelayTest, AServiceTheRelayCannotVerifyIsRefusedWithTheReason) {
  tls::MadeCertificate ca = Ca("site CA"), other = Ca("another CA");
  ServeTls(ca, Server(ca, 86400));
  auto env = RelayEnv();
  env["TFSLURM_CA"] = other.cert_pem;
  StartAgent({}, env);
  ASSERT_EQ(agent_->WaitForExit(), kAgentExitUnverifiedService) << agent_->Log();
  EXPECT_NE(agent_->Log().find(" through the node's relay"), std::string::npos) << agent_->Log();
  EXPECT_NE(agent_->Log().find(": self-signed certificate in certificate chain"), std::string::npos)
      << agent_->Log();
  EXPECT_TRUE(service().received().empty()) << "no message reached a service it could not verify";
}

TEST_F(AgentRelayTest, ARelayDirectoryOthersCanEnterIsNotUsed) {
  const std::string dir = dir_.path() + "/tfslurm-relay-" + std::to_string(getuid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  AssignOnRegister(ShellAssignment("exit 0"));
  StartAgent({}, RelayEnv());
  EXPECT_EQ(agent_->WaitForExit(), 0);
  EXPECT_EQ(ReportedExit().exit_code(), 0);
  EXPECT_NE(agent_->Log().find("is not a directory of this user's alone (mode 0700"),
            std::string::npos)
      << agent_->Log();
  EXPECT_TRUE(Relays().empty());
}

}  // namespace
}  // namespace tfslurm::agent::testing
