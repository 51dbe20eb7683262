// One AgentService.Connect call: the agent's side of the bidirectional
// stream, run on threads of its own so that the agent's main loop never
// blocks on the network.
//
// A reader thread opens a fresh channel and the call, hands every
// ServiceMessage to the sink, and finally the call's status. A writer thread
// sends queued AgentMessages one at a time (a slow or stuck service blocks
// only this thread; flow control bounds what gRPC buffers). Each stream gets
// a fresh channel with a private subchannel pool, so a reconnect attempt
// really dials the service again instead of waiting out the gRPC channel's
// own reconnect backoff (up to two minutes) after the service came back.
//
// Thread safety: Send, CloseWrites and Cancel may be called from any thread.
// The sink is called from the reader thread (and once, `opened`, from the
// writer thread), never after the destructor has returned; it must not block and must not destroy
// the stream. `mu_` guards the outbox and the writer's flags; the gRPC call is the reader's, except
// that the writer thread writes to it until the reader has stopped it.
#ifndef TFSLURM_AGENT_SERVICE_STREAM_H_
#define TFSLURM_AGENT_SERVICE_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "agent.grpc.pb.h"
#include "agent.pb.h"
#include "base/mutex.h"

namespace tfslurm::agent {

struct StreamEvent {
  uint64_t stream_id = 0;
  // Exactly one of the three.
  std::optional<tfslurm::agent::v1::ServiceMessage> message;
  std::optional<grpc::Status> ended;  // the call is over; no event follows
  // The first message went out: the service is there (the call is not
  // wait_for_ready, so against a service that is down the write fails).
  // Through the node's relay: the relay is there.
  bool opened = false;
  // With `ended`, through the node's relay: the relay's stream to the
  // service never opened, so the service was not reached after all.
  bool service_not_reached = false;
};

struct StreamOptions {
  std::string target;  // HOST:PORT of tfslurmd's agent endpoint
  // Through the node's relay (agent/relay/node_relay.h) at this Unix socket,
  // which reaches `target` in TLS if tls_ca_pem says so; nullopt: straight
  // to `target`.
  std::optional<std::string> relay_socket;
  // TLS: the CA certificates (PEM) the service's certificate must verify
  // against, for the target's host; nullopt: plaintext.
  std::optional<std::string> tls_ca_pem;
  // HTTP/2 keepalive, to notice a service host that vanished without closing
  // the connection. tfslurmd accepts pings every 10 s or more; a gRPC server
  // left at its defaults drops clients that ping more often than every 5 min
  // ("too_many_pings"), so 0 (off) or a longer interval suits those.
  std::chrono::milliseconds keepalive_time{std::chrono::seconds(60)};
  std::chrono::milliseconds keepalive_timeout{std::chrono::seconds(20)};
};

class ServiceStream {
 public:
  using Sink = std::function<void(StreamEvent)>;

  // Starts connecting at once, in the background.
  ServiceStream(const StreamOptions& options, uint64_t id, Sink sink);
  // Cancels the call if it is still open and waits for the threads.
  ~ServiceStream();
  ServiceStream(const ServiceStream&) = delete;
  ServiceStream& operator=(const ServiceStream&) = delete;

  uint64_t id() const { return id_; }

  // Queues a message. Messages after CloseWrites, or after the stream broke,
  // are dropped.
  void Send(tfslurm::agent::v1::AgentMessage message) ABSL_LOCKS_EXCLUDED(mu_);
  // Half-closes the stream (WritesDone) once the queue is sent.
  void CloseWrites() ABSL_LOCKS_EXCLUDED(mu_);
  // Aborts the call; the sink then gets `ended` with CANCELLED.
  void Cancel();

 private:
  using ReaderWriter = grpc::ClientReaderWriter<tfslurm::agent::v1::AgentMessage,
                                                tfslurm::agent::v1::ServiceMessage>;
  void ReadLoop(StreamOptions options) ABSL_LOCKS_EXCLUDED(mu_);
  void WriteLoop(ReaderWriter* stream) ABSL_LOCKS_EXCLUDED(mu_);

  const uint64_t id_;
  const Sink sink_;
  // gRPC's own: TryCancel may be called from any thread.
  grpc::ClientContext context_;

  Mutex mu_;
  // _any: it waits on a tfslurm::Mutex (see WriteLoop).
  std::condition_variable_any cv_;
  std::deque<tfslurm::agent::v1::AgentMessage> outbox_ ABSL_GUARDED_BY(mu_);
  bool close_writes_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_writer_ ABSL_GUARDED_BY(mu_) = false;

  std::thread reader_;  // last member: starts after everything above exists
};

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_SERVICE_STREAM_H_
