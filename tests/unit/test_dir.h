// A directory of its own for the running test: real files (a SQLite store,
// an output root) in a place no other test, and no other run of this one
// (ctest runs tests in parallel processes), uses.
//
// Thread safety: call from the test's thread.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace tfslurm {

// <temp>/<prefix>-<pid>-<test name>, made empty. The test removes it. A
// value-parameterized test's name is "Name/0": its '/' becomes '-', or the
// directory would be Name's 0, and removing it would leave Name behind.
inline std::filesystem::path FreshTestDir(std::string_view prefix) {
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  for (char& c : name)
    if (c == '/') c = '-';
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              (std::string(prefix) + "-" + std::to_string(getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace tfslurm
