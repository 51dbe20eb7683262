// Fakes for unit tests of core: a Slurm that records what it is asked and
// reports jobs the test sets, a clock the test moves, predictable randomness
// a file system in memory, and a channel that keeps what the service sends to
// one agent.
#pragma once

#include <csignal>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "service/core/agent_messages.h"
#include "service/core/experiments.h"

namespace tfslurm::testing {

class FakeClock final : public Clock {
 public:
  int64_t NowMs() override { return now_ms; }
  void Advance(int64_t ms) { now_ms += ms; }
  int64_t now_ms = 1'700'000'000'000;
};

class FakeRandomness final : public Randomness {
 public:
  std::string NewSecret() override { return "secret-" + std::to_string(++secrets); }
  std::string NewExperimentId() override { return "generated-" + std::to_string(++ids); }
  int secrets = 0, ids = 0;
};

// A file system in memory: records the directories core creates, answers
// checkpoint states the test sets, and fails creation when told to.
// Thread-safe, for the concurrency tests.
// Every secret file any FakeFiles wrote, by path: FakeSlurm::SecretOf reads
// a job's secret as its agents would, from the file its environment names.
class SecretFiles {
 public:
  void Put(const std::string& path, const std::string& content) {
    std::lock_guard lock(mu_);
    by_path_[path] = content;
  }
  std::string Get(const std::string& path) {
    std::lock_guard lock(mu_);
    auto it = by_path_.find(path);
    return it == by_path_.end() ? "" : it->second;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> by_path_;
};
inline SecretFiles& WrittenSecrets() {
  static SecretFiles files;
  return files;
}

class FakeFiles final : public Files {
 public:
  Status CreateExperimentDirectory(const std::string& path, const RunAs& as) override {
    return CreateDirectories(path, as);
  }
  Status CreateDirectories(const std::string& path, const RunAs& as) override {
    std::lock_guard lock(mu_);
    if (!refuse_create.ok()) return refuse_create;
    created.insert(path);
    created_as[path] = as.user;
    return Status::Ok();
  }
  Status CheckCanCreateDirectories(const std::string& path, const RunAs&) override {
    std::lock_guard lock(mu_);
    if (auto it = refuse_directories.find(path); it != refuse_directories.end()) return it->second;
    return Status::Ok();
  }
  Status CheckWorkdir(const std::string& path, const RunAs&) override {
    std::lock_guard lock(mu_);
    if (missing_workdirs.count(path)) return FailedPrecondition("No such file or directory");
    return Status::Ok();
  }
  std::optional<CheckpointState> ReadCheckpointState(const std::string& model_dir, Framework,
                                                     const RunAs&) override {
    std::lock_guard lock(mu_);
    auto it = checkpoints.find(model_dir);
    if (it == checkpoints.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::string> ReadFileTail(const std::string& path, size_t max_bytes,
                                          const RunAs&) override {
    std::lock_guard lock(mu_);
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second.size() > max_bytes ? it->second.substr(it->second.size() - max_bytes)
                                         : it->second;
  }
  Status WriteSecretFile(const std::string& path, const std::string& content,
                         const RunAs& as) override {
    std::lock_guard lock(mu_);
    if (!refuse_create.ok()) return refuse_create;
    files[path] = content;
    created_as[path] = as.user;
    WrittenSecrets().Put(path, content);
    return Status::Ok();
  }
  StatusOr<std::string> SetAsideExperimentDirectory(const std::string& path) override {
    std::lock_guard lock(mu_);
    if (!created.erase(path)) return std::string();
    set_aside.push_back(path);
    return path + ".aside";
  }
  StatusOr<int64_t> RemoveDirectoryTree(const std::string& path, const RunAs& as) override {
    std::lock_guard lock(mu_);
    removed[path] = as.user;
    return 1;
  }
  void SetCheckpoint(const std::string& model_dir, const std::string& path, int64_t step) {
    std::lock_guard lock(mu_);
    checkpoints[model_dir] = {path, step};
  }
  bool Created(const std::string& path) {
    std::lock_guard lock(mu_);
    return created.count(path) > 0;
  }

  Status refuse_create;
  std::set<std::string> created;
  std::map<std::string, std::string> created_as;  // path -> the account it was made as
  std::map<std::string, CheckpointState> checkpoints;
  std::map<std::string, std::string> files;          // ReadFileTail reads these (path -> text)
  std::set<std::string> missing_workdirs;            // CheckWorkdir refuses these
  std::map<std::string, Status> refuse_directories;  // CheckCanCreateDirectories's answers
  std::vector<std::string> set_aside;                // paths SetAsideExperimentDirectory moved
  std::map<std::string, std::string> removed;        // path -> the account it was removed as

 private:
  std::mutex mu_;
};

// Accounts: every owner runs as an account of its own name (uid 1000 + the
// order owners were first seen in), except the names in `refused`.
class FakeAccounts final : public Accounts {
 public:
  StatusOr<RunAs> ForOwner(const std::string& owner) override {
    std::lock_guard lock(mu_);
    if (refused.count(owner)) return Status{StatusCode::kPermissionDenied, "no account " + owner};
    auto [it, added] = uids_.emplace(owner, 1000 + static_cast<uint32_t>(uids_.size()));
    return RunAs{owner, it->second, it->second, {it->second}, {}};
  }
  std::set<std::string> refused;

 private:
  std::mutex mu_;
  std::map<std::string, uint32_t> uids_;
};

class FakeSlurm final : public SlurmClient {
 public:
  FakeSlurm() {
    partition.name = "debug";
    for (int i = 1; i <= 3; ++i) partition.nodes.push_back({"node" + std::to_string(i), 4, 8000});
  }

  StatusOr<PartitionShape> GetPartition(const std::string& name) override {
    if (!refuse_partition.ok()) return refuse_partition;
    if (auto it = more_partitions.find(name); it != more_partitions.end()) return it->second;
    if (!name.empty() && name != partition.name)
      return InvalidArgument("no partition named '" + name + "'",
                             {{"resources.partition", "unknown"}});
    return partition;
  }
  StatusOr<int64_t> Submit(const SubmitRequest& r) override {
    if (!refuse_submit.ok()) return refuse_submit;
    submitted.push_back(r);
    int64_t id = next_job_id++;
    JobInfo j;
    j.job_id = id;
    j.name = r.job_name;
    j.state = JobState::kPending;
    jobs[id] = j;
    // slurmctld took the job but its answer was lost (an RPC timeout).
    if (lose_submit_answer) return Unavailable("slurmctld did not answer in time");
    return id;
  }
  StatusOr<std::vector<JobInfo>> LoadJobs() override {
    ++load_jobs_calls;
    if (!refuse_load_jobs.ok()) return refuse_load_jobs;
    std::vector<JobInfo> out;
    for (auto& [_, j] : jobs) out.push_back(j);
    return out;
  }
  Status CancelJob(int64_t job_id, int signal) override {
    cancelled.push_back(job_id);
    return Status::Ok();
  }
  Status SignalStep(int64_t job_id, int step_id, int signal) override {
    signalled_steps.push_back(job_id);
    return Status::Ok();
  }
  Status ShrinkJob(int64_t job_id, const std::string& keep) override {
    shrunk.emplace_back(job_id, keep);
    return Status::Ok();
  }

  void SetState(int64_t job, JobState state, int exit_code = 0) {
    jobs[job].state = state;
    jobs[job].exit_code = exit_code;
    jobs[job].nodes = "node[1-3]";
    jobs[job].node_names = {"node1", "node2", "node3"};
  }
  // The secret the agents read from the file the job's environment names
  // (TFSLURM_SECRET_FILE), as FakeFiles wrote it.
  static std::string SecretOf(const SubmitRequest& r) {
    for (const auto& e : r.environment)
      if (e.rfind("TFSLURM_SECRET_FILE=", 0) == 0) return WrittenSecrets().Get(e.substr(20));
    return "";
  }

  PartitionShape partition;
  std::map<std::string, PartitionShape> more_partitions;  // by name, besides `partition`
  Status refuse_submit, refuse_partition, refuse_load_jobs;
  bool lose_submit_answer = false;
  std::vector<SubmitRequest> submitted;
  std::map<int64_t, JobInfo> jobs;
  std::vector<int64_t> cancelled, signalled_steps;
  std::vector<std::pair<int64_t, std::string>> shrunk;  // job id, the nodes it keeps
  int64_t next_job_id = 100;
  int load_jobs_calls = 0;
};

class RecordingChannel final : public TaskChannel {
 public:
  void Send(const ServiceMsg& m) override {
    std::lock_guard lock(mu);
    messages.push_back(m);
  }
  template <typename T>
  std::vector<T> All() {
    std::lock_guard lock(mu);
    std::vector<T> out;
    for (auto& m : messages)
      if (auto* p = std::get_if<T>(&m)) out.push_back(*p);
    return out;
  }
  std::mutex mu;
  std::vector<ServiceMsg> messages;
};

}  // namespace tfslurm::testing
