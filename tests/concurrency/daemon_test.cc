// The daemon's wiring (service/daemon/) as tfslurmd's main.cc and the
// rendezvous benchmark use it: real SQLite, real listeners on ports the OS
// picks, the ticker and the HTTP thread running, stopped in order.
#include "service/daemon/daemon.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>

#include "agent.grpc.pb.h"
#include "service/core/tokens.h"
#include "service/store/sqlite_store.h"
#include "tests/concurrency/harness.h"

namespace tfslurm::concurrency {
namespace {

using nlohmann::json;

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(store::OpenSqliteStore((dir_.path() / "db").string())).value();
    options_.http_port = 0;
    options_.agent_listen = "127.0.0.1:0";
    options_.core.output_root = (dir_.path() / "out").string();
    options_.core.launch.agent_path = "/opt/tfslurm-agent";
    options_.core.poll_interval_ms = 50;
  }

  daemon::DaemonPorts Ports() { return {*store_, slurm_, clock_, random_, files_, accounts_}; }

  TempDir dir_;
  AtomicClock clock_;
  LockedRandomness random_;
  testing::FakeFiles files_;
  testing::FakeAccounts accounts_;
  LockedSlurm slurm_{4, 16};
  std::unique_ptr<Store> store_;
  daemon::DaemonOptions options_;
};

TEST_F(DaemonTest, ServesTheApiWithTokensAndNamesItsAgentEndpointInScripts) {
  auto token = Tokens(*store_, random_, clock_).Create("alice", false);
  ASSERT_TRUE(token.ok());
  auto d = daemon::Daemon::Start(options_, Ports());
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_GT((*d)->http_port(), 0);
  ASSERT_GT((*d)->agent_port(), 0);
  EXPECT_EQ((*d)->agent_address(), "127.0.0.1:" + std::to_string((*d)->agent_port()));

  httplib::Client c("127.0.0.1", (*d)->http_port());
  auto anonymous = c.Get("/experiments");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
  c.set_bearer_token_auth(token->c_str());
  json spec = {{"id", "wired"},
               {"command", {"python3", "train.py"}},
               {"cluster", {{"chief", 1}, {"worker", 1}}},
               {"resources", {{"nodes", 1}, {"tasks_per_node", 2}}}};
  auto created = c.Post("/experiments", spec.dump(), "application/json");
  ASSERT_TRUE(created);
  EXPECT_EQ(created->status, 201) << created->body;
  std::string secret;
  ASSERT_GT(slurm_.JobOf(JobName("wired", 1), &secret), 0);
  auto script = c.Get("/experiments/wired/sbatch");
  ASSERT_TRUE(script);
  EXPECT_NE(script->body.find((*d)->agent_address()), std::string::npos) << script->body;
  auto listed = c.Get("/experiments");
  ASSERT_TRUE(listed);
  EXPECT_EQ(json::parse(listed->body)["total"], 1) << listed->body;

  // The ticker polls the (fake) Slurm: the job's start reaches the experiment.
  slurm_.SetState(slurm_.JobOf(JobName("wired", 1)), JobState::kRunning);
  ASSERT_TRUE(WaitFor([&] {
    clock_.Advance(100);
    auto e = store_->GetExperiment("wired");
    return e.ok() && e->state == ExperimentState::kStarting;
  }));
  (*d)->Stop();
  (*d)->Stop();  // idempotent
  EXPECT_FALSE(c.Get("/experiments")) << "the listener is closed";
}

// Issue 41: the agent endpoint told anyone, whatever secret they sent,
// whether an experiment existed, had ended or which attempt was current. On
// the gRPC port as on the JSON route: without the secret, the answer is the
// missing experiment's, whatever the experiment's state.
TEST_F(DaemonTest, TheAgentEndpointAnswersAStrangerAsForAMissingExperiment) {
  auto d = daemon::Daemon::Start(options_, Ports());
  ASSERT_TRUE(d.ok()) << d.status().message();
  auto token = Tokens(*store_, random_, clock_).Create("alice", false);
  ASSERT_TRUE(token.ok());
  httplib::Client c("127.0.0.1", (*d)->http_port());
  c.set_bearer_token_auth(token->c_str());
  json spec = {{"id", "known"},
               {"command", {"python3", "train.py"}},
               {"cluster", {{"worker", 1}}},
               {"resources", {{"nodes", 1}}}};
  auto created = c.Post("/experiments", spec.dump(), "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;

  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string((*d)->agent_port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = agent::v1::AgentService::NewStub(channel);
  // The Refused a Register gets on its own stream.
  auto refusal = [&](const std::string& id, int attempt) {
    grpc::ClientContext context;
    auto stream = stub->Connect(&context);
    agent::v1::AgentMessage m;
    m.mutable_task()->set_experiment_id(id);
    m.mutable_task()->set_attempt(attempt);
    m.mutable_task()->set_secret("0000");
    m.mutable_register_()->set_node_name("node1");
    EXPECT_TRUE(stream->Write(m));
    stream->WritesDone();
    agent::v1::ServiceMessage reply;
    EXPECT_TRUE(stream->Read(&reply));
    stream->Finish();
    return reply;
  };
  for (int attempt : {1, 2}) {
    agent::v1::ServiceMessage missing = refusal("nowhere", attempt);
    agent::v1::ServiceMessage known = refusal("known", attempt);
    ASSERT_TRUE(missing.has_refused() && known.has_refused());
    EXPECT_EQ(missing.refused().reason(), "no experiment 'nowhere' with attempt " +
                                              std::to_string(attempt) + " and this secret");
    EXPECT_EQ(known.refused().reason(),
              "no experiment 'known' with attempt " + std::to_string(attempt) + " and this secret");
    EXPECT_EQ(known.refused().permanent(), missing.refused().permanent());
    EXPECT_EQ(known.refused().unknown_experiment(), missing.refused().unknown_experiment());
  }
}

TEST_F(DaemonTest, ATakenPortIsRefusedWithItsAddressAndNothingRuns) {
  auto first = daemon::Daemon::Start(options_, Ports());
  ASSERT_TRUE(first.ok()) << first.status().message();
  daemon::DaemonOptions same = options_;
  same.http_port = (*first)->http_port();
  auto second = daemon::Daemon::Start(same, Ports());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("cannot listen on 127.0.0.1:" +
                                           std::to_string(same.http_port)),
            std::string::npos)
      << second.status().message();
  EXPECT_NE(second.status().message().find("another tfslurmd"), std::string::npos);
}

TEST_F(DaemonTest, MakesTheOutputRootWithItsParentsAndGivesExperimentsItNormalized) {
  // Experiment directories are made without their parents: a wiring that did
  // not make the root could not create any experiment (the rendezvous
  // benchmark's server failed so before the root was made here).
  options_.core.output_root = (dir_.path() / "a" / "." / "b" / ".." / "out").string() + "/";
  const std::string made = (dir_.path() / "a" / "out").string();
  ASSERT_FALSE(std::filesystem::exists(dir_.path() / "a"));
  auto d = daemon::Daemon::Start(options_, Ports());
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_TRUE(std::filesystem::is_directory(made));
  EXPECT_EQ((*d)->output_root(), made);

  httplib::Client c("127.0.0.1", (*d)->http_port());
  json spec = {{"id", "rooted"},
               {"command", {"python3", "train.py"}},
               {"cluster", {{"worker", 1}}},
               {"resources", {{"nodes", 1}, {"tasks_per_node", 1}}}};
  auto token = Tokens(*store_, random_, clock_).Create("alice", false);
  ASSERT_TRUE(token.ok());
  c.set_bearer_token_auth(token->c_str());
  auto created = c.Post("/experiments", spec.dump(), "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  auto got = c.Get("/experiments/rooted");
  ASSERT_TRUE(got);
  EXPECT_EQ(json::parse(got->body)["model_dir"], made + "/rooted") << got->body;
}

TEST_F(DaemonTest, AnOutputRootThatCannotBeMadeIsRefusedBeforeAnythingListens) {
  std::ofstream(dir_.path() / "file") << "in the way";
  options_.core.output_root = (dir_.path() / "file" / "out").string();
  auto d = daemon::Daemon::Start(options_, Ports());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("cannot create the output root " + options_.core.output_root),
            std::string::npos)
      << d.status().message();
}

}  // namespace
}  // namespace tfslurm::concurrency
