// bench_rendezvous_server: tfslurmd's own wiring (service/daemon/daemon.h:
// the lifecycle, the gRPC agent endpoint, the REST listener with the agent
// JSON routes, the 200 ms ticker) on a SQLite store, with --no-auth and
// without the dashboard and log routes. One difference: Slurm is an
// in-process stand-in that starts every job at once on as many nodes as it
// asks for. A job of 4,096 tasks cannot run on the local cluster (12 CPUs),
// and the attempt secret only exists in the job's environment; here the
// stand-in sees the SubmitRequest and hands the secret to the load generator.
//
// Driven line by line on stdin by bench_rendezvous_storm or
// bench_in_place_storm (its parent):
//   new N [pytorch] -> submits an experiment of N tasks: TensorFlow (1 ps per
//                      32 tasks, the rest workers), or N PyTorch ranks that
//                      restart in place (restart.in_allocation); answers
//                      "exp ID SECRET JOB"
//   cancel ID       -> DELETE of the experiment; answers "ok" or "error ..."
//   quit
// With --tls DIR both ports speak TLS with DIR/server.pem and server.key
// (`tfslurmd tls init`'s files), and SIGHUP reloads them as tfslurmd's does
// (the storm's rotation test sends it while agents connect).
// First line on stdout: "ready agent_port=P http_port=H pid=PID tick_ms=T
// poll_ms=P": T is how often core's timers run (a restart in place is
// decided at one of them), P how often Slurm is polled.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "service/core/ports/slurm.h"
#include "service/daemon/daemon.h"
#include "service/store/sqlite_store.h"
#include "service/system/accounts.h"
#include "service/system/system.h"

namespace {

using tfslurm::JobInfo;
using tfslurm::JobState;
using tfslurm::PartitionShape;
using tfslurm::SlurmClient;
using tfslurm::Status;
using tfslurm::StatusOr;
using tfslurm::SubmitRequest;

// Tasks per node in the benchmark's specs; a partition of 512 such nodes
// holds the largest attempt the service accepts by default
// (kDefaultMaxTasks, 16,384).
constexpr int kTasksPerNode = 32;
constexpr int kNodes = 512;

class StandInSlurm final : public SlurmClient {
 public:
  StandInSlurm() {
    partition_.name = "bench";
    for (int i = 0; i < kNodes; ++i)
      partition_.nodes.push_back({NodeName(i), kTasksPerNode, int64_t{kTasksPerNode} * 4000});
  }

  static std::string NodeName(int i) {
    char buf[16];
    snprintf(buf, sizeof buf, "node%04d", i);
    return buf;
  }

  StatusOr<PartitionShape> GetPartition(const std::string& name) override {
    if (!name.empty() && name != partition_.name)
      return tfslurm::InvalidArgument("no partition '" + name + "'",
                                      {{"resources.partition", "unknown"}});
    return partition_;
  }

  StatusOr<int64_t> Submit(const SubmitRequest& r) override {
    std::lock_guard lock(mu_);
    JobInfo j;
    j.job_id = next_job_id_++;
    j.name = r.job_name;
    // Running at once: the storm is about registration, not queueing.
    j.state = JobState::kRunning;
    for (int i = 0; i < r.nodes; ++i) j.node_names.push_back(NodeName(i));
    j.nodes = "node[0000-" + NodeName(r.nodes - 1).substr(4) + "]";
    jobs_.push_back(j);
    // The agents read the secret from the file the job's environment names.
    for (const auto& e : r.environment)
      if (e.rfind("TFSLURM_SECRET_FILE=", 0) == 0) {
        std::ifstream in(e.substr(20));
        last_secret_.assign(std::istreambuf_iterator<char>(in), {});
      }
    return j.job_id;
  }

  StatusOr<std::vector<JobInfo>> LoadJobs() override {
    std::lock_guard lock(mu_);
    return jobs_;
  }

  Status CancelJob(int64_t job_id, int) override {
    std::lock_guard lock(mu_);
    for (auto& j : jobs_)
      if (j.job_id == job_id) j.state = JobState::kCancelled;
    return Status::Ok();
  }

  Status SignalStep(int64_t, int, int) override { return Status::Ok(); }
  Status ShrinkJob(int64_t, const std::string&) override { return Status::Ok(); }

  std::string last_secret() {
    std::lock_guard lock(mu_);
    return last_secret_;
  }

 private:
  std::mutex mu_;
  PartitionShape partition_;
  std::vector<JobInfo> jobs_;
  int64_t next_job_id_ = 1000;
  std::string last_secret_;
};

std::string ExperimentId(int seq) {
  return "storm-" + std::to_string(getpid()) + "-" + std::to_string(seq);
}

nlohmann::json Resources(int n) {
  const int per_node = std::min(n, kTasksPerNode);
  return {{"partition", "bench"},
          {"nodes", n / per_node},
          {"tasks_per_node", per_node},
          {"time_limit", "01:00:00"}};
}

nlohmann::json TensorflowSpec(int n, int seq) {
  const int ps = std::max(1, n / 32);
  return {{"id", ExperimentId(seq)},
          {"command", {"/bin/true"}},
          {"cluster", {{"ps", ps}, {"worker", n - ps}}},
          {"placement", "spread"},
          {"resources", Resources(n)}};
}

// Ranks whose failure restarts the attempt in the same job (the defaults
// say so: restart.in_allocation, retryable_exit in restart.on); spelled
// out, since the in-place benchmark depends on it.
// SIGHUP reloads the TLS certificate, as tfslurmd's main loop does. The
// signal is blocked before the daemon starts its threads; one thread waits
// for it for the process's life.
void ReloadOnSighup(tfslurm::daemon::Daemon* daemon) {
  std::thread([daemon] {
    sigset_t hup;
    sigemptyset(&hup);
    sigaddset(&hup, SIGHUP);
    for (int sig = 0; sigwait(&hup, &sig) == 0;) {
      auto reloaded = daemon->ReloadTls();
      fprintf(stderr, "SIGHUP: %s\n",
              reloaded.ok() ? reloaded->c_str() : reloaded.status().message().c_str());
    }
  }).detach();
}

nlohmann::json TorchSpec(int n, int seq) {
  return {{"id", ExperimentId(seq)},
          {"framework", "pytorch"},
          {"command", {"/bin/true"}},
          {"resources", Resources(n)},
          {"restart", {{"in_allocation", true}, {"max_restarts", 3}, {"on", {"retryable_exit"}}}}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp/bench-rendezvous", tls_dir;
  int64_t poll_ms = 2000;
  int heartbeat_ms = 5000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool has_value = i + 1 < argc;
    if (a == "--dir" && has_value) {
      dir = argv[++i];
    } else if (a == "--poll-interval-ms" && has_value) {
      poll_ms = std::stoll(argv[++i]);
    } else if (a == "--heartbeat-ms" && has_value) {
      heartbeat_ms = std::stoi(argv[++i]);
    } else if (a == "--tls" && has_value) {
      tls_dir = argv[++i];
    } else {
      fprintf(stderr, "usage: %s [--dir D] [--poll-interval-ms N] [--heartbeat-ms N] [--tls DIR]\n",
              argv[0]);
      return 2;
    }
  }
  std::filesystem::create_directories(dir);
  // SIGHUP is taken by ReloadOnSighup's thread: blocked before any thread
  // starts (the store's checkpointer is the first), so none dies of it.
  sigset_t hup;
  sigemptyset(&hup);
  sigaddset(&hup, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &hup, nullptr);

  auto store = tfslurm::store::OpenSqliteStore(dir + "/tfslurm.db");
  if (!store.ok()) {
    fprintf(stderr, "%s\n", store.status().message().c_str());
    return 1;
  }
  StandInSlurm slurm;
  auto clock = tfslurm::system::NewSystemClock();
  auto random = tfslurm::system::NewSystemRandomness();
  auto files = tfslurm::system::NewLocalFiles();
  auto accounts = tfslurm::system::NewPersonalAccounts();
  tfslurm::daemon::DaemonOptions options;
  options.http_host = "127.0.0.1";
  options.http_port = 0;
  options.agent_listen = "127.0.0.1:0";
  options.core.output_root = dir + "/out";
  options.core.launch.agent_path = "/usr/bin/tfslurm-agent";
  options.core.poll_interval_ms = poll_ms;
  options.core.heartbeat_interval_ms = heartbeat_ms;
  options.no_auth = true;
  options.web_assets = false;
  options.logs = false;
  if (!tls_dir.empty())
    options.tls = {tls_dir + "/server.pem", tls_dir + "/server.key", tls_dir + "/ca.pem"};
  auto daemon =
      tfslurm::daemon::Daemon::Start(options, {**store, slurm, *clock, *random, *files, *accounts});
  if (!daemon.ok()) {
    fprintf(stderr, "%s\n", daemon.status().message().c_str());
    return 1;
  }
  tfslurm::Experiments& experiments = (*daemon)->experiments();
  ReloadOnSighup(daemon->get());

  printf("ready agent_port=%d http_port=%d pid=%d tick_ms=%d poll_ms=%lld\n",
         (*daemon)->agent_port(), (*daemon)->http_port(), getpid(),
         tfslurm::daemon::kTickIntervalMs, static_cast<long long>(poll_ms));
  fflush(stdout);

  std::string line;
  int seq = 0;
  while (std::getline(std::cin, line)) {
    if (line.rfind("new ", 0) == 0) {
      std::istringstream words(line.substr(4));
      int n = 0;
      std::string framework;
      words >> n >> framework;
      auto spec = framework == "pytorch" ? TorchSpec(n, ++seq) : TensorflowSpec(n, ++seq);
      auto r = experiments.Submit(spec, "bench", false);
      if (!r.ok()) {
        printf("error %s\n", r.status().message().c_str());
      } else {
        printf("exp %s %s %lld\n", r->experiment.id.c_str(), slurm.last_secret().c_str(),
               static_cast<long long>(r->attempt.slurm_job_id));
      }
    } else if (line.rfind("cancel ", 0) == 0) {
      Status s = experiments.Cancel(line.substr(7), "benchmark run over");
      if (s.ok())
        printf("ok\n");
      else
        printf("error %s\n", s.message().c_str());
    } else if (line == "quit") {
      break;
    } else {
      printf("error unknown command '%s'\n", line.c_str());
    }
    fflush(stdout);
  }
  (*daemon)->Stop();
  return 0;
}
