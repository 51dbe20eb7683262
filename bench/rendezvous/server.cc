// bench_rendezvous_server: tfslurmd as service/main.cc wires it (abseil's
// deadlock detection off, SQLite store, the lifecycle, the gRPC agent
// endpoint, the REST listener with the agent JSON routes, TCP_NODELAY and the
// raised listen backlog, the 200 ms ticker; keep it in step with main.cc),
// with one difference: Slurm is an in-process stand-in that starts every job
// at once on as many nodes as it asks for. A job of 4,096 tasks cannot run on
// the local cluster (12 CPUs), and the attempt secret only exists in the
// job's environment; here the stand-in sees the SubmitRequest and hands the
// secret to the load generator.
//
// Driven line by line on stdin by bench_rendezvous_storm (its parent):
//   new N    -> submits an experiment of N tasks; answers "exp ID SECRET JOB"
//   cancel ID -> DELETE of the experiment; answers "ok" or "error ..."
//   quit
// First line on stdout: "ready agent_port=P http_port=H pid=PID".
#include <absl/synchronization/mutex.h>
#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "service/agentrpc/agent_endpoint.h"
#include "service/api/auth.h"
#include "service/api/connection_threads.h"
#include "service/api/http_api.h"
#include "service/api/listen_backlog.h"
#include "service/core/experiments.h"
#include "service/slurm/slurm_client.h"
#include "service/store/store.h"

namespace {

using tfslurm::PartitionShape;
using tfslurm::Status;
using tfslurm::StatusOr;
namespace slurm = tfslurm::slurm;

// Tasks per node in the benchmark's specs; a partition of 128 such nodes
// holds the largest attempt the service accepts (SpecLimits::max_tasks).
constexpr int kTasksPerNode = 32;
constexpr int kNodes = 128;

class StandInSlurm final : public slurm::SlurmClient {
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

  StatusOr<int64_t> Submit(const slurm::SubmitRequest& r) override {
    std::lock_guard lock(mu_);
    slurm::JobInfo j;
    j.job_id = next_job_id_++;
    j.name = r.job_name;
    // Running at once: the storm is about registration, not queueing.
    j.state = slurm::JobState::kRunning;
    for (int i = 0; i < r.nodes; ++i) j.node_names.push_back(NodeName(i));
    j.nodes = "node[0000-" + NodeName(r.nodes - 1).substr(4) + "]";
    jobs_.push_back(j);
    for (const auto& e : r.environment)
      if (e.rfind("TFSLURM_SECRET=", 0) == 0) last_secret_ = e.substr(15);
    return j.job_id;
  }

  StatusOr<std::vector<slurm::JobInfo>> LoadJobs() override {
    std::lock_guard lock(mu_);
    return jobs_;
  }

  Status CancelJob(int64_t job_id, int) override {
    std::lock_guard lock(mu_);
    for (auto& j : jobs_)
      if (j.job_id == job_id) j.state = slurm::JobState::kCancelled;
    return Status::Ok();
  }

  Status SignalStep(int64_t, int, int) override { return Status::Ok(); }

  std::string last_secret() {
    std::lock_guard lock(mu_);
    return last_secret_;
  }

 private:
  std::mutex mu_;
  PartitionShape partition_;
  std::vector<slurm::JobInfo> jobs_;
  int64_t next_job_id_ = 1000;
  std::string last_secret_;
};

void RaiseFileLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // As service/main.cc: Debian's abseil checks every absl::Mutex acquisition
  // (all of gRPC's locks) for lock-order cycles.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::string dir = "/tmp/bench-rendezvous";
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
    } else {
      fprintf(stderr, "usage: %s [--dir D] [--poll-interval-ms N] [--heartbeat-ms N]\n", argv[0]);
      return 2;
    }
  }
  RaiseFileLimit();
  signal(SIGPIPE, SIG_IGN);
  std::filesystem::create_directories(dir);

  auto store = tfslurm::store::OpenSqliteStore(dir + "/tfslurm.db");
  if (!store.ok()) {
    fprintf(stderr, "%s\n", store.status().message().c_str());
    return 1;
  }
  StandInSlurm slurm;
  auto clock = tfslurm::NewSystemClock();
  auto random = tfslurm::NewSystemRandomness();
  tfslurm::LifecycleConfig config;
  config.output_root = dir + "/out";
  config.launch.agent_path = "/usr/bin/tfslurm-agent";
  config.poll_interval_ms = poll_ms;
  config.heartbeat_interval_ms = heartbeat_ms;

  tfslurm::Experiments experiments(**store, slurm, *clock, *random, config);
  auto grpc_server = tfslurm::agentrpc::StartAgentGrpcServer(experiments, "127.0.0.1:0");
  if (!grpc_server.ok()) {
    fprintf(stderr, "%s\n", grpc_server.status().message().c_str());
    return 1;
  }
  config.launch.service_address = "127.0.0.1:" + std::to_string((*grpc_server)->port());
  experiments.SetLaunch(config.launch);

  // As service/main.cc sets up its REST listener (with --no-auth).
  auto auth = tfslurm::api::NewOpenAuthenticator();
  httplib::Server http;
  http.new_task_queue = [] { return new tfslurm::api::OnDemandThreads(2048); };
  http.set_read_timeout(10, 0);
  http.set_write_timeout(10, 0);
  http.set_keep_alive_timeout(5);
  http.set_keep_alive_max_count(10000);
  http.set_tcp_nodelay(true);
  tfslurm::api::RegisterExperimentRoutes(http, experiments, *clock, *auth, {});
  tfslurm::agentrpc::RegisterAgentHttpRoutes(http, experiments);
  int http_port = http.bind_to_any_port("127.0.0.1");
  if (http_port <= 0) {
    fprintf(stderr, "cannot listen on 127.0.0.1: %s\n", strerror(errno));
    return 1;
  }
  tfslurm::api::RaiseListenBacklog(http_port);
  std::thread http_thread([&] { http.listen_after_bind(); });
  std::atomic<bool> stopping{false};
  std::thread ticker([&] {
    while (!stopping) {
      experiments.Tick();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });

  printf("ready agent_port=%d http_port=%d pid=%d\n", (*grpc_server)->port(), http_port, getpid());
  fflush(stdout);

  std::string line;
  int seq = 0;
  while (std::getline(std::cin, line)) {
    if (line.rfind("new ", 0) == 0) {
      int n = std::stoi(line.substr(4));
      int per_node = std::min(n, kTasksPerNode);
      int ps = std::max(1, n / 32);
      nlohmann::json spec = {
          {"id", "storm-" + std::to_string(getpid()) + "-" + std::to_string(++seq)},
          {"command", {"/bin/true"}},
          {"cluster", {{"ps", ps}, {"worker", n - ps}}},
          {"placement", "spread"},
          {"resources",
           {{"partition", "bench"},
            {"nodes", n / per_node},
            {"tasks_per_node", per_node},
            {"time_limit", "01:00:00"}}},
      };
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
  stopping = true;
  http.stop();
  http_thread.join();
  ticker.join();
  (*grpc_server)->Shutdown();
  return 0;
}
