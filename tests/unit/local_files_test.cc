// The file-system port on the real file system (service/system/), and
// acting as another account on one thread (ScopedThreadIdentity). Acting as
// another account needs root: those tests are skipped for anyone else
// (tests/run.sh runs as root, as CI does).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "service/system/accounts.h"
#include "service/system/system.h"
#include "service/system/thread_identity.h"
#include "tests/unit/test_dir.h"

namespace tfslurm {
namespace {

namespace fs = std::filesystem;
using system::ScopedThreadIdentity;

// nobody, who owns nothing here.
const RunAs kNobody{"nobody", 65534, 65534, {65534}};

RunAs Self() { return *system::LookupAccount(geteuid()); }

uid_t OwnerOf(const fs::path& p) {
  struct stat st;
  EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
  return st.st_uid;
}

void Write(const fs::path& p, const std::string& text, fs::perms perms) {
  std::ofstream(p) << text;
  fs::permissions(p, perms);
}

class LocalFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("local-files");
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::unique_ptr<Files> files_ = system::NewLocalFiles();
};

// The cases that act as another account. The skip is in SetUp, where gtest
// skips the test body: a GTEST_SKIP in a helper the body calls only returns
// from the helper, and the body went on as someone who is not root.
class LocalFilesAsRootTest : public LocalFilesTest {
 protected:
  void SetUp() override {
    LocalFilesTest::SetUp();
    if (geteuid() != 0) GTEST_SKIP() << "acting as another account needs root";
  }
};

TEST_F(LocalFilesAsRootTest, OnlyTheSwitchingThreadActsAsTheAccount) {
  // A thread that exists before the switch (a new one would inherit its
  // creator's credentials) looks while the switch is in force.
  std::promise<void> switched;
  std::promise<uid_t> seen;
  std::thread other([&] {
    switched.get_future().wait();
    seen.set_value(geteuid());
  });
  {
    ScopedThreadIdentity as(kNobody.uid, kNobody.gid, {kNobody.gid});
    EXPECT_TRUE(as.ok()) << as.error();
    EXPECT_EQ(geteuid(), kNobody.uid);
    EXPECT_EQ(getegid(), kNobody.gid);
    switched.set_value();
    EXPECT_EQ(seen.get_future().get(), 0u);
  }
  other.join();
  EXPECT_EQ(geteuid(), 0u);
  EXPECT_EQ(getegid(), 0u);
}

TEST_F(LocalFilesAsRootTest, TheExperimentDirectoryIsGivenToItsAccountAndDeeperOnesMadeAsIt) {
  fs::path exp = dir_ / "exp";
  ASSERT_TRUE(files_->CreateExperimentDirectory(exp, kNobody).ok());
  EXPECT_EQ(OwnerOf(exp), kNobody.uid);
  EXPECT_EQ(fs::status(exp).permissions() & fs::perms::others_all, fs::perms::none);
  // Again (a resume): still nobody's, and accepted.
  ASSERT_TRUE(files_->CreateExperimentDirectory(exp, kNobody).ok());
  ASSERT_TRUE(files_->CreateDirectories(exp / "logs" / "attempt-1", kNobody).ok());
  EXPECT_EQ(OwnerOf(exp / "logs"), kNobody.uid);
  EXPECT_EQ(OwnerOf(exp / "logs" / "attempt-1"), kNobody.uid);
}

TEST_F(LocalFilesAsRootTest, DirectoriesAreMadeWithTheAccountsPermissionsNotRoots) {
  // Root may write in a root-only directory; nobody may not.
  fs::path root_only = dir_ / "root-only";
  fs::create_directory(root_only);
  fs::permissions(root_only, fs::perms::owner_all);
  Status s = files_->CreateDirectories(root_only / "model", kNobody);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);  // no retry helps (DirectoryError)
  EXPECT_NE(s.message().find("as nobody"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(root_only / "model"));
}

TEST_F(LocalFilesAsRootTest, SomeoneElsesDirectoryOrASymlinkIsNotTakenAsTheExperiments) {
  fs::path theirs = dir_ / "theirs";
  fs::create_directory(theirs);
  ASSERT_EQ(chown(theirs.c_str(), 4242, 4242), 0);
  Status s = files_->CreateExperimentDirectory(theirs, kNobody);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("belongs to uid 4242, not to nobody"), std::string::npos)
      << s.message();
  EXPECT_EQ(OwnerOf(theirs), 4242u);

  fs::path link = dir_ / "link";
  fs::create_directory_symlink(theirs, link);
  s = files_->CreateExperimentDirectory(link, kNobody);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("not a symlink"), std::string::npos) << s.message();
}

TEST_F(LocalFilesAsRootTest, ACheckpointSymlinkToARootOnlyFileIsNotReadForItsOwner) {
  fs::path model = dir_ / "model";
  fs::create_directory(model);
  ASSERT_EQ(chown(model.c_str(), kNobody.uid, kNobody.gid), 0);
  fs::path secret = dir_ / "secret";
  Write(secret, "model_checkpoint_path: \"model.ckpt-4242\"\n", fs::perms::owner_read);
  fs::create_symlink(secret, model / "checkpoint");
  // As root it would be read: the owner's identity is what keeps it out.
  auto as_root = files_->ReadCheckpointState(model, Framework::kTensorflow, Self());
  ASSERT_TRUE(as_root.has_value());
  EXPECT_EQ(as_root->step, 4242);
  EXPECT_FALSE(files_->ReadCheckpointState(model, Framework::kTensorflow, kNobody).has_value());
}

TEST_F(LocalFilesTest, TheOwnersOwnCheckpointIsReadAsThem) {
  fs::path model = dir_ / "model";
  fs::create_directory(model);
  Write(model / "checkpoint", "model_checkpoint_path: \"model.ckpt-30\"\n",
        fs::perms::owner_read | fs::perms::owner_write);
  RunAs as = Self();
  if (geteuid() == 0) {
    as = kNobody;
    ASSERT_EQ(chown((model / "checkpoint").c_str(), kNobody.uid, kNobody.gid), 0);
  }
  auto state = files_->ReadCheckpointState(model, Framework::kTensorflow, as);
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->step, 30);
}

TEST_F(LocalFilesTest, AFifoInPlaceOfTheCheckpointFileDoesNotHangTheRead) {
  fs::path model = dir_ / "model";
  fs::create_directory(model);
  ASSERT_EQ(mkfifo((model / "checkpoint").c_str(), 0600), 0);
  EXPECT_FALSE(files_->ReadCheckpointState(model, Framework::kTensorflow, Self()).has_value());
}

TEST_F(LocalFilesTest, JaxsLatestCheckpointIsTheLargestStepDirectory) {
  fs::path model = dir_ / "model";
  fs::create_directory(model);
  EXPECT_FALSE(files_->ReadCheckpointState(model, Framework::kJax, Self()).has_value());
  for (const char* d : {"40", "80", "120.orbax-checkpoint-tmp", "digests"})
    fs::create_directory(model / d);
  Write(model / "200", "a file, not a step directory", fs::perms::owner_read);
  Write(model / "ckpt-300.pt", "torch's", fs::perms::owner_read);
  auto state = files_->ReadCheckpointState(model, Framework::kJax, Self());
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->step, 80);
  EXPECT_EQ(state->path, "80");
  // The same directory read for PyTorch finds torch's file, not JAX's.
  auto torch = files_->ReadCheckpointState(model, Framework::kPytorch, Self());
  ASSERT_TRUE(torch.has_value());
  EXPECT_EQ(torch->step, 300);
}

TEST_F(LocalFilesTest, ADeletedExperimentsTreeGoesButNotWhatItsSymlinksPointTo) {
  fs::path outside = dir_ / "outside";
  fs::create_directories(outside / "keep");
  Write(outside / "keep" / "precious", "x", fs::perms::owner_all);
  fs::path exp = dir_ / "exp";
  ASSERT_TRUE(files_->CreateExperimentDirectory(exp, Self()).ok());
  fs::create_directories(exp / "logs" / "attempt-1");
  Write(exp / "logs" / "attempt-1" / "task-0.out", "hello", fs::perms::owner_all);
  fs::create_directory_symlink(outside / "keep", exp / "to-dir");
  fs::create_symlink(outside / "keep" / "precious", exp / "logs" / "to-file");
  auto aside = files_->SetAsideExperimentDirectory(exp.string());
  ASSERT_TRUE(aside.ok()) << aside.status().message();
  EXPECT_FALSE(fs::exists(exp)) << "the id's directory is free at once";
  ASSERT_TRUE(fs::is_directory(*aside));
  auto removed = files_->RemoveDirectoryTree(*aside, Self());
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  // logs, attempt-1, task-0.out, to-dir, to-file, and the directory itself.
  EXPECT_EQ(*removed, 6);
  EXPECT_FALSE(fs::exists(fs::symlink_status(*aside)));
  EXPECT_TRUE(fs::exists(outside / "keep" / "precious")) << "a symlink's target is left alone";
  // No directory: nothing to remove.
  auto none = files_->SetAsideExperimentDirectory((dir_ / "never").string());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");
}

TEST_F(LocalFilesTest, AnExperimentDirectoryThatIsASymlinkIsLeftAlone) {
  fs::path outside = dir_ / "outside";
  fs::create_directories(outside);
  Write(outside / "precious", "x", fs::perms::owner_all);
  fs::create_directory_symlink(outside, dir_ / "exp");
  auto aside = files_->SetAsideExperimentDirectory((dir_ / "exp").string());
  EXPECT_EQ(aside.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::is_symlink(dir_ / "exp"));
  EXPECT_TRUE(fs::exists(outside / "precious"));
}

TEST_F(LocalFilesAsRootTest, AnotherAccountsFilesInTheTreeAreNotRemovedAsTheOwner) {
  fs::path exp = dir_ / "exp";
  ASSERT_TRUE(files_->CreateExperimentDirectory(exp, kNobody).ok());
  // A directory of root's inside it, which nobody may not empty.
  fs::create_directories(exp / "roots");
  Write(exp / "roots" / "file", "x", fs::perms::owner_all);
  fs::permissions(exp / "roots", fs::perms::owner_all);
  auto aside = files_->SetAsideExperimentDirectory(exp.string());
  ASSERT_TRUE(aside.ok());
  auto removed = files_->RemoveDirectoryTree(*aside, kNobody);
  EXPECT_FALSE(removed.ok());
  EXPECT_TRUE(fs::exists(fs::path(*aside) / "roots" / "file")) << "removed as nobody, not root";
}

}  // namespace
}  // namespace tfslurm
