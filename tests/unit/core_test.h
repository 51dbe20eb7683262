// The parts a test of core builds it from: a real SQLite store in a fresh
// directory, a fake of every other port, and a config whose output root is
// in that directory. A fixture derives from CoreTest, names its directory,
// and builds core from these (NewCore, or core's parts) in its own
// SetUp, after CoreTest's; its own members go first when it is destroyed.
//
// Thread safety: as gtest fixtures, on the test's thread.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "service/core/core.h"
#include "service/core/core_options.h"
#include "service/store/sqlite_store.h"
#include "tests/unit/fakes.h"
#include "tests/unit/test_dir.h"

namespace tfslurm::testing {

class CoreTest : public ::testing::Test {
 protected:
  explicit CoreTest(std::string dir_prefix) : dir_prefix_(std::move(dir_prefix)) {}

  void SetUp() override {
    dir_ = FreshTestDir(dir_prefix_);
    store_ = std::move(store::OpenSqliteStore((dir_ / "db").string())).value();
    config_.output_root = (dir_ / "out").string();
    config_.launch = {"/opt/tfslurm-agent", "svc:1"};
  }
  // A fixture's TearDown drops what uses the store first, then calls this.
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  CorePorts Ports() { return {*store_, slurm_, clock_, random_, files_, accounts_}; }

  std::filesystem::path dir_;
  std::unique_ptr<Store> store_;
  FakeSlurm slurm_;
  FakeClock clock_;
  FakeRandomness random_;
  FakeFiles files_;
  FakeAccounts accounts_;
  CoreConfig config_;

 private:
  std::string dir_prefix_;
};

}  // namespace tfslurm::testing
