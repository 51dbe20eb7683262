// An in-process AgentService for end-to-end tests of the real tfslurm-agent
// binary: records every AgentMessage, answers Register as the test scripts,
// lets the test push ServiceMessages, and acknowledges an exit report the way
// tfslurmd does (finishing the stream with OK once the agent half-closes).
//
// Thread safety: every public method may be called from any thread.
#ifndef TFSLURM_TESTS_AGENT_FAKE_AGENT_SERVICE_H_
#define TFSLURM_TESTS_AGENT_FAKE_AGENT_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent.grpc.pb.h"
#include "agent.pb.h"

namespace tfslurm::agent::testing {

namespace v1 = tfslurm::agent::v1;

class FakeAgentService final : public v1::AgentService::Service {
 public:
  struct Received {
    int stream = 0;  // 0-based, in order of Connect calls
    v1::AgentMessage message;
  };
  // Given a Register and the stream it came on, what to answer.
  using RegisterReply =
      std::function<std::vector<v1::ServiceMessage>(const v1::AgentMessage& message, int stream)>;
  using Predicate = std::function<bool(const std::vector<Received>&)>;

  void SetRegisterReply(RegisterReply reply);
  // When false, the stream stays open after the agent half-closes (no
  // acknowledgment) until the agent cancels or the server shuts down.
  void SetAcknowledgeExit(bool acknowledge);

  // Queues a message on the most recent stream.
  void Send(v1::ServiceMessage message);

  // Waits until `predicate` holds for the messages received so far.
  bool WaitUntil(const Predicate& predicate, std::chrono::milliseconds timeout);
  std::vector<Received> received() const;
  int streams() const;
  // The peer of each stream (gRPC's "ipv4:127.0.0.1:PORT"): streams on one
  // connection share it.
  std::vector<std::string> peers() const;

  grpc::Status Connect(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ServiceMessage, v1::AgentMessage>* stream) override;

 private:
  struct StreamState {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<v1::ServiceMessage> outbox;
    bool read_done = false;
  };

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Received> received_;
  std::vector<std::shared_ptr<StreamState>> streams_;
  std::vector<std::string> peers_;
  RegisterReply register_reply_;
  bool acknowledge_exit_ = true;
};

// A gRPC server on 127.0.0.1 running a FakeAgentService.
class FakeServer {
 public:
  // port 0: the OS picks one.
  explicit FakeServer(int port = 0);
  // Over TLS, presenting this certificate chain and key (PEM).
  FakeServer(const std::string& cert_chain_pem, const std::string& key_pem, int port = 0);
  // Cancels open streams at once, like a crashing service.
  ~FakeServer();

  int port() const { return port_; }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  FakeAgentService& service() { return service_; }

 private:
  void Start(int port, std::shared_ptr<grpc::ServerCredentials> credentials);

  FakeAgentService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// Builders for the messages tests send.
v1::ServiceMessage AssignmentMessage(const v1::Assignment& assignment);
v1::ServiceMessage ShutdownMessage(const std::string& reason, int grace_ms);
v1::ServiceMessage RefusedMessage(const std::string& reason, bool permanent);
// What a tfslurmd that has no such experiment answers a Register with.
v1::ServiceMessage UnknownExperimentMessage(const std::string& experiment_id);

}  // namespace tfslurm::agent::testing

#endif  // TFSLURM_TESTS_AGENT_FAKE_AGENT_SERVICE_H_
