// AgentService over gRPC's callback API: no thread per stream, so thousands
// of agents cost memory, not threads. Connect is served here; ConnectNode
// by node_stream.cc; what a task's stream means, by task_stream.h.
//
// Threads: gRPC runs a stream's reactions on its own threads, and a read's
// and a write's reactions may run at once; core sends to a stream from any
// thread, under its lock. Each ConnectReactor's `mu_` guards its write side;
// its read side is touched by one read reaction at a time.
//
// What gRPC orders for us (grpcpp/support/server_callback.h: a reaction runs
// after the operation that started it; OnDone after every other reaction)
// happens inside Debian's gRPC, which is not built with TSan; the reactor
// tells TSan of exactly those orderings (base/happens_before.h), so the TSan
// suite needs no suppression that would hide a race in a reaction of ours.
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <atomic>
#include <deque>

#include "agent.grpc.pb.h"
#include "base/happens_before.h"
#include "base/mutex.h"
#include "service/agentrpc/agent_endpoint.h"
#include "service/agentrpc/connection_clusters.h"
#include "service/agentrpc/convert.h"
#include "service/agentrpc/node_stream.h"
#include "service/agentrpc/task_stream.h"

namespace tfslurm::agentrpc {
namespace {

using agent::v1::AgentMessage;
using agent::v1::ServiceMessage;

class ConnectReactor final : public grpc::ServerBidiReactor<AgentMessage, ServiceMessage> {
 public:
  // `agents` null: the stream arrived before the server served core,
  // and ends at once as UNAVAILABLE, which agents retry like any broken
  // connection.
  ConnectReactor(Agents* agents, UidProof* uid_proof,
                 std::shared_ptr<ConnectionClusters::Connection> connection)
      : connection_(std::move(connection)),
        channel_(std::make_shared<ForwardingChannel>(
            [this](const ServiceMsg& message, bool end_after) { Enqueue(message, end_after); })) {
    if (agents) reader_.emplace(*agents, *uid_proof, channel_);
    TFSLURM_HAPPENS_BEFORE(this);  // made before any reaction (OnCancel's: below)
    if (reader_) {
      StartReading();
    } else {
      FinishWhenWritten(grpc::Status(grpc::StatusCode::UNAVAILABLE, "tfslurmd is starting; retry"));
    }
  }

  void OnReadDone(bool ok) override {
    ReactionScope reaction(&in_, &done_);
    if (!ok) {
      // The agent closed its side (after Exited) or the stream broke.
      reader_->Ended();
      FinishWhenWritten(grpc::Status::OK);
      return;
    }
    if (Status s = reader_->OnMessage(in_); !s.ok()) {
      FinishWhenWritten(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, s.message()));
      return;
    }
    StartReading();
  }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    ReactionScope reaction(&queue_, &done_);
    MutexLock lock(mu_);
    writing_ = false;
    if (!queue_.empty()) queue_.pop_front();
    if (!ok) {
      queue_.clear();
    }
    WriteNextLocked();
  }

  void OnDone() override {
    TFSLURM_HAPPENS_AFTER(&done_);  // every other reaction has ended
    channel_->Detach();
    delete this;
  }

  void OnCancel() override {
    // May run beside the other reactions, but only on a reactor gRPC has
    // from Connect: after its making, and after no operation.
    ReactionScope reaction(this, &done_);
    if (reader_) reader_->Ended();
  }

 private:
  // Called from core (under its lock), through the channel: queue and
  // return. A stream that has finished takes nothing, and so is never the
  // one of its connection that was sent a cluster whole (EncodingFor).
  void Enqueue(const ServiceMsg& message, bool finish_after) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    if (finished_) return;
    queue_.push_back(ToProto(message, EncodingFor(message)));
    if (finish_after) finish_after_writes_ = true;
    if (!writing_) WriteNextLocked();
  }

  // How `message` carries its TF cluster on this stream: whole, or by
  // digest alone when the stream's sender (a node's relay) said it fills
  // the bytes in and another stream of this connection has been sent them.
  TfConfigEncoding EncodingFor(const ServiceMsg& message) const {
    const auto* assignment = std::get_if<AssignmentMsg>(&message);
    if (assignment && assignment->cluster && !assignment->cluster->digest.empty() &&
        reader_->cluster_by_digest() && !connection_->FirstSend(assignment->cluster->digest))
      return TfConfigEncoding::kClusterDigestOnly;
    return TfConfigEncoding::kCompressedCluster;
  }

  void StartReading() {
    TFSLURM_HAPPENS_BEFORE(&in_);
    StartRead(&in_);
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!queue_.empty()) {
      writing_ = true;
      TFSLURM_HAPPENS_BEFORE(&queue_);
      StartWrite(&queue_.front());
    } else if ((finish_after_writes_ || pending_finish_) && !finished_) {
      finished_ = true;
      TFSLURM_HAPPENS_BEFORE(&done_);
      Finish(pending_finish_ ? *pending_finish_ : grpc::Status::OK);
    }
  }

  void FinishWhenWritten(grpc::Status status) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    if (finished_) return;
    pending_finish_ = std::move(status);
    if (!writing_) WriteNextLocked();
  }

  // The TCP connection the stream came on (read by core's sends).
  const std::shared_ptr<ConnectionClusters::Connection> connection_;
  const std::shared_ptr<ForwardingChannel> channel_;

  // The read side: only read reactions touch `in_` (one read is outstanding
  // at a time). Absent when the stream came before the server served core.
  AgentMessage in_;
  std::optional<TaskStreamReader> reader_;

  // The write side: Enqueue (core's threads) and OnWriteDone / the read
  // reactions' FinishWhenWritten (gRPC's threads).
  Mutex mu_;
  std::deque<ServiceMessage> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_after_writes_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> pending_finish_ ABSL_GUARDED_BY(mu_);

  // For TSan only: what OnDone comes after (ReactionScope, Finish).
  char done_ = 0;
};

class AgentServiceImpl final : public agent::v1::AgentService::CallbackService {
 public:
  explicit AgentServiceImpl(std::shared_ptr<UidProof> uid_proof)
      : uid_proof_(uid_proof ? std::move(uid_proof) : NoUidProof()) {}
  void Serve(Agents& agents) { agents_ = &agents; }
  grpc::ServerBidiReactor<AgentMessage, ServiceMessage>* Connect(
      grpc::CallbackServerContext* context) override {
    return new ConnectReactor(agents_.load(), uid_proof_.get(), connections_.Join(context->peer()));
  }
  grpc::ServerBidiReactor<agent::v1::NodeUp, agent::v1::NodeDown>* ConnectNode(
      grpc::CallbackServerContext*) override {
    return NewNodeStream(agents_.load(), uid_proof_.get());
  }

 private:
  const std::shared_ptr<UidProof> uid_proof_;
  // Outlives every reactor: the server is shut down before this goes.
  ConnectionClusters connections_;
  std::atomic<Agents*> agents_{nullptr};
};

class GrpcServer final : public AgentGrpcServer {
 public:
  GrpcServer(std::unique_ptr<AgentServiceImpl> service, std::unique_ptr<grpc::Server> server,
             int port)
      : service_(std::move(service)), server_(std::move(server)), port_(port) {}
  ~GrpcServer() override { Shutdown(); }
  int port() const override { return port_; }
  void Serve(Agents& agents) override { service_->Serve(agents); }
  void Shutdown() override {
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
      server_.reset();
    }
  }

 private:
  std::unique_ptr<AgentServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_;
};

}  // namespace

namespace {

// TLS through gRPC's own credentials, reloading: a FileWatcherCertificateProvider
// re-reads the key and certificate paths every second and hands a changed
// pair to new handshakes; open streams keep their session. The paths are
// tfslurmd's private staged copy (tls/staged_identity.h), which changes only
// when tfslurmd reloads on SIGHUP, both files at one instant.
std::shared_ptr<grpc::ServerCredentials> Credentials(const AgentTls* tls) {
  if (!tls) return grpc::InsecureServerCredentials();
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls->key_path, tls->cert_path, /*refresh_interval_sec=*/1);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace

StatusOr<std::unique_ptr<AgentGrpcServer>> StartAgentGrpcServer(
    const std::string& address, const AgentTls* tls, std::shared_ptr<UidProof> uid_proof) {
  auto service = std::make_unique<AgentServiceImpl>(std::move(uid_proof));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, Credentials(tls), &port);
  builder.RegisterService(service.get());
  // Agents keep one stream each for hours; keepalive pings find dead peers
  // (a node that vanished) without waiting for TCP's timeouts.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // gRPC sets SO_REUSEPORT on its listeners unless told not to: a second
  // tfslurmd on the same port would then bind too, and the kernel would
  // spread the agents' connections over both, sending some to a daemon that
  // does not know their experiment. Without it the second bind fails.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    return Unavailable("cannot listen for agents on " + address +
                       " (is another tfslurmd or program listening there? `ss -ltnp` names it; "
                       "give this one another --agent-listen)");
  }
  return std::unique_ptr<AgentGrpcServer>(
      new GrpcServer(std::move(service), std::move(server), port));
}

}  // namespace tfslurm::agentrpc
