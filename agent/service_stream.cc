#include "agent/service_stream.h"

#include <grpcpp/support/channel_arguments.h>

#include "agent/relay/node_relay.h"

namespace tfslurm::agent {

ServiceStream::ServiceStream(const StreamOptions& options, uint64_t id, Sink sink)
    : id_(id), sink_(std::move(sink)), reader_([this, options] { ReadLoop(options); }) {}

ServiceStream::~ServiceStream() {
  Cancel();
  if (reader_.joinable()) reader_.join();
}

void ServiceStream::Send(v1::AgentMessage message) {
  MutexLock lock(mu_);
  if (close_writes_ || stop_writer_) return;
  // While a stuck service holds up the queue, heartbeats would only pile up
  // behind messages that already show the agent is alive.
  if (message.has_heartbeat() && !outbox_.empty()) return;
  outbox_.push_back(std::move(message));
  cv_.notify_all();
}

void ServiceStream::CloseWrites() {
  MutexLock lock(mu_);
  close_writes_ = true;
  cv_.notify_all();
}

void ServiceStream::Cancel() {
  // Thread-safe in gRPC, also before the call has started (it is then
  // cancelled as soon as it starts).
  context_.TryCancel();
}

void ServiceStream::ReadLoop(StreamOptions options) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // To the node's relay: a local socket, closed at once if the relay dies;
  // pings would only count against it (a gRPC server's default allows one
  // per 5 minutes while it sends nothing).
  if (options.keepalive_time.count() > 0 && !options.relay_socket) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(options.keepalive_time.count()));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(options.keepalive_timeout.count()));
  }
  // gRPC's TLS verifies the chain against the CAs and the target's host
  // against the certificate's names; a handshake that fails sends nothing.
  // The relay's socket is the node's, in a directory of this user's alone
  // (relay_route.h); the relay speaks TLS to the service.
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      options.tls_ca_pem && !options.relay_socket
          ? grpc::SslCredentials({*options.tls_ca_pem, "", ""})
          : grpc::InsecureChannelCredentials();
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      options.relay_socket ? "unix:" + *options.relay_socket : options.target, credentials, args);
  std::unique_ptr<v1::AgentService::Stub> stub = v1::AgentService::NewStub(channel);
  // Not wait_for_ready: when the service is down the call fails at once and
  // the agent's own backoff decides when to try again.
  std::unique_ptr<ReaderWriter> stream = stub->Connect(&context_);

  std::thread writer([this, s = stream.get()] { WriteLoop(s); });
  v1::ServiceMessage message;
  while (stream->Read(&message)) {
    StreamEvent event;
    event.stream_id = id_;
    event.message = std::move(message);
    sink_(std::move(event));
    message.Clear();
  }
  // Finish must not run concurrently with Write: stop the writer first. A
  // Write still blocked returns now that the call is over.
  {
    MutexLock lock(mu_);
    stop_writer_ = true;
    cv_.notify_all();
  }
  writer.join();
  grpc::Status status = stream->Finish();
  StreamEvent event;
  event.stream_id = id_;
  event.ended = std::move(status);
  event.service_not_reached =
      options.relay_socket && context_.GetServerTrailingMetadata().count(kUpstreamNotOpened) > 0;
  sink_(std::move(event));
}

void ServiceStream::WriteLoop(ReaderWriter* stream) {
  bool first = true;
  while (true) {
    v1::AgentMessage message;
    {
      MutexLock lock(mu_);
      // condition_variable_any unlocks and relocks mu_ itself; the analysis
      // sees mu_ held throughout, as it is whenever the predicate runs.
      cv_.wait(mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_writer_ || !outbox_.empty() || close_writes_;
      });
      if (stop_writer_) return;
      if (outbox_.empty()) break;  // close_writes_ with an empty outbox
      message = std::move(outbox_.front());
      outbox_.pop_front();
    }
    // Outside the lock: a Write blocked on a slow service must not block Send.
    if (!stream->Write(message)) {
      // The call is broken; the reader sees it end and reports the status.
      MutexLock lock(mu_);
      stop_writer_ = true;
      outbox_.clear();
      return;
    }
    if (first) {
      first = false;
      StreamEvent event;
      event.stream_id = id_;
      event.opened = true;
      sink_(std::move(event));
    }
  }
  stream->WritesDone();
}

}  // namespace tfslurm::agent
