// bench_rendezvous_storm: N simulated agents registering at once.
//
// For each size N it starts a fresh bench_rendezvous_server (so the server's
// peak RSS belongs to that size), then runs the storm `--warmup + --runs`
// times. One run:
//   1. asks the server for a new experiment of N tasks (and its secret):
//      TensorFlow parameter servers, whose Assignments carry the whole
//      cluster (compressed), or with --framework pytorch N ranks, whose
//      Assignments carry none (the floor sends the same shapes);
//   2. opens N gRPC channels, one TCP connection each as N agents on N hosts
//      would, and waits until all are connected (timed apart: "connect");
//      with --agents-per-connection K, N/K channels, each carrying the
//      streams of K agents: what the service sees when the agents of a node
//      share one connection (per-node aggregation, issue 49), and each
//      connection asks for the TF cluster by digest as a node's relay does
//      (its bytes come once per connection); with
//      --relay-agent PATH as well, each group of K goes through a real node
//      relay (`PATH relay`, agent/relay/node_relay.h), one process per
//      group started for each size, so that the relays' own cost is in the
//      figures (on these same cores; on a cluster each runs on its node);
//      with --node-streams instead, each connection carries one ConnectNode
//      stream standing for the node's relay (agent.proto): its K agents are
//      lanes of it, their Registers written as the relay writes frames (one
//      NodeUp in flight, the frames queued meanwhile in the next), so that
//      the server holds N/K streams rather than N (issue 49);
//   3. "go": starts N Connect streams whose first message is Register (or
//      N/K ConnectNode streams and a Register frame per lane), as fast as
//      one thread can (agents started by one srun);
//   4. waits for every Assignment. Per agent it records when its Register
//      was handed to the transport (OnWriteDone; on a node stream, of the
//      NodeUp that carried it) and when its Assignment arrived (OnReadDone;
//      on a node stream, an Assignment naming the cluster by digest alone is
//      whole at its arrival, the bytes having come earlier on the stream);
//   5. closes the streams (a node stream: each lane's closed frame, then its
//      half-close, and its end awaited) and cancels the experiment.
// Figures per run: last registration -> last assignment, whole storm (go ->
// last assignment), registrations per second (N / storm), and per agent
// register -> assignment. While the storm runs, a sampler reads the server's
// /proc/PID/status every 2 ms (Threads, VmRSS); VmHWM is read after the run.
//
// Prints a Markdown summary (one row per N) on stdout; per-run rows go to
// stderr, and with --runs-csv FILE to FILE. Exits 1 after the table when a
// run (a warm-up run too) had an error: an agent refused, a stream broken or
// an assignment missing (on a node stream: a lane ended before its
// assignment, or the stream, or its end or a lane's not OK at the close), a
// cancel refused, or a server that did not exit 0.
//
// --tls DIR: both of the server's ports speak TLS (a CA and a server
// certificate for 127.0.0.1 made in DIR as `tfslurmd tls init` makes them),
// and every agent verifies it, as real agents do; "connect" then includes
// each agent's TLS handshake. --rotate-every-ms N (with --tls): while each
// run connects and registers, a new server certificate from the same CA is
// written every N ms and the server is sent SIGHUP, as an admin rotating
// certificates would; afterwards both ports must present the last one. Any
// agent refused, broken or missing fails the program (exit 1).
#include <absl/synchronization/mutex.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent.grpc.pb.h"
#include "bench/rendezvous/storm_common.h"
#include "tls/probe.h"
#include "tls/tls_init.h"

namespace {

using bench::Clock;
using bench::CpuMs;
using bench::Ms;
using bench::Percentile;
using bench::ProcStatus;
using bench::ReadProcStatus;
using bench::SelfCpuMs;
using bench::ServerProcess;
using tfslurm::agent::v1::AgentFrame;
using tfslurm::agent::v1::AgentMessage;
using tfslurm::agent::v1::AgentService;
using tfslurm::agent::v1::NodeDown;
using tfslurm::agent::v1::NodeUp;
using tfslurm::agent::v1::ServiceFrame;
using tfslurm::agent::v1::ServiceMessage;

// ----------------------------------------------------------------- agents --

// The streams of one connection that stands for a node's relay
// (--agents-per-connection without --relay-agent): the load generator asks
// for the TF cluster by digest as a relay does (agent.proto,
// Register.cluster_by_digest), and an agent whose Assignment names the
// cluster alone has it once its bytes have come on any stream of the
// connection (agent/relay/cluster_cache.h).
struct SharedConnection {
  std::mutex mu;
  std::map<std::string, Clock::time_point> arrived;  // digest -> when its bytes came
};

struct Storm {
  Clock::time_point go;
  std::mutex mu;
  std::condition_variable cv;
  int answered = 0;  // assignments + refusals + broken streams
  int done = 0;      // streams finished (OnDone)
  int refused = 0, broken = 0;
  // Node streams whose end, or a lane's end, was not OK although every lane
  // of theirs had been assigned.
  int close_errors = 0;
  std::string first_error, first_close_error;
  // The status of the first node stream that ended with an error counted
  // (its lanes' errors say what was missed, not why).
  std::string first_failed_status;

  // Needs `mu` held.
  void Fail(int Storm::*counter, const std::string& why) {
    ++(this->*counter);
    std::string& first = counter == &Storm::close_errors ? first_close_error : first_error;
    if (first.empty()) first = why;
  }
};

// A gRPC status for people: "code 12" (UNIMPLEMENTED) and its message.
std::string StatusText(int code, const std::string& message) {
  std::string text = "code " + std::to_string(code);
  return message.empty() ? text : text + ": " + message;
}

struct Experiment {
  std::string id, secret;
  long long job = 0;
};

// Agent `proc`'s Register, as its agent writes it.
AgentMessage RegisterMessage(const Experiment& exp, int proc, int tasks_per_node, bool by_digest) {
  AgentMessage m;
  auto* task = m.mutable_task();
  task->set_experiment_id(exp.id);
  task->set_attempt(1);
  task->set_secret(exp.secret);
  task->set_proc_id(proc);
  auto* r = m.mutable_register_();
  r->set_slurm_job_id(exp.job);
  int node = proc / tasks_per_node;
  r->set_node_id(node);
  r->set_local_id(proc % tasks_per_node);
  char name[16];
  snprintf(name, sizeof name, "node%04d", node);
  r->set_node_name(name);
  r->set_address(name);
  r->set_port(40000 + proc % tasks_per_node);
  r->set_cluster_by_digest(by_digest);
  return m;
}

// What the figures need of one agent, whichever way it reached the server.
struct AgentTimes {
  Clock::time_point registered_at{}, assigned_at{};
  // When its TF_CONFIG was whole; nullopt: its Assignment named a cluster
  // whose bytes never came.
  std::optional<Clock::time_point> complete_at;
  size_t tf_config_bytes = 0;
  bool carried_cluster = false;  // its Assignment carried the cluster's bytes
};

class SimulatedAgent final : public grpc::ClientBidiReactor<AgentMessage, ServiceMessage> {
 public:
  SimulatedAgent(AgentService::Stub* stub, Storm* storm, AgentMessage register_message,
                 SharedConnection* shared)
      : storm_(storm), shared_(shared), register_(std::move(register_message)) {
    stub->async()->Connect(&context_, this);
    // Close() writes from outside the reactions, maybe after the service
    // has ended the stream (a refusal ends it): the hold keeps the stream,
    // and OnDone back, until then.
    AddHold();
    StartWrite(&register_);
    StartRead(&reply_);
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    if (!registered_at_.time_since_epoch().count()) registered_at_ = Clock::now();
  }

  void OnReadDone(bool ok) override {
    auto now = Clock::now();
    std::lock_guard lock(storm_->mu);
    if (ok && reply_.has_assignment()) {
      const auto& a = reply_.assignment();
      assigned_at_ = now;
      // What carries TF_CONFIG on the stream: the compressed cluster object.
      tf_config_bytes_ = a.tf_config().size() + a.cluster_zlib().size();
      if (!a.cluster_zlib().empty()) {
        carried_cluster_ = true;
        if (shared_ && !a.cluster_digest().empty()) {
          std::lock_guard shared_lock(shared_->mu);
          shared_->arrived.emplace(a.cluster_digest(), now);
        }
      } else if (!a.cluster_digest().empty()) {
        cluster_digest_ = a.cluster_digest();
      }
    } else if (ok && reply_.has_refused()) {
      storm_->Fail(&Storm::refused, "refused: " + reply_.refused().reason());
    } else {
      storm_->Fail(&Storm::broken, "stream ended before an assignment");
    }
    reply_.Clear();  // the assignment holds the whole cluster; keep memory flat
    ++storm_->answered;
    storm_->cv.notify_all();
  }

  void OnDone(const grpc::Status&) override {
    std::lock_guard lock(storm_->mu);
    ++storm_->done;
    storm_->cv.notify_all();
  }

  void Close() {
    StartWritesDone();
    RemoveHold();
  }

  // Once every agent has answered.
  AgentTimes Times() const {
    return {registered_at_, assigned_at_, CompleteAt(), tf_config_bytes_, carried_cluster_};
  }

 private:
  // When its TF_CONFIG was whole: its Assignment's arrival or, when that
  // named the cluster by digest alone, the arrival of the cluster's bytes
  // on its connection if later. nullopt: the bytes never came.
  std::optional<Clock::time_point> CompleteAt() const {
    if (cluster_digest_.empty()) return assigned_at_;
    if (!shared_) return std::nullopt;
    std::lock_guard shared_lock(shared_->mu);
    auto it = shared_->arrived.find(cluster_digest_);
    if (it == shared_->arrived.end()) return std::nullopt;
    return std::max(assigned_at_, it->second);
  }

  Storm* storm_;
  SharedConnection* const shared_;
  grpc::ClientContext context_;
  AgentMessage register_;
  ServiceMessage reply_;
  Clock::time_point registered_at_{}, assigned_at_{};
  size_t tf_config_bytes_ = 0;
  bool carried_cluster_ = false;
  std::string cluster_digest_;  // named the cluster by this digest alone
};

// A node's relay on one ConnectNode stream (--node-streams): each of its
// agents is a lane, numbered from 1 in the order they register. Its
// Registers go out as the relay writes them (FrameBatcher: one write in
// flight, the frames queued meanwhile together in the next NodeUp), and
// each agent's Register counts as handed over when the NodeUp carrying it
// was written. An Assignment that names the cluster by digest alone is
// whole at its arrival: the service sends the bytes earlier on the stream
// (agent.proto, ConnectNode), which the node checks.
class SimulatedNode final : public grpc::ClientBidiReactor<NodeUp, NodeDown> {
 public:
  SimulatedNode(AgentService::Stub* stub, Storm* storm, int agents)
      : storm_(storm), lanes_(agents) {
    stub->async()->ConnectNode(&context_, this);
    // As SimulatedAgent's: Close() writes from outside the reactions.
    AddHold();
    StartRead(&in_);
    StartCall();
  }

  // The next lane's Register (at most `agents` of them).
  void Register(AgentMessage message) {
    AgentFrame frame;
    *frame.mutable_message() = std::move(message);
    NodeUp* write;
    {
      std::lock_guard lock(mu_);
      frame.set_lane(++registered_lanes_);
      write = writer_.Queue(std::move(frame));
    }
    if (write) StartWrite(write);
  }

  void OnWriteDone(bool ok) override {
    const auto now = Clock::now();
    {
      // The message in flight stays as it is until WriteDone, below.
      std::lock_guard lock(storm_->mu);
      for (const AgentFrame& f : writer_.in_flight().frames()) {
        AgentTimes& t = lanes_[f.lane() - 1].times;
        if (f.has_message() && !t.registered_at.time_since_epoch().count()) t.registered_at = now;
      }
    }
    NodeUp* next;
    bool half_close;
    {
      std::lock_guard lock(mu_);
      next = writer_.WriteDone();
      half_close = !next && closing_;
    }
    if (next) StartWrite(next);
    if (half_close) StartWritesDone();
  }

  void OnReadDone(bool ok) override {
    const auto now = Clock::now();
    std::lock_guard lock(storm_->mu);
    if (ok) {
      for (const ServiceFrame& f : in_.frames()) OnFrame(f, now);
      in_.Clear();  // assignments hold the whole cluster; keep memory flat
      StartRead(&in_);
    } else {
      for (Lane& lane : lanes_)
        if (!lane.answered)
          Answer(lane, &Storm::broken, "the node's stream ended before its assignment");
    }
    storm_->cv.notify_all();
  }

  void OnDone(const grpc::Status& status) override {
    std::lock_guard lock(storm_->mu);
    const std::string ended =
        "a node's stream ended with " + StatusText(status.error_code(), status.error_message());
    if (!status.ok() && !failed_)
      storm_->Fail(&Storm::close_errors, ended);
    else if (!status.ok() && storm_->first_failed_status.empty())
      storm_->first_failed_status = ended;
    ++storm_->done;
    storm_->cv.notify_all();
  }

  // Each lane's closed frame, as the relay writes one when its agent
  // half-closes, then the stream's half-close once they are written.
  void Close() {
    NodeUp* write = nullptr;
    {
      std::lock_guard lock(mu_);
      for (uint64_t lane = 1; lane <= lanes_.size(); ++lane) {
        AgentFrame frame;
        frame.set_lane(lane);
        frame.set_closed(true);
        if (NodeUp* w = writer_.Queue(std::move(frame))) write = w;
      }
      closing_ = true;  // a write is in flight now: OnWriteDone half-closes after the last
    }
    if (write) StartWrite(write);
    RemoveHold();
  }

  // Once every agent has answered.
  void AppendTimes(std::vector<AgentTimes>& out) const {
    for (const Lane& lane : lanes_) out.push_back(lane.times);
  }

 private:
  struct Lane {
    AgentTimes times;
    bool answered = false;  // assigned, refused or broken
  };

  // Needs storm_->mu held.
  void OnFrame(const ServiceFrame& f, Clock::time_point now) {
    // Made only for an error: the frames of a storm are many.
    auto name = [&] { return "lane " + std::to_string(f.lane()); };
    if (f.lane() < 1 || f.lane() > lanes_.size()) {
      failed_ = true;
      storm_->Fail(&Storm::broken, "a frame for " + name() + ", which the node never opened");
      return;
    }
    Lane& lane = lanes_[f.lane() - 1];
    const std::string end = f.has_end() ? StatusText(f.end().code(), f.end().message()) : "";
    if (f.has_end() && !lane.answered) {
      Answer(lane, &Storm::broken, name() + " ended before its assignment: " + end);
    } else if (f.has_end() && f.end().code() != 0 && !failed_) {
      failed_ = true;
      storm_->Fail(&Storm::close_errors, name() + " ended with " + end + " after its closed frame");
    } else if (lane.answered) {
      return;  // after its Assignment: what the service sends a running task
    } else if (f.message().has_assignment()) {
      OnAssignment(lane, f.message().assignment(), now);
    } else if (f.message().has_refused()) {
      Answer(lane, &Storm::refused, "refused: " + f.message().refused().reason());
    } else {
      Answer(lane, &Storm::broken,
             name() + " got " + f.message().ShortDebugString().substr(0, 200) +
                 " before its assignment");
    }
  }

  // Needs storm_->mu held.
  void OnAssignment(Lane& lane, const tfslurm::agent::v1::Assignment& a, Clock::time_point now) {
    lane.times.assigned_at = now;
    // What carries TF_CONFIG on the stream: the compressed cluster object.
    lane.times.tf_config_bytes = a.tf_config().size() + a.cluster_zlib().size();
    if (!a.cluster_zlib().empty()) {
      lane.times.carried_cluster = true;
      clusters_.insert(a.cluster_digest());
    }
    if (a.cluster_zlib().empty() && !a.cluster_digest().empty() &&
        !clusters_.count(a.cluster_digest())) {
      // complete_at stays nullopt: the agent counts as missing.
      if (storm_->first_error.empty())
        storm_->first_error = "an Assignment named cluster " + a.cluster_digest() +
                              " alone before its bytes came on the node's stream";
    } else {
      lane.times.complete_at = now;
    }
    Answer(lane, nullptr, "");
  }

  // Needs storm_->mu held. `counter`: the error the lane's answer is, or
  // nullptr for its assignment.
  void Answer(Lane& lane, int Storm::*counter, const std::string& why) {
    lane.answered = true;
    ++storm_->answered;
    if (!counter) return;
    failed_ = true;
    storm_->Fail(counter, why);
  }

  Storm* const storm_;
  grpc::ClientContext context_;
  NodeDown in_;
  // Written under storm_->mu (the times, read by the main thread); lanes_
  // itself never grows.
  std::vector<Lane> lanes_;
  std::set<std::string> clusters_;  // digests whose bytes came; read and written in OnReadDone
  bool failed_ = false;             // under storm_->mu: an error was counted for this node
  std::mutex mu_;                   // the writer's
  bench::FrameBatcher<NodeUp> writer_;
  uint64_t registered_lanes_ = 0;
  bool closing_ = false;
};

// -------------------------------------------------------------------- tls --

struct StormTls {
  std::string dir;
  std::string ca_pem;
  int rotate_every_ms = 0;
};

// A new server certificate in `dir` (the CA kept); its SHA-256 fingerprint.
std::string MakeServerCertificate(const std::string& dir) {
  tfslurm::tls::TlsInitOptions o;
  o.dir = dir;
  o.dns_names = {"localhost"};
  o.ip_addresses = {"127.0.0.1"};
  o.now_s = time(nullptr);
  auto made = tfslurm::tls::RunTlsInit(o);
  if (!made.ok()) ServerProcess::Die("tls init: " + made.status().message());
  return made->server.fingerprint;
}

// Rotates the server's certificate every `every_ms` until stopped: what an
// admin does with `tfslurmd tls init` and `kill -HUP`.
class Rotation {
 public:
  Rotation(const StormTls* tls, pid_t server) {
    if (!tls || tls->rotate_every_ms <= 0) return;
    thread_ = std::thread([this, tls, server] {
      std::unique_lock lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::milliseconds(tls->rotate_every_ms),
                           [this] { return stop_; })) {
        last_ = MakeServerCertificate(tls->dir);
        kill(server, SIGHUP);
        ++count_;
      }
    });
  }
  // Stops rotating; returns how many rotations were made and the last
  // certificate's fingerprint.
  std::pair<int, std::string> Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return {count_, last_};
  }
  ~Rotation() { Stop(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  int count_ = 0;
  std::string last_;
  std::thread thread_;
};

// After a rotation: both ports present `fingerprint` (gRPC's file watcher
// reads the staged pair every second; the REST port at the next handshake).
void CheckServedCertificate(const ServerProcess& server, const StormTls& tls,
                            const std::string& fingerprint) {
  for (long long port :
       {static_cast<long long>(server.agent_port()), server.ReadyValue("http_port")}) {
    tfslurm::tls::ProbeResult r;
    for (int i = 0; i < 50; ++i) {
      r = tfslurm::tls::ProbeTls({"127.0.0.1", static_cast<int>(port), tls.ca_pem});
      if (r.kind == tfslurm::tls::ProbeResult::Kind::kVerified && !r.chain.empty() &&
          r.chain.front().fingerprint == fingerprint)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (r.chain.empty() || r.chain.front().fingerprint != fingerprint)
      ServerProcess::Die("port " + std::to_string(port) +
                         " does not present the last rotated certificate: " + r.reason);
  }
}

// ------------------------------------------------------------------- runs --

struct RunResult {
  int n = 0;
  double connect_ms = 0, first_reg_ms = 0, last_reg_ms = 0, last_assign_ms = 0;
  double gap_ms = 0;                 // last registration -> last assignment
  std::vector<double> per_agent_ms;  // register -> assignment
  int refused = 0, broken = 0, missing = 0, cancel_errors = 0;
  int Errors() const { return refused + broken + missing + cancel_errors; }
  long max_threads = 0, max_rss_kb = 0, hwm_kb = 0;
  double server_cpu_ms = 0, client_cpu_ms = 0;
  size_t tf_config_bytes = 0;
  int rotations = 0;
  // CPU while the connections are made (with TLS: the handshakes), the
  // server's and the load generator's apart: real agents handshake on
  // their own nodes, so only the server's share lands on tfslurmd's host.
  double connect_server_cpu_ms = 0, connect_client_cpu_ms = 0;
  int connections = 0;  // TCP connections the N agents' streams share
  // Assignments that arrived with the cluster's bytes (TensorFlow): one per
  // connection when the agents of a connection ask by digest; through real
  // relays every one (the relay fills them in); with --node-streams one
  // per node stream.
  int cluster_copies = 0;
  // Connect streams (one per agent), or with --node-streams ConnectNode
  // streams (one per connection).
  int streams = 0;
};

// Starts `command` (through sh, "{pid}" replaced by the server's pid) in its
// own process group, e.g. a profiler attached to the storm only.
pid_t StartProfiler(std::string command, pid_t server) {
  if (command.empty()) return -1;
  for (size_t p; (p = command.find("{pid}")) != std::string::npos;)
    command.replace(p, 5, std::to_string(server));
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // let it attach
  return pid;
}

void StopProfiler(pid_t pid) {
  if (pid <= 0) return;
  kill(-pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
}

// Real node relays, one per group of agents (--relay-agent): started with
// their lock held as an agent starts one (agent/relay/relay_route.cc),
// killed at the end.
class RelayFleet {
 public:
  RelayFleet(const std::string& agent, const std::string& dir, int count,
             const std::string& service, const std::string& ca_pem) {
    if (system(("mkdir -p '" + dir + "'").c_str()) != 0) ServerProcess::Die("cannot make " + dir);
    for (int g = 0; g < count; ++g) {
      const std::string base = dir + "/relay-" + std::to_string(g);
      sockets_.push_back(base + ".sock");
      int lock = open((base + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      int log = open((base + ".log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (lock < 0 || log < 0 || flock(lock, LOCK_EX | LOCK_NB) != 0)
        ServerProcess::Die("cannot take the lock of " + base);
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      posix_spawn_file_actions_adddup2(&actions, log, 1);
      posix_spawn_file_actions_adddup2(&actions, log, 2);
      posix_spawn_file_actions_adddup2(&actions, lock, 3);
      std::vector<std::string> words = {agent,         "relay", "--socket",  base + ".sock",
                                        "--service",   service, "--lock-fd", "3",
                                        "--keepalive", "0"};
      std::vector<char*> argv;
      for (auto& w : words) argv.push_back(w.data());
      argv.push_back(nullptr);
      std::vector<std::string> env_words;
      for (char** e = environ; *e; ++e)
        if (strncmp(*e, "TFSLURM_CA=", 11) != 0) env_words.push_back(*e);
      if (!ca_pem.empty()) env_words.push_back("TFSLURM_CA=" + ca_pem);
      std::vector<char*> envp;
      for (auto& w : env_words) envp.push_back(w.data());
      envp.push_back(nullptr);
      pid_t pid = 0;
      if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data()) != 0)
        ServerProcess::Die("cannot start " + agent + " relay");
      posix_spawn_file_actions_destroy(&actions);
      pids_.push_back(pid);
      close(lock);
      close(log);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    for (const std::string& socket : sockets_) {
      while (!Connectable(socket)) {
        if (Clock::now() > deadline) ServerProcess::Die("relay " + socket + " did not serve");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  }
  ~RelayFleet() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }
  const std::string& socket(int group) const { return sockets_[group]; }

 private:
  static bool Connectable(const std::string& path) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    return ok;
  }
  std::vector<std::string> sockets_;
  std::vector<pid_t> pids_;
};

// How each run of a size is made (main's options).
struct StormOptions {
  int tasks_per_node = 32;
  int agents_per_connection = 1;
  // --node-streams: each connection carries one ConnectNode stream whose
  // lanes are its agents, rather than a Connect stream per agent.
  bool node_streams = false;
  std::string framework = "tensorflow";
  std::string profile_cmd;  // empty in warm-up runs
  const StormTls* tls = nullptr;
  const RelayFleet* relays = nullptr;
};

Experiment NewExperiment(ServerProcess& server, int n, const std::string& framework) {
  std::string answer = server.Command("new " + std::to_string(n) + " " + framework);
  char exp[256], secret[256];
  long long job = 0;
  if (sscanf(answer.c_str(), "exp %255s %255s %lld", exp, secret, &job) != 3)
    ServerProcess::Die("cannot create the experiment: " + answer);
  return {exp, secret, job};
}

// `count` channels to the server (or, with relays, one to each relay), each
// connected.
std::vector<std::shared_ptr<grpc::Channel>> OpenChannels(const ServerProcess& server, int count,
                                                         const StormOptions& o) {
  // One connection per agent (or per agents_per_connection agents): a local
  // subchannel pool stops gRPC from sharing one TCP connection among
  // channels with equal arguments.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(64 << 20);
  // gRPC gives up a connection attempt after its minimum connect timeout
  // (20 s) and tries again; opening 16,384 at once on a loaded machine takes
  // about that long, and each retry left the server one more descriptor
  // (the floor ran out of its 20,000: "Failed accept4: Too many open files").
  // The 60 s the wait below allows, instead.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 60000);
  std::string target = "127.0.0.1:" + std::to_string(server.agent_port());
  // The agent's own credentials (agent/service_stream.cc): TLS verified
  // against the CA and the host dialled.
  auto credentials =
      o.tls ? grpc::SslCredentials({o.tls->ca_pem, "", ""}) : grpc::InsecureChannelCredentials();
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < count; ++i) {
    // Through a relay: its Unix socket, in plaintext (the relay speaks TLS
    // to the server, as the agent's stream does, agent/service_stream.cc).
    channels.push_back(o.relays
                           ? grpc::CreateCustomChannel("unix:" + o.relays->socket(i),
                                                       grpc::InsecureChannelCredentials(), args)
                           : grpc::CreateCustomChannel(target, credentials, args));
    channels.back()->GetState(/*try_to_connect=*/true);
  }
  // Generous: 4,096 TLS handshakes cost ~12 s of CPU on both sides, which a
  // machine loaded by others (load 17 on 2 cores) stretches past a minute.
  for (auto& ch : channels) {
    if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(240)))
      ServerProcess::Die("a channel did not connect within 240 s");
  }
  return channels;
}

// The storm's streams: a Connect stream per agent, or with --node-streams
// one ConnectNode stream per connection, standing for the node's relay.
class StormStreams {
 public:
  StormStreams(const std::vector<std::shared_ptr<grpc::Channel>>& channels, int n,
               const StormOptions& o)
      : n_(n),
        o_(o),
        // Without real relays, each shared connection's Connect streams
        // ask for clusters by digest as the relay it stands for would.
        shared_(o.agents_per_connection > 1 && !o.relays && !o.node_streams ? channels.size() : 0) {
    for (int i = 0; i < n; ++i)
      stubs_.push_back(AgentService::NewStub(channels[i / o.agents_per_connection]));
  }

  // "go": every agent's Register, as fast as one thread can (agents started
  // by one srun).
  void Start(Storm* storm, const Experiment& exp) {
    const int k = o_.agents_per_connection;
    for (int i = 0; i < n_; ++i) {
      if (!o_.node_streams) {
        agents_.push_back(std::make_unique<SimulatedAgent>(
            stubs_[i].get(), storm, RegisterMessage(exp, i, o_.tasks_per_node, !shared_.empty()),
            shared_.empty() ? nullptr : &shared_[i / k]));
        continue;
      }
      if (i % k == 0)
        nodes_.push_back(
            std::make_unique<SimulatedNode>(stubs_[i].get(), storm, std::min(k, n_ - i)));
      // The relay's Registers ask for clusters by digest.
      nodes_.back()->Register(RegisterMessage(exp, i, o_.tasks_per_node, /*by_digest=*/true));
    }
  }

  int count() const { return o_.node_streams ? nodes_.size() : agents_.size(); }

  // Needs the storm's lock held, once every agent has answered.
  std::vector<AgentTimes> Times() const {
    std::vector<AgentTimes> times;
    for (const auto& a : agents_) times.push_back(a->Times());
    for (const auto& node : nodes_) node->AppendTimes(times);
    return times;
  }

  void Close() {
    for (auto& a : agents_) a->Close();
    for (auto& node : nodes_) node->Close();
  }

 private:
  const int n_;
  const StormOptions& o_;
  std::vector<std::unique_ptr<AgentService::Stub>> stubs_;
  std::vector<SharedConnection> shared_;
  std::vector<std::unique_ptr<SimulatedAgent>> agents_;
  std::vector<std::unique_ptr<SimulatedNode>> nodes_;
};

// Reads the server's /proc/PID/status every 2 ms until stopped.
class ServerSampler {
 public:
  explicit ServerSampler(pid_t pid)
      : thread_([this, pid] {
          while (!stop_) {
            ProcStatus s = ReadProcStatus(pid);
            max_threads_ = std::max(max_threads_, s.threads);
            max_rss_kb_ = std::max(max_rss_kb_, s.vm_rss_kb);
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
          }
        }) {}
  // The peaks seen, into `res`.
  void Stop(RunResult& res) {
    stop_ = true;
    thread_.join();
    res.max_threads = max_threads_;
    res.max_rss_kb = max_rss_kb_;
  }

 private:
  std::atomic<bool> stop_{false};
  long max_threads_ = 0, max_rss_kb_ = 0;  // the thread's until it is joined
  std::thread thread_;
};

// Waits (up to 120 s) for every agent's answer; what went wrong into `res`.
void WaitForAnswers(Storm& storm, int n, RunResult& res) {
  std::unique_lock lock(storm.mu);
  storm.cv.wait_for(lock, std::chrono::seconds(120), [&] { return storm.answered == n; });
  res.missing = n - storm.answered;
  res.refused = storm.refused;
  res.broken = storm.broken;
  if (!storm.first_error.empty()) fprintf(stderr, "  N=%d: %s\n", n, storm.first_error.c_str());
}

// The run's figures from every agent's times.
void Summarize(const std::vector<AgentTimes>& times, Clock::time_point go, RunResult& res) {
  bool first = true;
  for (const AgentTimes& a : times) {
    double reg = Ms(a.registered_at - go);
    if (a.registered_at.time_since_epoch().count()) {
      res.first_reg_ms = first ? reg : std::min(res.first_reg_ms, reg);
      res.last_reg_ms = std::max(res.last_reg_ms, reg);
      first = false;
    }
    if (a.assigned_at.time_since_epoch().count()) {
      if (!a.complete_at) {
        ++res.missing;  // named a cluster whose bytes never came
        continue;
      }
      double got = Ms(*a.complete_at - go);
      res.last_assign_ms = std::max(res.last_assign_ms, got);
      res.per_agent_ms.push_back(got - reg);
      res.tf_config_bytes = std::max(res.tf_config_bytes, a.tf_config_bytes);
      res.cluster_copies += a.carried_cluster;
    }
  }
  res.gap_ms = res.last_assign_ms - res.last_reg_ms;
}

// Closes every stream and waits (up to 60 s) for their ends: a node stream
// that ended, or ended a lane, other than OK, and a stream that did not
// end, count as broken.
void CloseStreams(StormStreams& streams, Storm& storm, RunResult& res) {
  streams.Close();
  std::unique_lock lock(storm.mu);
  storm.cv.wait_for(lock, std::chrono::seconds(60), [&] { return storm.done == streams.count(); });
  if (storm.done < streams.count())
    storm.Fail(&Storm::close_errors, std::to_string(streams.count() - storm.done) +
                                         " streams did not end within 60 s of their close");
  res.broken += storm.close_errors;
  if (storm.close_errors > 0)
    fprintf(stderr, "  N=%d: closing: %s\n", res.n, storm.first_close_error.c_str());
  if (!storm.first_failed_status.empty())
    fprintf(stderr, "  N=%d: %s\n", res.n, storm.first_failed_status.c_str());
}

RunResult RunStorm(ServerProcess& server, int n, const StormOptions& o) {
  RunResult res;
  res.n = n;
  const Experiment exp = NewExperiment(server, n, o.framework);
  Rotation rotation(o.tls, server.pid());
  const double connect_cpu0 = CpuMs(server.pid()), connect_self0 = SelfCpuMs();
  auto c0 = Clock::now();
  res.connections = (n + o.agents_per_connection - 1) / o.agents_per_connection;
  std::vector<std::shared_ptr<grpc::Channel>> channels = OpenChannels(server, res.connections, o);
  Storm storm;  // before the streams: their reactions report to it until they end
  StormStreams streams(channels, n, o);
  res.connect_ms = Ms(Clock::now() - c0);
  res.connect_server_cpu_ms = CpuMs(server.pid()) - connect_cpu0;
  res.connect_client_cpu_ms = SelfCpuMs() - connect_self0;

  ServerSampler sampler(server.pid());  // while the storm runs
  pid_t profiler = StartProfiler(o.profile_cmd, server.pid());
  double cpu0 = CpuMs(server.pid()), self0 = SelfCpuMs();
  storm.go = Clock::now();
  streams.Start(&storm, exp);
  res.streams = streams.count();
  WaitForAnswers(storm, n, res);
  res.server_cpu_ms = CpuMs(server.pid()) - cpu0;
  res.client_cpu_ms = SelfCpuMs() - self0;
  if (auto [rotations, last] = rotation.Stop(); rotations > 0) {
    res.rotations = rotations;
    CheckServedCertificate(server, *o.tls, last);
  }
  StopProfiler(profiler);
  sampler.Stop(res);
  res.hwm_kb = ReadProcStatus(server.pid()).vm_hwm_kb;
  {
    std::lock_guard lock(storm.mu);
    Summarize(streams.Times(), storm.go, res);
  }

  CloseStreams(streams, storm, res);
  if (std::string answer = server.Command("cancel " + exp.id); answer != "ok") {
    ++res.cancel_errors;
    fprintf(stderr, "  N=%d: cancelling %s: %s\n", n, exp.id.c_str(), answer.c_str());
  }
  return res;  // the streams go before the channels they are on
}

// A run's line on stderr, and its row in `csv`.
void ReportRun(const RunResult& res, int run, int warmup, bool node_streams, FILE* csv) {
  double p50 = Percentile(res.per_agent_ms, 50), p99 = Percentile(res.per_agent_ms, 99);
  fprintf(stderr,
          "  N=%d run %d%s: %d connections in %.1f ms, %d %s streams, registers handed over "
          "%.1f..%.1f ms, last assignment %.1f ms, gap %.1f ms, per agent p50 %.1f p99 %.1f ms, "
          "threads %ld, RSS %.0f MB (HWM %.0f), server CPU %.0f ms, load generator CPU %.0f ms, "
          "TF_CONFIG %zu B in %d assignments, refused %d broken %d missing %d, certificate "
          "rotations %d\n",
          res.n, run, run < warmup ? " (warm-up)" : "", res.connections, res.connect_ms,
          res.streams, node_streams ? "ConnectNode" : "Connect", res.first_reg_ms, res.last_reg_ms,
          res.last_assign_ms, res.gap_ms, p50, p99, res.max_threads, res.max_rss_kb / 1024.0,
          res.hwm_kb / 1024.0, res.server_cpu_ms, res.client_cpu_ms, res.tf_config_bytes,
          res.cluster_copies, res.refused, res.broken, res.missing, res.rotations);
  if (csv)
    fprintf(csv,
            "%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%d,%d,%d,%ld,%.1f,%.1f,%.0f,%.0f,%zu,%."
            "0f,%.0f,%d,%d\n",
            res.n, run, res.connect_ms, res.first_reg_ms, res.last_reg_ms, res.last_assign_ms,
            res.gap_ms, p50, p99, res.refused, res.broken, res.missing, res.max_threads,
            res.max_rss_kb / 1024.0, res.hwm_kb / 1024.0, res.server_cpu_ms, res.client_cpu_ms,
            res.tf_config_bytes, res.connect_server_cpu_ms, res.connect_client_cpu_ms,
            res.connections, res.cluster_copies);
}

// The command line.
struct StormArgs {
  std::string server_bin, dir = "/tmp/bench-rendezvous", sizes = "64,512,4096", runs_csv,
                          profile_cmd, framework = "tensorflow", relay_agent;
  int runs = 20, warmup = 2, tasks_per_node = 32, agents_per_connection = 1, rotate_every_ms = 0;
  bool node_streams = false;
  std::vector<std::string> server_args;
  std::optional<StormTls> tls;
};

// Exits 2 with the usage on a word it does not know.
StormArgs ParseArgs(int argc, char** argv) {
  StormArgs s;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) ServerProcess::Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--server")
      s.server_bin = next();
    else if (a == "--dir")
      s.dir = next();
    else if (a == "--sizes")
      s.sizes = next();
    else if (a == "--runs")
      s.runs = std::stoi(next());
    else if (a == "--warmup")
      s.warmup = std::stoi(next());
    else if (a == "--runs-csv")
      s.runs_csv = next();
    else if (a == "--server-arg")
      s.server_args.push_back(next());
    else if (a == "--profile-cmd")
      s.profile_cmd = next();
    else if (a == "--framework")
      s.framework = next();
    else if (a == "--tls")
      s.tls = StormTls{next(), "", 0};
    else if (a == "--rotate-every-ms")
      s.rotate_every_ms = std::stoi(next());
    else if (a == "--agents-per-connection")
      s.agents_per_connection = std::stoi(next());
    else if (a == "--relay-agent")
      s.relay_agent = next();
    else if (a == "--node-streams")
      s.node_streams = true;
    else {
      fprintf(stderr,
              "usage: %s --server PATH [--sizes 64,512,4096] [--runs 20] [--warmup 2] [--dir D]\n"
              "          [--runs-csv FILE] [--server-arg ARG]... [--profile-cmd 'perf record -g -p "
              "{pid} -o F']\n"
              "          [--framework tensorflow|pytorch] [--tls DIR [--rotate-every-ms N]]\n"
              "          [--agents-per-connection K [--relay-agent TFSLURM_AGENT | "
              "--node-streams]]\n",
              argv[0]);
      exit(2);
    }
  }
  return s;
}

// Exits naming what is wrong; with --tls, makes the certificates.
void CheckArgs(StormArgs& s) {
  if (s.server_bin.empty())
    ServerProcess::Die("--server PATH (bench_rendezvous_server) is required");
  if (s.framework != "tensorflow" && s.framework != "pytorch")
    ServerProcess::Die("--framework must be tensorflow or pytorch, got " + s.framework);
  if (s.rotate_every_ms > 0 && !s.tls) ServerProcess::Die("--rotate-every-ms needs --tls DIR");
  if (s.agents_per_connection < 1 || s.agents_per_connection > s.tasks_per_node)
    ServerProcess::Die("--agents-per-connection must be 1.." + std::to_string(s.tasks_per_node) +
                       " (the agents of one node), got " + std::to_string(s.agents_per_connection));
  // One stream standing for a node's relay with K agents; a real relay
  // (--relay-agent) chooses for itself how it speaks to the service.
  if (s.node_streams && (s.agents_per_connection < 2 || !s.relay_agent.empty()))
    ServerProcess::Die(
        "--node-streams needs --agents-per-connection K > 1 (the agents one node stream "
        "carries) and no --relay-agent; got K = " +
        std::to_string(s.agents_per_connection) +
        (s.relay_agent.empty() ? "" : " and --relay-agent " + s.relay_agent));
  if (s.tls) {
    MakeServerCertificate(s.tls->dir);
    std::ifstream ca(s.tls->dir + "/ca.pem");
    s.tls->ca_pem.assign(std::istreambuf_iterator<char>(ca), {});
    s.tls->rotate_every_ms = s.rotate_every_ms;
    s.server_args.insert(s.server_args.end(), {"--tls", s.tls->dir});
  }
}

void PrintHeaders(FILE* csv) {
  if (csv)
    fprintf(
        csv,
        "n,run,connect_ms,first_reg_ms,last_reg_ms,last_assign_ms,gap_ms,agent_p50_ms,agent_p99_ms,"
        "refused,broken,missing,max_threads,max_rss_mb,hwm_mb,server_cpu_ms,client_cpu_ms,tf_"
        "config_bytes,connect_server_cpu_ms,connect_client_cpu_ms,connections,cluster_copies\n");
  printf(
      "| agents | runs | last reg -> last assignment p50 / p99 / max (ms) | whole storm p50 / p99 "
      "/ max (ms) "
      "| registrations/s (p50) | per agent reg -> assignment p50 / p99 (ms) | connections / "
      "connect (ms, p50) "
      "| server threads (max) | server RSS peak VmHWM (MB) | server CPU per storm (ms, p50) | "
      "errors |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  fflush(stdout);
}

// One size against a fresh server: its runs, and its row of the table. The
// errors of every run, a warm-up run's too, and a server that did not exit 0.
int RunSize(int n, const StormArgs& s, FILE* csv) {
  std::string run_dir = s.dir + "/n" + std::to_string(n);
  std::string cmd = "rm -rf '" + run_dir + "'";
  if (system(cmd.c_str()) != 0) ServerProcess::Die("cannot clear " + run_dir);
  ServerProcess server(s.server_bin, run_dir, s.server_args);
  const int connections = (n + s.agents_per_connection - 1) / s.agents_per_connection;
  std::optional<RelayFleet> relays;
  if (!s.relay_agent.empty())
    relays.emplace(s.relay_agent, run_dir + "/relays", connections,
                   "127.0.0.1:" + std::to_string(server.agent_port()), s.tls ? s.tls->ca_pem : "");
  std::vector<double> gaps, storms, rates, agent_all, connects, cpus;
  long threads = 0, hwm = 0;
  int errors = 0, all_errors = 0;
  StormOptions options{
      std::min(n, s.tasks_per_node), s.agents_per_connection,    s.node_streams, s.framework, "",
      s.tls ? &*s.tls : nullptr,     relays ? &*relays : nullptr};
  for (int run = 0; run < s.warmup + s.runs; ++run) {
    options.profile_cmd = run < s.warmup ? "" : s.profile_cmd;
    RunResult res = RunStorm(server, n, options);
    ReportRun(res, run, s.warmup, s.node_streams, csv);
    threads = std::max(threads, res.max_threads);
    hwm = std::max(hwm, res.hwm_kb);
    all_errors += res.Errors();  // a warm-up run's errors too
    if (run < s.warmup) continue;
    errors += res.Errors();
    gaps.push_back(res.gap_ms);
    storms.push_back(res.last_assign_ms);
    rates.push_back(n / (res.last_assign_ms / 1000.0));
    agent_all.insert(agent_all.end(), res.per_agent_ms.begin(), res.per_agent_ms.end());
    connects.push_back(res.connect_ms);
    cpus.push_back(res.server_cpu_ms);
  }
  printf(
      "| %d | %d | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %.0f | %.1f / %.1f | %d / %.0f | "
      "%ld "
      "| "
      "%.0f | %.0f | %d |\n",
      n, s.runs, Percentile(gaps, 50), Percentile(gaps, 99), Percentile(gaps, 100),
      Percentile(storms, 50), Percentile(storms, 99), Percentile(storms, 100),
      Percentile(rates, 50), Percentile(agent_all, 50), Percentile(agent_all, 99), connections,
      Percentile(connects, 50), threads, hwm / 1024.0, Percentile(cpus, 50), errors);
  fflush(stdout);
  if (int status = server.Quit(); status != 0) {
    fprintf(stderr, "N=%d: the server exited with status %d\n", n, status);
    ++all_errors;
  }
  return all_errors;
}

}  // namespace

int main(int argc, char** argv) {
  StormArgs args = ParseArgs(argc, argv);
  CheckArgs(args);
  bench::RaiseFileLimitAndIgnoreSigpipe();
  // Debian builds abseil without NDEBUG, so every absl::Mutex (all of gRPC's
  // locks) runs deadlock detection; the load generator shares the machine
  // with the server and must stay light.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  FILE* csv = args.runs_csv.empty() ? nullptr : fopen(args.runs_csv.c_str(), "w");
  if (!args.runs_csv.empty() && !csv) ServerProcess::Die("cannot write " + args.runs_csv);
  PrintHeaders(csv);
  int all_errors = 0;
  for (int n : bench::ParseSizes(args.sizes)) all_errors += RunSize(n, args, csv);
  if (csv && fclose(csv) != 0) ServerProcess::Die("cannot write " + args.runs_csv);
  // The table has the figures; a run that was refused, broken or lost an
  // agent did not measure what it is for, and the caller must know.
  if (all_errors > 0) {
    fprintf(stderr, "%s: %d errors (refused, broken or missing assignments, failed cancels)\n",
            program_invocation_short_name, all_errors);
    return 1;
  }
  return 0;
}
