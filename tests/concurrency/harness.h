// What the concurrency tests share: the unit tests' fakes made safe to call
// from many threads (the service calls Slurm outside its lock), a clock the
// test moves while the service reads it, a store in a temp directory and a
// deadline-bound wait. Nothing here sleeps to make a test pass: waits poll a
// condition and fail the test at their deadline.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "service/core/core.h"
#include "service/core/ports/store.h"
#include "tests/unit/fakes.h"

namespace tfslurm::concurrency {

class AtomicClock final : public Clock {
 public:
  int64_t NowMs() override { return now_ms_.load(); }
  void Advance(int64_t ms) { now_ms_ += ms; }

 private:
  std::atomic<int64_t> now_ms_{1'700'000'000'000};
};

class LockedRandomness final : public Randomness {
 public:
  std::string NewSecret() override {
    std::lock_guard lock(mu_);
    return random_.NewSecret();
  }
  std::string NewExperimentId() override {
    std::lock_guard lock(mu_);
    return random_.NewExperimentId();
  }

 private:
  std::mutex mu_;
  testing::FakeRandomness random_;
};

// FakeSlurm behind one mutex, as slurmctld serializes RPCs. CancelJob also
// ends the job, as Slurm would.
class LockedSlurm final : public SlurmClient {
 public:
  explicit LockedSlurm(int nodes = 16, int cpus = 64) {
    fake_.partition.nodes.clear();
    for (int i = 1; i <= nodes; ++i)
      fake_.partition.nodes.push_back({"node" + std::to_string(i), cpus, 256000});
  }
  StatusOr<PartitionShape> GetPartition(const std::string& name) override {
    std::lock_guard lock(mu_);
    return fake_.GetPartition(name);
  }
  StatusOr<int64_t> Submit(const SubmitRequest& r) override {
    std::lock_guard lock(mu_);
    return fake_.Submit(r);
  }
  StatusOr<std::vector<JobInfo>> LoadJobs() override {
    std::lock_guard lock(mu_);
    return fake_.LoadJobs();
  }
  Status CancelJob(int64_t job_id, int signal) override {
    std::lock_guard lock(mu_);
    if (fake_.jobs.count(job_id)) fake_.SetState(job_id, JobState::kCancelled);
    return fake_.CancelJob(job_id, signal);
  }
  Status SignalStep(int64_t job_id, int step_id, int signal) override {
    std::lock_guard lock(mu_);
    return fake_.SignalStep(job_id, step_id, signal);
  }
  Status ShrinkJob(int64_t job_id, const std::string& keep) override {
    std::lock_guard lock(mu_);
    return fake_.ShrinkJob(job_id, keep);
  }

  // Runs `f` on the fake under the lock.
  template <typename F>
  auto With(F f) {
    std::lock_guard lock(mu_);
    return f(fake_);
  }
  // The job submitted under `job_name`, and its secret; 0 while none.
  int64_t JobOf(const std::string& job_name, std::string* secret = nullptr) {
    std::lock_guard lock(mu_);
    for (const auto& [id, job] : fake_.jobs) {
      if (job.name != job_name) continue;
      if (secret)
        for (const auto& r : fake_.submitted)
          if (r.job_name == job_name) *secret = testing::FakeSlurm::SecretOf(r);
      return id;
    }
    return 0;
  }
  JobState StateOf(int64_t job) {
    std::lock_guard lock(mu_);
    auto it = fake_.jobs.find(job);
    return it == fake_.jobs.end() ? JobState::kUnknown : it->second.state;
  }
  void SetState(int64_t job, JobState state, int exit_code = 0) {
    std::lock_guard lock(mu_);
    fake_.SetState(job, state, exit_code);
  }

 private:
  std::mutex mu_;
  testing::FakeSlurm fake_;
};

// A directory under /tmp, removed at the end.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("tfslurm-concurrency-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Polls `done` until it holds or `timeout` passes; false on timeout.
inline bool WaitFor(const std::function<bool()>& done,
                    std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace tfslurm::concurrency
