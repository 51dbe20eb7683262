// bench_rendezvous_floor: the least any service can do for a rendezvous over
// the agent protocol, to measure tfslurmd's storm against on the same
// machine (as bench_submit_libslurm is the floor for submissions). It speaks
// bench_rendezvous_server's stdin protocol ("new N", "cancel ID", "quit";
// first line "ready agent_port=P http_port=0 pid=PID") and serves
// AgentService.Connect with gRPC's callback API, as tfslurmd does, but keeps
// nothing but the streams: no store, no lifecycle, no secret check, no lock
// held across the sends. When the Nth Register has arrived it builds the
// cluster object from the registered addresses, compresses it once (as
// tfslurmd does) and writes every stream an Assignment of the same shape as
// tfslurmd's (role, index, compressed cluster, command, workdir, env). As
// tfslurmd, it sends the cluster's bytes once per connection to streams
// whose Register asked for it by digest (Register.cluster_by_digest: a node's
// relay, or the load generator standing for one), the digest alone to the
// connection's other streams.
//
// It serves ConnectNode too, the least way: each lane of a node's stream
// is a task's stream to the same barrier, its frames written as tfslurmd
// writes them (one NodeDown in flight, the frames queued meanwhile in the
// next: bench::FrameBatcher), the cluster's bytes once per node stream
// (remembering the last 4 clusters, as tfslurmd does) and the digest alone
// after; a lane's closed frame is answered with the lane's end {OK}.
//
// A restart in place, as bench_in_place_storm drives it, the least way: the
// first exit report that is not a reap (the failing rank) makes it write
// every other assigned stream a Shutdown; every exit report is acknowledged
// by finishing its stream with OK (on a lane: the lane's end {OK}, once the
// relay's closed frame for it comes); a Register with `standby` is kept until
// all N wait, and then each is written NextAttempt{attempt + 1}; the
// Registers for the next attempt meet at the same barrier as the first.
// No decision, no store, no record: only the messages tfslurmd must send.
//
// --tls DIR: the agent port speaks TLS with DIR/server.pem and server.key
// (`tfslurmd tls init`'s files), through gRPC's static SSL credentials: the
// least TLS costs any gRPC service, the anchor of tfslurmd's own TLS storm.
// Other arguments (bench_rendezvous_server's) are ignored.
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "agent.grpc.pb.h"
#include "bench/rendezvous/storm_common.h"
#include "schema/tf_config_wire.h"

namespace {

using tfslurm::agent::v1::AgentFrame;
using tfslurm::agent::v1::AgentMessage;
using tfslurm::agent::v1::NodeDown;
using tfslurm::agent::v1::NodeUp;
using tfslurm::agent::v1::ServiceFrame;
using tfslurm::agent::v1::ServiceMessage;

class Rendezvous;

// Where the rendezvous writes a task's messages: its Connect stream, or its
// lane of a node's ConnectNode stream.
class TaskStream {
 public:
  virtual ~TaskStream() = default;
  virtual void Send(ServiceMessage message) = 0;
  // The acknowledgment of the task's exit report.
  virtual void FinishOk() = 0;
  // Whether this task's Assignment carries the cluster's bytes rather than
  // `digest` alone. `connections`: those sent the bytes at this barrier.
  virtual bool CarriesCluster(const std::string& digest,
                              std::unordered_set<std::string>& connections) = 0;
};

class FloorReactor final : public grpc::ServerBidiReactor<AgentMessage, ServiceMessage>,
                           public TaskStream {
 public:
  FloorReactor(Rendezvous& rendezvous, std::string peer)
      : rendezvous_(rendezvous), peer_(std::move(peer)) {
    StartRead(&in_);
  }
  void OnReadDone(bool ok) override;
  // gRPC allows one write in flight: the others wait in `queue_`, and a
  // Finish waits for them.
  void Send(ServiceMessage message) override {
    {
      std::lock_guard lock(mu_);
      if (writing_) {
        queue_.push_back(std::move(message));
        return;
      }
      writing_ = true;
      out_ = std::move(message);
    }
    StartWrite(&out_);
  }
  // The exit report is the stream's last message: its end acknowledges it.
  void FinishOk() override {
    {
      std::lock_guard lock(mu_);
      if (writing_) {
        finish_after_writes_ = true;
        return;
      }
    }
    Finish(grpc::Status::OK);
  }
  // As tfslurmd: the bytes once per TCP connection (gRPC's peer: address
  // and port) to the streams whose Register asked by digest.
  bool CarriesCluster(const std::string& digest,
                      std::unordered_set<std::string>& connections) override {
    return !by_digest_ || connections.insert(peer_).second;
  }
  void OnWriteDone(bool) override {
    bool finish = false, next = false;
    {
      std::lock_guard lock(mu_);
      if (queue_.empty()) {
        writing_ = false;
        finish = finish_after_writes_;
      } else {
        out_ = std::move(queue_.front());
        queue_.erase(queue_.begin());
        next = true;
      }
    }
    if (finish) Finish(grpc::Status::OK);
    if (next) StartWrite(&out_);
  }
  void OnDone() override { delete this; }

 private:
  Rendezvous& rendezvous_;
  const std::string peer_;
  AgentMessage in_;
  ServiceMessage out_;
  std::mutex mu_;
  bool writing_ = false;
  bool finish_after_writes_ = false;
  std::vector<ServiceMessage> queue_;
  bool registered_ = false;
  // Register.cluster_by_digest: set before the Register reaches the
  // rendezvous, read at its barrier.
  bool by_digest_ = false;
};

// An Assignment of the shape and size of tfslurmd's, for task `i` of `n`
// (`ps` of them parameter servers), but for the TF cluster.
ServiceMessage AssignmentFor(int i, int n, int ps, bool ranks, const std::string& first_address) {
  ServiceMessage out;
  auto* a = out.mutable_assignment();
  a->set_role(ranks ? "rank" : i < ps ? "ps" : "worker");
  a->set_index(ranks ? i : i < ps ? i : i - ps);
  auto& env = *a->mutable_env();
  if (ranks) {
    env["RANK"] = std::to_string(i);
    env["WORLD_SIZE"] = std::to_string(n);
    env["LOCAL_RANK"] = std::to_string(i % 32);
    env["LOCAL_WORLD_SIZE"] = "32";
    env["MASTER_ADDR"] = first_address.substr(0, first_address.rfind(':'));
    env["MASTER_PORT"] = "29500";
  }
  a->add_command("/bin/true");
  a->set_workdir("/tmp/bench-rendezvous/out/floor");
  env["EXPERIMENT_ID"] = "floor";
  env["MODEL_DIR"] = "/tmp/bench-rendezvous/out/floor";
  env["TFSLURM_ROLE"] = a->role();
  env["TFSLURM_INDEX"] = std::to_string(a->index());
  env["TFSLURM_ATTEMPT"] = "1";
  a->set_model_dir("/tmp/bench-rendezvous/out/floor");
  a->set_heartbeat_interval_ms(5000);
  a->set_shutdown_grace_ms(10000);
  return out;
}

// One attempt's barrier: the streams by SLURM_PROCID until all N are in.
class Rendezvous {
 public:
  // `ranks`: PyTorch's Assignment (a rank and torchrun's variables, no
  // cluster object), as tfslurmd's for framework pytorch.
  void Expect(int n, bool ranks) {
    std::lock_guard lock(mu_);
    tasks_.assign(n, {});
    registered_ = 0;
    ranks_ = ranks;
    assigned_.clear();
    standby_.clear();
    attempt_ = 1;
  }

  // An exit report: the first one that is not a reap fails the attempt,
  // and every other assigned task is told to stop. Each is acknowledged.
  void Exited(TaskStream* stream, const AgentMessage& m) {
    std::vector<TaskStream*> stop;
    {
      std::lock_guard lock(mu_);
      if (!m.exited().reaped()) stop.swap(assigned_);
    }
    for (TaskStream* other : stop) {
      if (other == stream) continue;
      ServiceMessage out;
      out.mutable_shutdown()->set_reason("attempt failed: another task's program was killed");
      out.mutable_shutdown()->set_grace_ms(10000);
      other->Send(std::move(out));
    }
    stream->FinishOk();
  }

  // A Register with standby: when all N wait, each is told the next attempt.
  void Standby(TaskStream* stream) {
    std::vector<TaskStream*> waiting;
    int next = 0;
    {
      std::lock_guard lock(mu_);
      standby_.push_back(stream);
      if (standby_.size() < tasks_.size()) return;
      waiting.swap(standby_);
      next = ++attempt_;
    }
    for (TaskStream* s : waiting) {
      ServiceMessage out;
      auto* n = out.mutable_next_attempt();
      n->set_attempt(next);
      n->set_reason("attempt " + std::to_string(next) + " runs in this job");
      n->set_log_dir("/tmp/bench-rendezvous/out/floor/attempt-" + std::to_string(next));
      s->Send(std::move(out));
    }
  }

  void Register(TaskStream* stream, const AgentMessage& m) {
    std::vector<Task> ready;
    bool ranks = false;
    {
      std::lock_guard lock(mu_);
      ranks = ranks_;
      int proc = m.task().proc_id();
      if (proc < 0 || proc >= static_cast<int>(tasks_.size()) || tasks_[proc].stream) return;
      tasks_[proc] = {stream, m.register_().address() + ":" + std::to_string(m.register_().port())};
      if (++registered_ < static_cast<int>(tasks_.size())) return;
      ready.swap(tasks_);
      // The next attempt's barrier, and the streams a failure stops.
      tasks_.assign(ready.size(), {});
      registered_ = 0;
      assigned_.clear();
      for (const Task& t : ready) assigned_.push_back(t.stream);
    }
    SendAssignments(ready, ranks);
  }

 private:
  struct Task {
    TaskStream* stream = nullptr;
    std::string address;
  };

  // The barrier is complete: the same work tfslurmd does per attempt and
  // per task, outside any lock.
  static void SendAssignments(const std::vector<Task>& ready, bool ranks) {
    const int n = static_cast<int>(ready.size());
    const int ps = std::max(1, n / 32);
    nlohmann::json cluster = {{"ps", nlohmann::json::array()}, {"worker", nlohmann::json::array()}};
    for (int i = 0; i < n; ++i) cluster[i < ps ? "ps" : "worker"].push_back(ready[i].address);
    std::string zlib = ranks ? "" : tfslurm::wire::CompressCluster(cluster.dump());
    const std::string digest = std::to_string(std::hash<std::string>{}(zlib));
    std::unordered_set<std::string> sent_whole;  // connections sent the bytes
    for (int i = 0; i < n; ++i) {
      ServiceMessage out = AssignmentFor(i, n, ps, ranks, ready[0].address);
      if (!ranks) {
        out.mutable_assignment()->set_cluster_digest(digest);
        if (ready[i].stream->CarriesCluster(digest, sent_whole))
          out.mutable_assignment()->set_cluster_zlib(zlib);
      }
      ready[i].stream->Send(std::move(out));
    }
  }

  bool ranks_ = false;
  std::mutex mu_;
  std::vector<Task> tasks_;
  int registered_ = 0;
  int attempt_ = 1;
  std::vector<TaskStream*> assigned_;  // the last barrier's, until a failure
  std::vector<TaskStream*> standby_;
};

void FloorReactor::OnReadDone(bool ok) {
  if (!ok) {
    Finish(grpc::Status::OK);
    return;
  }
  if (in_.body_case() == AgentMessage::kExited) {
    // The stream's last message: its end is the acknowledgment.
    rendezvous_.Exited(this, in_);
    return;
  }
  if (!registered_ && in_.body_case() == AgentMessage::kRegister) {
    registered_ = true;
    by_digest_ = in_.register_().cluster_by_digest();
    if (in_.register_().standby())
      rendezvous_.Standby(this);
    else
      rendezvous_.Register(this, in_);
  }
  StartRead(&in_);
}

class NodeFloorReactor;

// A task's lane of a ConnectNode stream: to the rendezvous, what a Connect
// stream is.
class FloorLane final : public TaskStream {
 public:
  FloorLane(NodeFloorReactor* node, uint64_t number) : node_(node), number_(number) {}
  void Send(ServiceMessage message) override;
  // Nothing to do: the relay writes the lane's closed frame after its exit
  // report, and the lane's end {OK} answers that (NodeFloorReactor::OnFrame),
  // as tfslurmd acknowledges an exit report on a lane.
  void FinishOk() override {}
  // As tfslurmd on a ConnectNode stream: every lane asks by digest, and the
  // bytes go once per node stream.
  bool CarriesCluster(const std::string& digest, std::unordered_set<std::string>&) override;

  uint64_t number() const { return number_; }
  bool registered = false;  // read reactions only
  bool ended = false;       // under the node's lock

 private:
  NodeFloorReactor* const node_;
  const uint64_t number_;
};

// A node's relay's ConnectNode stream (agent.proto): each lane is a task's
// stream, its frames written by the relay's writer (FrameBatcher), as
// tfslurmd writes them.
class NodeFloorReactor final : public grpc::ServerBidiReactor<NodeUp, NodeDown> {
 public:
  explicit NodeFloorReactor(Rendezvous& rendezvous) : rendezvous_(rendezvous) { StartRead(&in_); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the relay half-closed or went away: its lanes end with the stream
      FinishAfterWrites();
      return;
    }
    for (const AgentFrame& frame : in_.frames()) OnFrame(frame);
    in_.Clear();
    StartRead(&in_);
  }

  void OnWriteDone(bool) override {
    NodeDown* next;
    bool finish;
    {
      std::lock_guard lock(mu_);
      next = writer_.WriteDone();
      finish = !next && finishing_ && !finished_;
      finished_ = finished_ || finish;
    }
    if (next) StartWrite(next);
    if (finish) Finish(grpc::Status::OK);
  }

  void OnDone() override { delete this; }

  // Queues `frame` for `lane`, unless the lane or the stream has ended; a
  // lane's end ends it.
  void SendFrame(FloorLane* lane, ServiceFrame frame) {
    NodeDown* write;
    {
      std::lock_guard lock(mu_);
      if (lane->ended || finished_) return;
      lane->ended = frame.has_end();
      write = writer_.Queue(std::move(frame));
    }
    if (write) StartWrite(write);
  }

  // Whether `digest`'s bytes have yet to go on this stream: tfslurmd
  // remembers the last 4 clusters it sent on a ConnectNode stream.
  bool FirstSendOf(const std::string& digest) {
    std::lock_guard lock(mu_);
    if (std::find(clusters_sent_.begin(), clusters_sent_.end(), digest) != clusters_sent_.end())
      return false;
    clusters_sent_.push_back(digest);
    if (clusters_sent_.size() > 4) clusters_sent_.pop_front();
    return true;
  }

 private:
  void OnFrame(const AgentFrame& frame) {
    auto it = lanes_.find(frame.lane());
    if (it == lanes_.end()) {
      // As tfslurmd: a lane opens with a message on a number it does not
      // know (an ended lane stays known until its `closed`).
      if (!frame.has_message()) return;
      it = lanes_.emplace(frame.lane(), std::make_unique<FloorLane>(this, frame.lane())).first;
    }
    const std::unique_ptr<FloorLane>& lane = it->second;
    {
      std::lock_guard lock(mu_);
      if (lane->ended) return;  // a dead lane's frames are ignored
    }
    if (frame.body_case() == AgentFrame::kClosed) {
      ServiceFrame end;
      end.set_lane(frame.lane());
      end.mutable_end()->set_code(0);
      SendFrame(lane.get(), std::move(end));
      return;
    }
    const AgentMessage& m = frame.message();
    if (m.body_case() == AgentMessage::kExited) {
      rendezvous_.Exited(lane.get(), m);
    } else if (!lane->registered && m.body_case() == AgentMessage::kRegister) {
      lane->registered = true;
      if (m.register_().standby())
        rendezvous_.Standby(lane.get());
      else
        rendezvous_.Register(lane.get(), m);
    }
  }

  // Finish once the queued frames are written; nothing is queued after.
  void FinishAfterWrites() {
    {
      std::lock_guard lock(mu_);
      finishing_ = true;
      if (writer_.writing() || finished_) return;
      finished_ = true;
    }
    Finish(grpc::Status::OK);
  }

  Rendezvous& rendezvous_;
  NodeUp in_;
  // Read reactions only (one read is outstanding at a time); the lanes
  // live as long as the stream, as their pointers in the rendezvous do.
  std::map<uint64_t, std::unique_ptr<FloorLane>> lanes_;
  std::mutex mu_;  // the writer's, and the lanes' `ended`
  bench::FrameBatcher<NodeDown> writer_;
  std::deque<std::string> clusters_sent_;
  bool finishing_ = false;  // the relay has half-closed
  bool finished_ = false;   // Finish was called: nothing more is written
};

void FloorLane::Send(ServiceMessage message) {
  ServiceFrame frame;
  frame.set_lane(number_);
  *frame.mutable_message() = std::move(message);
  node_->SendFrame(this, std::move(frame));
}

bool FloorLane::CarriesCluster(const std::string& digest, std::unordered_set<std::string>&) {
  return node_->FirstSendOf(digest);
}

class FloorService final : public tfslurm::agent::v1::AgentService::CallbackService {
 public:
  explicit FloorService(Rendezvous& rendezvous) : rendezvous_(rendezvous) {}
  grpc::ServerBidiReactor<AgentMessage, ServiceMessage>* Connect(
      grpc::CallbackServerContext* context) override {
    return new FloorReactor(rendezvous_, context->peer());
  }
  grpc::ServerBidiReactor<NodeUp, NodeDown>* ConnectNode(grpc::CallbackServerContext*) override {
    return new NodeFloorReactor(rendezvous_);
  }

 private:
  Rendezvous& rendezvous_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    fprintf(stderr, "cannot read %s\n", path.c_str());
    exit(1);
  }
  return {std::istreambuf_iterator<char>(in), {}};
}

// Plaintext, or with `tls_dir` its server certificate and key.
std::shared_ptr<grpc::ServerCredentials> Credentials(const std::string& tls_dir) {
  if (tls_dir.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back(
      {ReadFile(tls_dir + "/server.key"), ReadFile(tls_dir + "/server.pem")});
  return grpc::SslServerCredentials(options);
}

}  // namespace

int main(int argc, char** argv) {
  std::string tls_dir;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--tls") tls_dir = argv[i + 1];
  // As tfslurmd: Debian's abseil checks every absl::Mutex acquisition.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
  signal(SIGPIPE, SIG_IGN);
  Rendezvous rendezvous;
  FloorService service(rendezvous);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", Credentials(tls_dir), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (!server || port == 0) {
    fprintf(stderr, "cannot listen on 127.0.0.1\n");
    return 1;
  }
  printf("ready agent_port=%d http_port=0 pid=%d\n", port, getpid());
  fflush(stdout);
  std::string line;
  int seq = 0;
  while (std::getline(std::cin, line)) {
    if (line.rfind("new ", 0) == 0) {
      std::istringstream words(line.substr(4));
      int n = 0;
      std::string framework;
      words >> n >> framework;
      rendezvous.Expect(n, framework == "pytorch");
      ++seq;
      printf("exp floor-%d secret %d\n", seq, 1000 + seq);
    } else if (line.rfind("cancel ", 0) == 0) {
      printf("ok\n");
    } else if (line == "quit") {
      break;
    } else {
      printf("error unknown command '%s'\n", line.c_str());
    }
    fflush(stdout);
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}
