// The node relay's TF clusters by digest (agent/relay/cluster_cache.h): a
// real relay, in-process, between raw agent streams on its socket and a
// fake service that sends a cluster's bytes on one stream and its digest
// alone on others, in either order. Real agents through a real relay
// process: agent_end_to_end_test.cc, AgentRelayTest.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "agent.grpc.pb.h"
#include "agent/relay/node_relay.h"
#include "tests/agent/fake_agent_service.h"
#include "tests/agent/temp_dir.h"

namespace tfslurm::agent {
namespace {

using testing::AssignmentMessage;
using testing::FakeAgentService;

constexpr auto kTimeout = std::chrono::seconds(20);

v1::ServiceMessage ClusterAssignment(int index, const std::string& digest,
                                     const std::string& zlib) {
  v1::Assignment a;
  a.set_role("worker");
  a.set_index(index);
  a.set_cluster_digest(digest);
  a.set_cluster_zlib(zlib);
  return AssignmentMessage(a);
}

class RelayClustersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.service = server_.target();
    options_.keepalive_time = std::chrono::milliseconds(0);
    // Long enough that a loaded TSan run delivers the bytes in time (300 ms
    // was not, once, beside a CI run), short enough for the test.
    options_.cluster_wait = std::chrono::milliseconds(1500);
    options_.node_streams = false;  // the cache serves streams of their own
    StartRelay("relay.sock");
  }
  void TearDown() override { StopRelay(); }

  void StartRelay(const std::string& socket) {
    options_.socket_path = dir_.Path(socket);
    auto relay = StartNodeRelay(options_);
    ASSERT_TRUE(relay.ok()) << relay.status().message();
    relay_ = std::move(relay).value();
    serving_ = std::thread([this] { relay_->ServeUntilIdle(); });
    stub_ = v1::AgentService::NewStub(
        grpc::CreateChannel("unix:" + options_.socket_path, grpc::InsecureChannelCredentials()));
  }
  void StopRelay() {
    if (relay_) relay_->Shutdown();
    if (serving_.joinable()) serving_.join();
    relay_.reset();
  }

  // An agent's stream through the relay, its Register written.
  struct AgentStream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::ServiceMessage>> rw;
  };
  std::unique_ptr<AgentStream> Register(int proc) {
    auto stream = std::make_unique<AgentStream>();
    stream->context.set_deadline(std::chrono::system_clock::now() + kTimeout);
    stream->rw = stub_->Connect(&stream->context);
    v1::AgentMessage m;
    m.mutable_task()->set_experiment_id("exp");
    m.mutable_task()->set_attempt(1);
    m.mutable_task()->set_proc_id(proc);
    m.mutable_register_()->set_node_name("node1");
    m.mutable_register_()->set_local_id(proc);
    EXPECT_TRUE(stream->rw->Write(m));
    return stream;
  }

  // Until the service has received `count` Registers.
  bool ServiceHasRegisters(size_t count) {
    return server_.service().WaitUntil(
        [count](const std::vector<FakeAgentService::Received>& received) {
          size_t registers = 0;
          for (const auto& r : received) registers += r.message.has_register_();
          return registers >= count;
        },
        kTimeout);
  }

  std::vector<bool> RegistersAskedByDigest() {
    std::vector<bool> asked;
    for (const auto& r : server_.service().received())
      if (r.message.has_register_()) asked.push_back(r.message.register_().cluster_by_digest());
    return asked;
  }

  testing::TempDir dir_;
  testing::FakeServer server_;
  NodeRelayOptions options_;
  std::unique_ptr<NodeRelay> relay_;
  std::thread serving_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
};

TEST_F(RelayClustersTest, ADigestAloneWaitsForTheBytesOnAnotherStreamAndIsFilledIn) {
  // The first agent's Assignment names the cluster alone, before the bytes
  // have come; the second's carries them; a third's names it again.
  server_.service().SetRegisterReply([](const v1::AgentMessage& m, int stream) {
    return std::vector<v1::ServiceMessage>{
        ClusterAssignment(m.task().proc_id(), "d1", stream == 1 ? "the bytes" : "")};
  });
  auto first = Register(0);
  ASSERT_TRUE(ServiceHasRegisters(1));
  auto second = Register(1);
  v1::ServiceMessage got;
  ASSERT_TRUE(first->rw->Read(&got));
  EXPECT_EQ(got.assignment().cluster_zlib(), "the bytes") << "filled in once they came";
  EXPECT_EQ(got.assignment().cluster_digest(), "d1");
  EXPECT_EQ(got.assignment().index(), 0);
  ASSERT_TRUE(second->rw->Read(&got));
  EXPECT_EQ(got.assignment().cluster_zlib(), "the bytes");
  EXPECT_EQ(got.assignment().index(), 1);
  auto third = Register(2);
  ASSERT_TRUE(third->rw->Read(&got));
  EXPECT_EQ(got.assignment().cluster_zlib(), "the bytes") << "kept from before";
  EXPECT_EQ(RegistersAskedByDigest(), std::vector<bool>({true, true, true}));
}

TEST_F(RelayClustersTest, AClusterThatNeverComesEndsTheStreamAndTheRelayAsksForClustersWhole) {
  // By digest alone whenever asked so: the bytes never come.
  server_.service().SetRegisterReply([](const v1::AgentMessage& m, int) {
    return std::vector<v1::ServiceMessage>{ClusterAssignment(
        m.task().proc_id(), "d2", m.register_().cluster_by_digest() ? "" : "the bytes")};
  });
  const auto start = std::chrono::steady_clock::now();
  auto waiting = Register(0);
  v1::ServiceMessage got;
  EXPECT_FALSE(waiting->rw->Read(&got)) << "no Assignment without its cluster";
  const grpc::Status status = waiting->rw->Finish();
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(status.error_message().find("waited in vain for the cluster d2"), std::string::npos)
      << status.error_message();
  EXPECT_GE(waited, options_.cluster_wait);
  EXPECT_LT(waited, std::chrono::seconds(5)) << "checked every second";
  // The agent registers again: this time the relay asks for the bytes.
  auto again = Register(0);
  ASSERT_TRUE(again->rw->Read(&got));
  EXPECT_EQ(got.assignment().cluster_zlib(), "the bytes");
  EXPECT_EQ(RegistersAskedByDigest(), std::vector<bool>({true, false}));
}

// Against a tfslurmd without ConnectNode (the fake serves Connect alone)
// the relay's node stream is refused as UNIMPLEMENTED, and from then on each
// agent stream goes on a stream of its own. The relay opens its node stream
// as it starts, so it knows before the node's agents come; one that came
// first is sent back, as never having reached the service, to register
// again.
TEST_F(RelayClustersTest, ToATfslurmdWithoutConnectNodeEachStreamGoesOnItsOwn) {
  StopRelay();
  options_.node_streams = true;
  StartRelay("relay-lanes.sock");
  server_.service().SetRegisterReply([](const v1::AgentMessage& m, int) {
    return std::vector<v1::ServiceMessage>{ClusterAssignment(m.task().proc_id(), "d3", "bytes")};
  });
  v1::ServiceMessage got;
  int sent_back = 0;
  for (int attempt = 0; attempt < 2 && !got.has_assignment(); ++attempt) {
    auto stream = Register(0);
    if (stream->rw->Read(&got)) break;
    const grpc::Status status = stream->rw->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
    EXPECT_EQ(stream->context.GetServerTrailingMetadata().count(kUpstreamNotOpened), 1u);
    ++sent_back;
  }
  ASSERT_TRUE(got.has_assignment()) << "not answered through a stream of its own";
  EXPECT_LE(sent_back, 1);
  EXPECT_EQ(relay_->node_streams_opened(), 1) << "not opened again once refused";
  auto second = Register(1);
  ASSERT_TRUE(second->rw->Read(&got)) << "the next agent's stream goes straight on its own";
  EXPECT_EQ(got.assignment().index(), 1);
}

}  // namespace
}  // namespace tfslurm::agent
