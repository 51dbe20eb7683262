// The relay over gRPC's callback API on both sides: an agent stream is a
// server reactor (Down), its stream to the service a client reactor (Up) on
// the one shared channel, both owned by a Pipe. No thread per stream.
//
// Each direction carries one message at a time: a message read from one
// side is written to the other before the next read starts, so a slow reader
// on either side holds back the writer through gRPC's flow control instead of
// a queue in the relay.
//
// Threads: gRPC runs reactions on its threads, and Down's and Up's
// reactions run concurrently; every Pipe member below `mu_` is guarded by it.
// The messages in flight (`to_service_`, `to_agent_`) are touched only by
// the operation that owns them at the time (an Assignment waiting for its
// cluster is the cluster cache's until it hands it back), handed on with
// TFSLURM_HAPPENS_BEFORE/AFTER for TSan (base/happens_before.h): Debian's
// gRPC is not built with TSan.
#include "agent/relay/node_relay.h"

#include <grpcpp/grpcpp.h>

#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>

#include "agent.grpc.pb.h"
#include "agent/relay/activity.h"
#include "agent/relay/cluster_cache.h"
#include "agent/relay/node_link.h"
#include "base/happens_before.h"
#include "base/mutex.h"

namespace tfslurm::agent {
namespace {

using v1::AgentMessage;
using v1::ServiceMessage;

class Pipe;

// The agent's stream, served on the relay's socket.
class Down final : public grpc::ServerBidiReactor<AgentMessage, ServiceMessage> {
 public:
  explicit Down(Pipe* pipe) : pipe_(pipe) {}
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  Pipe* const pipe_;
};

// The agent stream's stream to the service, on the shared channel.
class Up final : public grpc::ClientBidiReactor<AgentMessage, ServiceMessage> {
 public:
  explicit Up(Pipe* pipe) : pipe_(pipe) {}
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool) override {}
  void OnDone(const grpc::Status& status) override;

 private:
  Pipe* const pipe_;
};

class Pipe final : public ClusterWaiter {
 public:
  Pipe(grpc::CallbackServerContext* down_context, v1::AgentService::Stub* stub, Activity* activity,
       ClusterCache* clusters)
      : down_context_(down_context),
        activity_(activity),
        clusters_(clusters),
        down_(this),
        up_(this) {
    activity_->Opened();
    // Made before any of either side's reactions (each begins with
    // AFTER(this): Down's and Up's members are read before the pipe's).
    TFSLURM_HAPPENS_BEFORE(&down_);
    TFSLURM_HAPPENS_BEFORE(&up_);
    stub->async()->Connect(&up_context_, &up_);
    // Writes to the service start from Down's reactions, outside Up's: the
    // hold keeps Up's call alive for them until the agent's side has ended.
    up_.AddHold();
    TFSLURM_HAPPENS_BEFORE(&to_agent_);
    up_.StartRead(&to_agent_);
    up_.StartCall();
    TFSLURM_HAPPENS_BEFORE(&to_service_);
    down_.StartRead(&to_service_);
  }
  Down* down() { return &down_; }

  // A message from the agent, or the agent's side ended.
  void FromAgent(bool ok) ABSL_LOCKS_EXCLUDED(mu_) {
    TFSLURM_HAPPENS_AFTER(&to_service_);
    bool cancel = false;
    {
      MutexLock lock(mu_);
      if (hold_released_) return;  // the service's side is over
      if (ok) {
        // This relay fills clusters in by digest (cluster_cache.h) until
        // one never came.
        if (to_service_.has_register_() && clusters_->by_digest())
          to_service_.mutable_register_()->set_cluster_by_digest(true);
        TFSLURM_HAPPENS_BEFORE(&to_service_);
        up_.StartWrite(&to_service_);
        return;
      }
      // The agent half-closed (after its exit report: the service's end of
      // the stream is the acknowledgment), or it went away.
      cancel = down_cancelled_;
      if (!cancel) up_.StartWritesDone();
      hold_released_ = true;
    }
    if (cancel) up_context_.TryCancel();
    up_.RemoveHold();
  }

  // The message went to the service: read the agent's next one.
  void ToServiceWritten(bool ok) ABSL_LOCKS_EXCLUDED(mu_) {
    TFSLURM_HAPPENS_AFTER(&to_service_);
    if (ok) {
      MutexLock lock(mu_);
      upstream_opened_ = true;
      if (!down_finished_) {
        TFSLURM_HAPPENS_BEFORE(&to_service_);
        down_.StartRead(&to_service_);
      }
      return;
    }
    // The call to the service broke; Up's OnDone gives its status.
    ReleaseHold();
  }

  // A message from the service, or its side ended. An Assignment that
  // names its cluster by digest alone waits for the bytes when they have
  // not come yet (ClusterArrived).
  void FromService(bool ok) ABSL_LOCKS_EXCLUDED(mu_) {
    TFSLURM_HAPPENS_AFTER(&to_agent_);
    if (!ok) {
      // The service ended the stream; no more writes to it, so that Up's
      // OnDone comes with the status.
      ReleaseHold();
      return;
    }
    if (to_agent_.has_assignment() && !to_agent_.assignment().cluster_digest().empty()) {
      v1::Assignment& assignment = *to_agent_.mutable_assignment();
      if (!assignment.cluster_zlib().empty()) {
        clusters_->Keep(assignment.cluster_digest(), assignment.cluster_zlib());
      } else if (!clusters_->FindOrWait(assignment.cluster_digest(),
                                        assignment.mutable_cluster_zlib(), this,
                                        ClusterCache::Clock::now())) {
        return;
      }
    }
    WriteToAgent();
  }

  // The assignment read last waits for nothing more (cluster_cache.h).
  void ClusterArrived(const std::string& zlib) override ABSL_LOCKS_EXCLUDED(mu_) {
    to_agent_.mutable_assignment()->set_cluster_zlib(zlib);
    WriteToAgent();
  }

  // From the relay's own thread, not a reaction: gRPC may run reactions of
  // ours inside these calls, so no lock is held across them.
  void ClusterNeverCame(const std::string& digest) override ABSL_LOCKS_EXCLUDED(mu_) {
    bool finish = false;
    {
      MutexLock lock(mu_);
      finish = !down_finished_;
      down_finished_ = true;
    }
    if (finish) {
      down_.Finish(grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          "the node's relay waited in vain for the cluster " + digest +
              " that tfslurmd sent on another stream of its connection; register again "
              "(the relay now asks for every cluster whole)"));
    }
    up_context_.TryCancel();
  }

  void Hold() override { refs_.fetch_add(1); }
  void Release() override {
    if (refs_.fetch_sub(1) == 1) {
      // Closed last: the relay's Shutdown waits for every pipe's.
      Activity* const activity = activity_;
      delete this;
      activity->Closed();
    }
  }

  // For TSan: what each side's OnDone comes after (every reaction's end).
  const void* reactions_done() const { return &reactions_done_; }

  // The message reached the agent's stream: read the service's next one.
  void ToAgentWritten(bool ok) ABSL_LOCKS_EXCLUDED(mu_) {
    TFSLURM_HAPPENS_AFTER(&to_agent_);
    {
      MutexLock lock(mu_);
      writing_to_agent_ = false;
      if (upstream_status_) {
        FinishDownLocked();
        return;
      }
      if (ok) {
        TFSLURM_HAPPENS_BEFORE(&to_agent_);
        up_.StartRead(&to_agent_);
        return;
      }
    }
    up_context_.TryCancel();  // the agent is gone
  }

  void DownCancelled() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(mu_);
      down_cancelled_ = true;
    }
    up_context_.TryCancel();
  }

  // The stream to the service is over: end the agent's with its status.
  void UpDone(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(mu_);
      upstream_status_ = status;
      if (!writing_to_agent_) FinishDownLocked();
    }
    Done();
  }

  // Each side's OnDone: the pipe goes when both have come (and the cluster
  // cache holds it no longer).
  void Done() {
    clusters_->Forget(this);
    Release();
  }

 private:
  // No write to the service starts after this; gRPC calls outside mu_ may
  // run reactions of ours on this thread.
  void ReleaseHold() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(mu_);
      if (hold_released_) return;
      hold_released_ = true;
    }
    up_.RemoveHold();
  }

  void WriteToAgent() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    upstream_opened_ = true;
    if (down_finished_) return;
    writing_to_agent_ = true;
    TFSLURM_HAPPENS_BEFORE(&to_agent_);
    down_.StartWrite(&to_agent_);
  }

  void FinishDownLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (down_finished_) return;
    down_finished_ = true;
    if (!upstream_opened_) down_context_->AddTrailingMetadata(kUpstreamNotOpened, "1");
    down_.Finish(*upstream_status_);
  }

  grpc::CallbackServerContext* const down_context_;
  Activity* const activity_;
  ClusterCache* const clusters_;
  grpc::ClientContext up_context_;
  Down down_;
  Up up_;
  AgentMessage to_service_;   // owned by the read or write in flight
  ServiceMessage to_agent_;   // likewise
  std::atomic<int> refs_{2};  // the two sides until their OnDone, and Hold
  char reactions_done_ = 0;   // for TSan only (reactions_done)

  Mutex mu_;
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  bool upstream_opened_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_to_agent_ ABSL_GUARDED_BY(mu_) = false;
  bool down_cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool down_finished_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> upstream_status_ ABSL_GUARDED_BY(mu_);
};

// A reaction's scope, for TSan: it runs after the call that started it,
// which the Pipe made after constructing both sides (AFTER(side)), and
// before its side's OnDone (BEFORE(reactions_done)), as gRPC orders them
// (grpcpp/support/server_callback.h, client_callback.h).
// `pipe` by reference: the side's member is read after AFTER(side).
class Reaction {
 public:
  Reaction(const void* side, Pipe* const& pipe) {
    TFSLURM_HAPPENS_AFTER(side);
    done_ = pipe->reactions_done();
  }
  ~Reaction() { TFSLURM_HAPPENS_BEFORE(done_); }

 private:
  const void* done_;
};

void Down::OnReadDone(bool ok) {
  Reaction reaction(this, pipe_);
  pipe_->FromAgent(ok);
}
void Down::OnWriteDone(bool ok) {
  Reaction reaction(this, pipe_);
  pipe_->ToAgentWritten(ok);
}
void Down::OnCancel() {
  Reaction reaction(this, pipe_);
  pipe_->DownCancelled();
}
// OnDone: after every reaction of its side; the pipe may go in it.
void Down::OnDone() {
  TFSLURM_HAPPENS_AFTER(this);
  TFSLURM_HAPPENS_AFTER(pipe_->reactions_done());
  pipe_->Done();
}
void Up::OnReadDone(bool ok) {
  Reaction reaction(this, pipe_);
  pipe_->FromService(ok);
}
void Up::OnWriteDone(bool ok) {
  Reaction reaction(this, pipe_);
  pipe_->ToServiceWritten(ok);
}
void Up::OnDone(const grpc::Status& status) {
  TFSLURM_HAPPENS_AFTER(this);
  TFSLURM_HAPPENS_AFTER(pipe_->reactions_done());
  pipe_->UpDone(status);
}

// An agent stream goes as a lane of the node's stream (node_link.h), or,
// to a tfslurmd without ConnectNode, through a Pipe of its own.
class RelayService final : public v1::AgentService::CallbackService {
 public:
  RelayService(v1::AgentService::Stub* stub, NodeLinks* links, Activity* activity,
               ClusterCache* clusters)
      : stub_(stub), links_(links), activity_(activity), clusters_(clusters) {
    // gRPC calls Connect only once the server it is registered with has
    // started, after this (and what it points to) was made; gRPC's threads
    // may predate it, so TSan is told.
    TFSLURM_HAPPENS_BEFORE(this);
  }
  grpc::ServerBidiReactor<AgentMessage, ServiceMessage>* Connect(
      grpc::CallbackServerContext* context) override {
    TFSLURM_HAPPENS_AFTER(this);
    if (auto* lane = links_->NewLane(context)) return lane;
    return (new Pipe(context, stub_, activity_, clusters_))->down();
  }

 private:
  v1::AgentService::Stub* const stub_;
  NodeLinks* const links_;
  Activity* const activity_;
  ClusterCache* const clusters_;
};

std::shared_ptr<grpc::Channel> ServiceChannel(const NodeRelayOptions& options) {
  grpc::ChannelArguments args;
  if (options.keepalive_time.count() > 0) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(options.keepalive_time.count()));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(options.keepalive_timeout.count()));
  }
  // The channel outlives a service restart. gRPC's reconnect backoff grows
  // to two minutes by default, during which new streams fail at once; the
  // agents' own backoff (up to 5 s) is the one that should decide.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      options.tls_ca_pem ? grpc::SslCredentials({*options.tls_ca_pem, "", ""})
                         : grpc::InsecureChannelCredentials();
  return grpc::CreateCustomChannel(options.service, credentials, args);
}

class Relay final : public NodeRelay {
 public:
  explicit Relay(NodeRelayOptions options) : options_(std::move(options)) {}
  ~Relay() override { Shutdown(); }

  Status Start() {
    std::shared_ptr<grpc::Channel> channel = ServiceChannel(options_);
    // Connect now, while the node's agents are starting, not at the first
    // Register.
    channel->GetState(/*try_to_connect=*/true);
    stub_ = v1::AgentService::NewStub(channel);
    links_ = std::make_unique<NodeLinks>(stub_.get(), &activity_, options_.node_streams);
    service_ = std::make_unique<RelayService>(stub_.get(), links_.get(), &activity_, &clusters_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + options_.socket_path, grpc::InsecureServerCredentials());
    // As tfslurmd's endpoint (service/agentrpc/grpc_server.cc): an agent
    // that pings (one of another version) is not sent away for it.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.RegisterService(service_.get());
    MutexLock lock(mu_);
    server_ = builder.BuildAndStart();
    if (!server_) return Unavailable("cannot listen on the relay socket " + options_.socket_path);
    links_->Open();
    return Status::Ok();
  }

  void ServeUntilIdle() override {
    // Every second, the waits for a cluster that never came end.
    while (!activity_.WaitUntilIdle(options_, std::chrono::seconds(1))) {
      if (int ended = clusters_.ExpireWaits(ClusterCache::Clock::now(), options_.cluster_wait))
        spdlog::warn(
            "relay: {} agent stream(s) waited {} ms for a cluster tfslurmd sent on another "
            "stream; they register again, and the relay asks for every cluster whole from now on",
            ended, options_.cluster_wait.count());
    }
    Shutdown();
  }

  void Shutdown() override {
    activity_.Stop();
    MutexLock lock(mu_);
    if (!server_) return;
    // Cancels every agent stream and returns once their reactions have
    // ended; each pipe then cancels its call to the service, whose OnDone
    // may come later, on gRPC's thread. The pipes use the cache and the
    // activity this relay owns: they must be gone before it is.
    server_->Shutdown(std::chrono::system_clock::now());
    server_.reset();
    links_->Shutdown(std::chrono::seconds(5));
    if (!activity_.WaitForNoStreams(std::chrono::seconds(5)))
      spdlog::warn("relay: {} stream(s) to the service still open 5 s after the shutdown",
                   activity_.open());
  }

  int open_streams() const override { return activity_.open(); }
  int node_streams_opened() const override { return links_ ? links_->opened() : 0; }

 private:
  const NodeRelayOptions options_;
  Activity activity_;
  ClusterCache clusters_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
  std::unique_ptr<NodeLinks> links_;
  std::unique_ptr<RelayService> service_;
  Mutex mu_;
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

StatusOr<std::unique_ptr<NodeRelay>> StartNodeRelay(const NodeRelayOptions& options) {
  auto relay = std::make_unique<Relay>(options);
  if (Status s = relay->Start(); !s.ok()) return s;
  return std::unique_ptr<NodeRelay>(std::move(relay));
}

int RunNodeRelayProcess(const NodeRelayOptions& options, int lock_fd,
                        const std::vector<std::string>& leftovers) {
  // flock on a descriptor that already holds the lock succeeds; one that
  // does not hold it means another relay has it.
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    spdlog::error(
        "relay: the lock on descriptor {} is not this relay's ({}); another relay "
        "serves this node",
        lock_fd, strerror(errno));
    return 1;
  }
  // The lock file names the relay, for people and tools (`kill $(cat ...)`).
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(lock_fd, 0) != 0 || pwrite(lock_fd, pid.data(), pid.size(), 0) < 0)
    spdlog::warn("relay: cannot write its pid into its lock file: {}", strerror(errno));
  // Whoever holds the lock owns the socket's path: one left there is a
  // relay's that ended.
  unlink(options.socket_path.c_str());
  auto relay = StartNodeRelay(options);
  if (!relay.ok()) {
    spdlog::error("relay: {}", relay.status().message());
    return 1;
  }
  spdlog::info("relay: serving the node's agents at {} for the service at {}{}",
               options.socket_path, options.service, options.tls_ca_pem ? " (TLS)" : "");
  (*relay)->ServeUntilIdle();
  spdlog::info("relay: idle; ending");
  // Still holding the lock: an agent that opened the lock file before this
  // finds it unlinked once it holds it, and tries again (relay_route.cc).
  unlink(options.socket_path.c_str());
  for (const std::string& path : leftovers) unlink(path.c_str());
  return 0;
}

}  // namespace tfslurm::agent
