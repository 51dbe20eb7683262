#include "service/store/ownership_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tfslurm::store {
namespace {

class OwnershipLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tfs-own-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    db_ = dir_ + "/tfslurm.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_, db_;
};

TEST_F(OwnershipLockTest, ASecondOwnerIsRefusedWithTheHolderNamed) {
  auto first = DatabaseOwnership::Acquire(db_);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->lock_path(), db_ + ".lock");

  // flock belongs to the open file description: a second open in this same
  // process conflicts exactly as a second tfslurmd would.
  auto second = DatabaseOwnership::Acquire(db_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  const std::string& message = second.status().message();
  EXPECT_NE(message.find("owned by another tfslurmd"), std::string::npos) << message;
  EXPECT_NE(message.find("pid " + std::to_string(getpid()) + " on host "), std::string::npos)
      << message;
  EXPECT_NE(message.find(db_ + ".lock"), std::string::npos) << message;
}

TEST_F(OwnershipLockTest, ReleasedWhenTheOwnerGoesAway) {
  {
    auto first = DatabaseOwnership::Acquire(db_);
    ASSERT_TRUE(first.ok());
  }
  auto again = DatabaseOwnership::Acquire(db_);
  EXPECT_TRUE(again.ok()) << again.status().message();
}

TEST_F(OwnershipLockTest, MovedOwnershipKeepsTheLock) {
  auto first = DatabaseOwnership::Acquire(db_);
  ASSERT_TRUE(first.ok());
  DatabaseOwnership moved = std::move(first).value();
  EXPECT_FALSE(DatabaseOwnership::Acquire(db_).ok());
}

TEST_F(OwnershipLockTest, AStaleLockFileOfADeadProcessIsNoObstacle) {
  // A daemon killed with kill -9 leaves its lock file, but the kernel dropped
  // its lock with its last descriptor.
  std::ofstream(db_ + ".lock") << "pid 999999 on host elsewhere since 2026-01-01T00:00:00Z\n";
  auto owner = DatabaseOwnership::Acquire(db_);
  ASSERT_TRUE(owner.ok()) << owner.status().message();
  std::ifstream in(db_ + ".lock");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str().rfind("pid " + std::to_string(getpid()) + " on host ", 0), 0u) << text.str();
}

TEST(NetworkFileSystemNameTest, NamesNetworkFileSystemsOnly) {
  EXPECT_EQ(NetworkFileSystemName(0x6969), "nfs");
  EXPECT_EQ(NetworkFileSystemName(0xFF534D42), "cifs");
  EXPECT_EQ(NetworkFileSystemName(0x0BD00BD0), "lustre");
  EXPECT_EQ(NetworkFileSystemName(0x47504653), "gpfs");
  EXPECT_EQ(NetworkFileSystemName(0xEF53), "");      // ext4
  EXPECT_EQ(NetworkFileSystemName(0x01021994), "");  // tmpfs
  EXPECT_EQ(NetworkFileSystemName(0x58465342), "");  // xfs
}

}  // namespace
}  // namespace tfslurm::store
