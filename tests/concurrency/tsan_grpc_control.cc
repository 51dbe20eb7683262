// A control for the TSan stage's suppressions (tests/
// tsan_suppressions.txt): a race in a gRPC callback of our own must still be
// reported. Debian's gRPC is not built with TSan, so its internal
// synchronization is invisible and its frames sit beneath every reaction;
// a suppression that matches any frame of libgrpc (`race:libgrpc++.so`)
// would hide this race, and did (issue 40).
//
// The program serves AgentService with a callback reactor, the kind
// service/agentrpc/grpc_server.cc is, whose OnReadDone increments a counter
// that a thread of ours reads at the same time, without a lock: the shape
// of a real bug there (core's threads enqueue while gRPC's run the
// reactions). Built under TFSLURM_TSAN only; tsan_control_test.sh runs it
// and passes only when TSan reports the race in RacyReactor::OnReadDone and
// exits 66.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "agent.grpc.pb.h"

namespace {

using tfslurm::agent::v1::AgentMessage;
using tfslurm::agent::v1::AgentService;
using tfslurm::agent::v1::ServiceMessage;

long shared_reads = 0;  // the race: the reactions write it, watcher() reads it, unlocked

class RacyReactor final : public grpc::ServerBidiReactor<AgentMessage, ServiceMessage> {
 public:
  RacyReactor() { StartRead(&in_); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    ++shared_reads;
    StartRead(&in_);
  }
  void OnDone() override { delete this; }

 private:
  AgentMessage in_;
};

class RacyService final : public AgentService::CallbackService {
  grpc::ServerBidiReactor<AgentMessage, ServiceMessage>* Connect(
      grpc::CallbackServerContext*) override {
    return new RacyReactor();
  }
};

}  // namespace

int main() {
  RacyService service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "tsan_grpc_control: cannot start the server\n");
    return 2;
  }
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  std::atomic<bool> done{false};
  long seen = 0;
  std::thread watcher([&] {
    while (!done.load()) seen += shared_reads;
  });
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&channel] {
      auto stub = AgentService::NewStub(channel);
      grpc::ClientContext context;
      auto stream = stub->Connect(&context);
      AgentMessage message;
      for (int i = 0; i < 200; ++i) stream->Write(message);
      stream->WritesDone();
      ServiceMessage reply;
      while (stream->Read(&reply)) {
      }
      (void)stream->Finish();
    });
  }
  for (auto& t : clients) t.join();
  done = true;
  watcher.join();
  server->Shutdown();
  std::printf("tsan_grpc_control: %ld reads (%ld seen)\n", shared_reads, seen);
  return 0;
}
