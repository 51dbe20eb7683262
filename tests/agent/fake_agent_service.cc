#include "tests/agent/fake_agent_service.h"

#include <grpcpp/server_builder.h>

#include <stdexcept>
#include <thread>

namespace tfslurm::agent::testing {

void FakeAgentService::SetRegisterReply(RegisterReply reply) {
  std::lock_guard<std::mutex> lock(mu_);
  register_reply_ = std::move(reply);
}

void FakeAgentService::SetAcknowledgeExit(bool acknowledge) {
  std::lock_guard<std::mutex> lock(mu_);
  acknowledge_exit_ = acknowledge;
}

void FakeAgentService::Send(v1::ServiceMessage message) {
  std::shared_ptr<StreamState> state;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (streams_.empty()) throw std::logic_error("FakeAgentService::Send before any stream");
    state = streams_.back();
  }
  std::lock_guard<std::mutex> lock(state->mu);
  state->outbox.push_back(std::move(message));
  state->cv.notify_all();
}

bool FakeAgentService::WaitUntil(const Predicate& predicate, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return predicate(received_); });
}

std::vector<FakeAgentService::Received> FakeAgentService::received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return received_;
}

std::vector<std::string> FakeAgentService::peers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peers_;
}

int FakeAgentService::streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(streams_.size());
}

grpc::Status FakeAgentService::Connect(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::ServiceMessage, v1::AgentMessage>* stream) {
  auto state = std::make_shared<StreamState>();
  int index;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = static_cast<int>(streams_.size());
    streams_.push_back(state);
    peers_.push_back(context->peer());
  }

  // gRPC allows one reader and one writer at a time: read here, write from
  // the handler's thread below.
  std::thread reader([&] {
    v1::AgentMessage message;
    while (stream->Read(&message)) {
      RegisterReply reply;
      {
        std::lock_guard<std::mutex> lock(mu_);
        received_.push_back({index, message});
        if (message.has_register_()) reply = register_reply_;
        cv_.notify_all();
      }
      if (reply) {
        std::vector<v1::ServiceMessage> answers = reply(message, index);
        std::lock_guard<std::mutex> lock(state->mu);
        for (auto& answer : answers) state->outbox.push_back(std::move(answer));
        state->cv.notify_all();
      }
    }
    std::lock_guard<std::mutex> lock(state->mu);
    state->read_done = true;
    state->cv.notify_all();
  });

  {
    std::unique_lock<std::mutex> lock(state->mu);
    while (true) {
      state->cv.wait(lock, [&] { return !state->outbox.empty() || state->read_done; });
      while (!state->outbox.empty()) {
        v1::ServiceMessage message = std::move(state->outbox.front());
        state->outbox.pop_front();
        lock.unlock();
        stream->Write(message);
        lock.lock();
      }
      if (state->read_done) break;
    }
  }
  reader.join();

  bool acknowledge;
  {
    std::lock_guard<std::mutex> lock(mu_);
    acknowledge = acknowledge_exit_;
  }
  if (acknowledge) return grpc::Status::OK;
  // gRPC's sync API has no notification of cancellation: poll for it.
  std::unique_lock<std::mutex> lock(mu_);
  while (!context->IsCancelled()) cv_.wait_for(lock, std::chrono::milliseconds(10));
  return grpc::Status(grpc::StatusCode::CANCELLED, "not acknowledged");
}

FakeServer::FakeServer(int port) { Start(port, grpc::InsecureServerCredentials()); }

FakeServer::FakeServer(const std::string& cert_chain_pem, const std::string& key_pem, int port) {
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({key_pem, cert_chain_pem});
  Start(port, grpc::SslServerCredentials(options));
}

void FakeServer::Start(int port, std::shared_ptr<grpc::ServerCredentials> credentials) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), credentials, &port_);
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    throw std::runtime_error("cannot start the fake AgentService on port " + std::to_string(port));
  }
}

FakeServer::~FakeServer() {
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
}

v1::ServiceMessage AssignmentMessage(const v1::Assignment& assignment) {
  v1::ServiceMessage message;
  *message.mutable_assignment() = assignment;
  return message;
}

v1::ServiceMessage ShutdownMessage(const std::string& reason, int grace_ms) {
  v1::ServiceMessage message;
  message.mutable_shutdown()->set_reason(reason);
  message.mutable_shutdown()->set_grace_ms(grace_ms);
  return message;
}

v1::ServiceMessage RefusedMessage(const std::string& reason, bool permanent) {
  v1::ServiceMessage message;
  message.mutable_refused()->set_reason(reason);
  message.mutable_refused()->set_permanent(permanent);
  return message;
}

v1::ServiceMessage UnknownExperimentMessage(const std::string& experiment_id) {
  // As tfslurmd sends it: permanent for agents that predate the field.
  v1::ServiceMessage message = RefusedMessage("no experiment '" + experiment_id + "'", true);
  message.mutable_refused()->set_unknown_experiment(true);
  return message;
}

}  // namespace tfslurm::agent::testing
