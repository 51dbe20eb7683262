// Where the node's relay lives, and when the agent will not use it
// (agent/relay/relay_route.h). What the relay does with real agents:
// agent_end_to_end_test.cc, AgentRelayTest.
#include "agent/relay/relay_route.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "agent/relay/node_relay.h"
#include "tests/agent/temp_dir.h"

namespace tfslurm::agent {
namespace {

constexpr char kService[] = "tfslurmd.example.org:8081";

class RelayPlaceTest : public ::testing::Test {
 protected:
  EnvLookup Env() const {
    return [vars = vars_](const std::string& name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  }
  std::string Dir() const { return dir_.path() + "/tfslurm-relay-" + std::to_string(getuid()); }

  testing::TempDir dir_;
  std::map<std::string, std::string> vars_ = {{"TFSLURM_AGENT_RELAY", "node"},
                                              {"SLURM_JOB_ID", "77"},
                                              {"SLURM_STEP_ID", "0"},
                                              {"SLURMD_NODENAME", "gpu-a/01"},
                                              {"TMPDIR", dir_.path()}};
};

TEST_F(RelayPlaceTest, TheFilesAreNamedByJobStepAndNodeInADirectoryOfTheUsersAlone) {
  auto place = RelayPlaceFor(Env(), getuid(), kService);
  ASSERT_TRUE(place.ok()) << place.status().message();
  ASSERT_TRUE(place->has_value());
  const std::string base = (*place)->socket_path.substr(0, (*place)->socket_path.size() - 5);
  EXPECT_EQ(base.substr(0, Dir().size() + 15), Dir() + "/77.0.gpu-a_01.") << base;
  EXPECT_EQ(base.size(), Dir().size() + 15 + 8) << "a hash of the cluster and the service";
  EXPECT_EQ((*place)->socket_path, base + ".sock");
  EXPECT_EQ((*place)->lock_path, base + ".lock");
  EXPECT_EQ((*place)->log_path, base + ".log");
  struct stat st;
  ASSERT_EQ(lstat(Dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(RelayPlaceTest, AnotherServiceOrClusterWithTheSameJobIdHasAnotherRelay) {
  auto first = RelayPlaceFor(Env(), getuid(), kService);
  auto other_service = RelayPlaceFor(Env(), getuid(), "tfslurmd.example.org:8082");
  vars_["SLURM_CLUSTER_NAME"] = "other";
  auto other_cluster = RelayPlaceFor(Env(), getuid(), kService);
  ASSERT_TRUE(first.ok() && other_service.ok() && other_cluster.ok());
  EXPECT_NE((*first)->socket_path, (*other_service)->socket_path);
  EXPECT_NE((*first)->socket_path, (*other_cluster)->socket_path);
}

TEST_F(RelayPlaceTest, UnsetOrOffMeansNoRelay) {
  vars_["TFSLURM_AGENT_RELAY"] = "off";
  auto off = RelayPlaceFor(Env(), getuid(), kService);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->has_value());
  vars_.erase("TFSLURM_AGENT_RELAY");
  auto unset = RelayPlaceFor(Env(), getuid(), kService);
  ASSERT_TRUE(unset.ok());
  EXPECT_FALSE(unset->has_value());
}

TEST_F(RelayPlaceTest, AnUnknownModeIsNamedWithTheValuesAllowed) {
  vars_["TFSLURM_AGENT_RELAY"] = "yes";
  auto place = RelayPlaceFor(Env(), getuid(), kService);
  ASSERT_FALSE(place.ok());
  EXPECT_EQ(place.status().message(),
            "TFSLURM_AGENT_RELAY='yes': the values are 'node' (through the node's relay) and "
            "'off'");
}

TEST_F(RelayPlaceTest, ADirectoryOfAnotherUserOrOpenToOthersOrALinkIsRefused) {
  ASSERT_EQ(mkdir(Dir().c_str(), 0700), 0);
  auto other_user = RelayPlaceFor(Env(), getuid() + 1, kService);
  EXPECT_FALSE(other_user.ok()) << "owned by another uid than the agent's";

  ASSERT_EQ(chmod(Dir().c_str(), 0770), 0);
  auto open_to_group = RelayPlaceFor(Env(), getuid(), kService);
  ASSERT_FALSE(open_to_group.ok());
  EXPECT_NE(open_to_group.status().message().find("is not a directory of this user's alone"),
            std::string::npos);

  ASSERT_EQ(rmdir(Dir().c_str()), 0);
  ASSERT_EQ(mkdir(dir_.Path("elsewhere").c_str(), 0700), 0);
  ASSERT_EQ(symlink(dir_.Path("elsewhere").c_str(), Dir().c_str()), 0);
  EXPECT_FALSE(RelayPlaceFor(Env(), getuid(), kService).ok()) << "a link is not followed";
}

TEST_F(RelayPlaceTest, ALongNodeNameIsHashedToFitASocketPath) {
  vars_["SLURMD_NODENAME"] = std::string(120, 'n');
  auto place = RelayPlaceFor(Env(), getuid(), kService);
  ASSERT_TRUE(place.ok()) << place.status().message();
  ASSERT_TRUE(place->has_value());
  EXPECT_LE((*place)->socket_path.size(), 107u);
  EXPECT_EQ((*place)->socket_path.find("nnnn"), std::string::npos);
}

TEST(NodeRelayTest, ARelayNobodyUsesEndsAfterItsFirstStreamTimeout) {
  testing::TempDir dir;
  NodeRelayOptions options;
  options.socket_path = dir.Path("relay.sock");
  options.service = "127.0.0.1:1";  // never reached: no agent comes
  options.first_stream_timeout = std::chrono::milliseconds(100);
  // The wait counts from the relay's start.
  const auto start = std::chrono::steady_clock::now();
  auto relay = StartNodeRelay(options);
  ASSERT_TRUE(relay.ok()) << relay.status().message();
  (*relay)->ServeUntilIdle();
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(100));
  EXPECT_LT(waited, std::chrono::seconds(5));
  EXPECT_EQ((*relay)->open_streams(), 0);
}

TEST(NodeRelayTest, ARelayProcessThatEndsIdleRemovesItsSocketLockAndLog) {
  testing::TempDir dir;
  const std::string lock = dir.Path("r.lock"), log = dir.Path("r.log");
  int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  close(open(log.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  NodeRelayOptions options;
  options.socket_path = dir.Path("r.sock");
  options.service = "127.0.0.1:1";
  options.first_stream_timeout = std::chrono::milliseconds(50);
  EXPECT_EQ(RunNodeRelayProcess(options, fd, {lock, log}), 0);
  close(fd);
  struct stat st;
  EXPECT_NE(stat(options.socket_path.c_str(), &st), 0);
  EXPECT_NE(stat(lock.c_str(), &st), 0);
  EXPECT_NE(stat(log.c_str(), &st), 0);
}

TEST(NodeRelayTest, ARelayWithoutTheLockDoesNotServe) {
  testing::TempDir dir;
  const std::string lock = dir.Path("r.lock");
  int holder = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_EQ(flock(holder, LOCK_EX | LOCK_NB), 0);  // another relay's
  int fd = open(lock.c_str(), O_RDWR | O_CLOEXEC);
  NodeRelayOptions options;
  options.socket_path = dir.Path("r.sock");
  options.service = "127.0.0.1:1";
  EXPECT_EQ(RunNodeRelayProcess(options, fd, {lock}), 1);
  struct stat st;
  EXPECT_EQ(stat(lock.c_str(), &st), 0) << "another relay's lock is left alone";
  EXPECT_NE(stat(options.socket_path.c_str(), &st), 0);
  close(fd);
  close(holder);
}

}  // namespace
}  // namespace tfslurm::agent
