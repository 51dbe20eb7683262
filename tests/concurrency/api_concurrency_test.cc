// The REST API (httplib, with tfslurmd's connection threads and token auth)
// and both agent transports (gRPC streams and JSON over HTTP) serving many
// clients at once, over one Experiments: users submit, list, read, cancel
// and poke at each other's experiments while agents rendezvous, heartbeat
// and exit. Every answer is checked, then the end state. tests/run.sh also
// runs this under TSan.
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "agent.grpc.pb.h"
#include "agent/relay/node_relay.h"
#include "schema/tf_config_wire.h"
#include "service/agentrpc/agent_endpoint.h"
#include "service/agentrpc/connection_clusters.h"
#include "service/api/auth.h"
#include "service/api/connection_threads.h"
#include "service/api/http_api.h"
#include "service/api/listen_backlog.h"
#include "service/core/core.h"
#include "service/store/sqlite_store.h"
#include "tests/concurrency/harness.h"

namespace tfslurm::concurrency {
namespace {

using nlohmann::json;
namespace pb = agent::v1;

constexpr int kTasks = 8;  // chief, ps, 6 workers on 2 nodes x 4

json SmallSpec(const std::string& id) {
  return {{"id", id},
          {"command", {"python3", "train.py", "it's $(not) run"}},
          {"cluster", {{"chief", 1}, {"ps", 1}, {"worker", 6}}},
          {"resources", {{"nodes", 2}, {"tasks_per_node", 4}}},
          {"success", "all_workers"}};
}

// What an agent learned, for the end-state checks.
struct AgentLog {
  std::vector<pb::Assignment> assignments;
  bool shutdown = false;
  bool refused = false;
};

class ApiConcurrencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(store::OpenSqliteStore((dir_.path() / "db").string())).value();
    CoreConfig config;
    config.output_root = (dir_.path() / "out").string();
    config.poll_interval_ms = 10;
    config.barrier_timeout_ms = 24 * 3600 * 1000;
    config.heartbeat_interval_ms = 3600 * 1000;
    config.shutdown_grace_ms = 3600 * 1000;
    // As the daemon wires it: the agent endpoint listens, core is made
    // knowing its address, then the endpoint serves core.
    auto grpc = agentrpc::StartAgentGrpcServer("127.0.0.1:0");
    ASSERT_TRUE(grpc.ok()) << grpc.status().message();
    grpc_ = std::move(grpc).value();
    config.launch = {"/opt/tfslurm-agent", "127.0.0.1:" + std::to_string(grpc_->port())};
    list_cache_ = std::make_shared<api::ExperimentListCache>(api::ListSourceOf(*store_));
    experiments_ = NewCore({*store_, slurm_, clock_, random_, files_, accounts_}, config, nullptr,
                           {list_cache_});
    grpc_->Serve(*experiments_);
    token_store_ = std::make_unique<Tokens>(*store_, random_, clock_);

    for (auto [user, admin] :
         {std::pair<std::string, bool>{"alice", false}, {"bob", false}, {"root", true}})
      tokens_[user] = token_store_->Create(user, admin).value();
    auth_ = api::NewTokenAuthenticator(*token_store_);
    // As tfslurmd sets up its listener.
    http_.new_task_queue = [] { return new api::OnDemandThreads(256); };
    http_.set_read_timeout(10, 0);
    http_.set_write_timeout(10, 0);
    api::RegisterExperimentRoutes(http_, *experiments_, clock_, *auth_, list_cache_, {});
    agentrpc::RegisterAgentHttpRoutes(http_, *experiments_);
    port_ = http_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    // As tfslurmd does: httplib's backlog of 5 is too few for the bursts here.
    ASSERT_TRUE(api::RaiseListenBacklog(port_));
    background_.emplace_back([this] { http_.listen_after_bind(); });
    background_.emplace_back([this] {
      while (!stop_) {
        clock_.Advance(5);
        experiments_->Tick();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
    ASSERT_TRUE(WaitFor([&] { return http_.is_running(); }));
    // httplib's client compiles its function-local static regexes (the
    // status line's) on first use, inside libcpp-httplib.so, which is not
    // built with TSan: TSan does not see that static's guard, and reads a
    // first use racing other threads' uses as a race in libstdc++'s regex
    // internals. One request from this thread before the test's threads
    // start makes that first use happen before them, so no suppression of
    // std::regex internals is needed (one would hide a real race on our own
    // regexes, as aaebd2c's was).
    ASSERT_TRUE(Client("").Get("/experiments"));
  }

  void TearDown() override {
    stop_ = true;
    http_.stop();
    for (auto& t : background_) t.join();
    if (grpc_) grpc_->Shutdown();
    grpc_.reset();
    experiments_.reset();
  }

  httplib::Client Client(const std::string& user) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    if (!user.empty()) c.set_bearer_token_auth(tokens_[user].c_str());
    return c;
  }

  pb::TaskRef Ref(const std::string& id, int proc) {
    std::string secret;
    slurm_.JobOf(JobName(id, 1), &secret);
    pb::TaskRef ref;
    ref.set_experiment_id(id);
    ref.set_attempt(1);
    ref.set_secret(secret);
    ref.set_proc_id(proc);
    return ref;
  }

  pb::AgentMessage Register(const std::string& id, int proc) {
    pb::AgentMessage m;
    *m.mutable_task() = Ref(id, proc);
    auto* r = m.mutable_register_();
    r->set_slurm_job_id(slurm_.JobOf(JobName(id, 1)));
    r->set_node_name("node" + std::to_string(proc / 4 + 1));
    r->set_address("10.0.0." + std::to_string(proc / 4 + 1));
    r->set_port(30000 + proc);
    r->set_local_id(proc % 4);
    return m;
  }

  // A task's Connect stream, opened with a minute's deadline.
  struct Stream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<pb::AgentMessage, pb::ServiceMessage>> rw;
    pb::ServiceMessage reply;
  };
  static std::unique_ptr<Stream> OpenStream(pb::AgentService::Stub& stub) {
    auto stream = std::make_unique<Stream>();
    stream->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stream->rw = stub.Connect(&stream->context);
    return stream;
  }

  // One task over gRPC, as tfslurm-agent does it; violations are reported.
  void GrpcAgent(const std::string& id, int proc, bool cancelled, AgentLog* log,
                 std::shared_ptr<grpc::Channel> channel) {
    auto stub = pb::AgentService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(cancelled ? 10 : 120));
    auto stream = stub->Connect(&ctx);
    // A cancelled job's agents die with the job: Slurm kills them.
    std::atomic<bool> done{false};
    std::thread killer;
    if (cancelled) {
      killer = std::thread([&] {
        int64_t job = slurm_.JobOf(JobName(id, 1));
        WaitFor([&] { return done || slurm_.StateOf(job) == JobState::kCancelled; });
        ctx.TryCancel();
      });
    }
    struct Join {
      std::atomic<bool>& done;
      std::thread& t;
      ~Join() {
        done = true;
        if (t.joinable()) t.join();
      }
    } join{done, killer};
    if (!stream->Write(Register(id, proc))) {
      EXPECT_TRUE(cancelled) << id << " task " << proc << ": the stream broke";
      stream->Finish();
      return;
    }
    pb::ServiceMessage in;
    // Until the assignment: a cancelled experiment's tasks are refused, or
    // wait until Slurm would kill them (the deadline stands in).
    while (log->assignments.empty()) {
      if (!stream->Read(&in)) {
        EXPECT_TRUE(cancelled) << id << " task " << proc << ": stream ended before the assignment";
        stream->Finish();
        return;
      }
      if (in.has_refused()) {
        log->refused = true;
        EXPECT_TRUE(cancelled) << id << " task " << proc << ": refused: " << in.refused().reason();
        stream->WritesDone();
        stream->Finish();
        return;
      }
      if (in.has_assignment()) log->assignments.push_back(in.assignment());
    }
    if (cancelled) {
      ctx.TryCancel();  // killed with the job
      stream->Finish();
      return;
    }
    pb::AgentMessage m;
    *m.mutable_task() = Ref(id, proc);
    m.mutable_heartbeat();
    EXPECT_TRUE(stream->Write(m));
    if (log->assignments[0].report_checkpoints()) {
      m.mutable_progress()->set_checkpoint_step(500);
      m.mutable_progress()->set_checkpoint_path("/ckpt/500");
      EXPECT_TRUE(stream->Write(m));
    }
    if (log->assignments[0].role() != "worker") {
      while (stream->Read(&in)) {
        if (in.has_assignment()) log->assignments.push_back(in.assignment());  // re-sent; ignored
        if (in.has_shutdown()) {
          log->shutdown = true;
          break;
        }
        EXPECT_FALSE(in.has_refused()) << in.refused().reason();
      }
      EXPECT_TRUE(log->shutdown) << id << " task " << proc << ": no shutdown";
      m.mutable_exited()->set_signal(SIGTERM);
      m.mutable_exited()->set_reaped(true);
    } else {
      m.mutable_exited()->set_exit_code(0);
    }
    EXPECT_TRUE(stream->Write(m));
    stream->WritesDone();
    while (stream->Read(&in))
      if (in.has_assignment()) log->assignments.push_back(in.assignment());
    grpc::Status s = stream->Finish();
    EXPECT_TRUE(s.ok()) << id << " task " << proc << ": " << s.error_message();
  }

  // One task over JSON/HTTP, as a curl client would: registering again on
  // 202 until the assignment comes.
  void HttpAgent(const std::string& id, int proc, bool cancelled, AgentLog* log) {
    httplib::Client c = Client("");
    auto post = [&](const pb::AgentMessage& m, const char* query,
                    pb::ServiceMessage* reply) -> int {
      std::string body;
      EXPECT_TRUE(google::protobuf::util::MessageToJsonString(m, &body).ok());
      auto res = c.Post(std::string("/agent/v1/message") + query, body, "application/json");
      if (!res) return -1;
      reply->Clear();
      if (res->status == 200 && res->body != "{}")
        EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(res->body, reply).ok())
            << res->body;
      return res->status;
    };
    pb::ServiceMessage reply;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(cancelled ? 10 : 120);
    int64_t job = slurm_.JobOf(JobName(id, 1));
    while (log->assignments.empty()) {
      if (cancelled && slurm_.StateOf(job) == JobState::kCancelled) return;  // killed with the job
      int status = post(Register(id, proc), "?wait_s=1", &reply);
      if (reply.has_refused() || status >= 400) {
        log->refused = true;
        EXPECT_TRUE(cancelled) << id << " task " << proc << ": HTTP " << status << " "
                               << reply.refused().reason();
        return;
      }
      if (reply.has_assignment()) log->assignments.push_back(reply.assignment());
      if (std::chrono::steady_clock::now() > deadline) {
        EXPECT_TRUE(cancelled) << id << " task " << proc << ": no assignment over HTTP";
        return;
      }
    }
    if (cancelled) return;
    pb::AgentMessage m;
    *m.mutable_task() = Ref(id, proc);
    bool worker = log->assignments[0].role() == "worker";
    while (!worker && !log->shutdown) {
      m.mutable_heartbeat();
      int status = post(m, "", &reply);
      EXPECT_EQ(status, 200);
      if (reply.has_assignment()) log->assignments.push_back(reply.assignment());
      if (reply.has_shutdown()) log->shutdown = true;
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << id << " task " << proc << ": no shutdown over HTTP";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (worker) {
      m.mutable_exited()->set_exit_code(0);
    } else {
      m.mutable_exited()->set_signal(SIGTERM);
      m.mutable_exited()->set_reaped(true);
    }
    EXPECT_EQ(post(m, "", &reply), 200);
  }

  TempDir dir_;
  AtomicClock clock_;
  LockedRandomness random_;
  testing::FakeFiles files_;
  testing::FakeAccounts accounts_;
  std::unique_ptr<Tokens> token_store_;
  LockedSlurm slurm_{4, 16};
  std::unique_ptr<Store> store_;
  std::shared_ptr<api::ExperimentListCache> list_cache_;
  std::unique_ptr<Core> experiments_;
  std::unique_ptr<agentrpc::AgentGrpcServer> grpc_;
  std::map<std::string, std::string> tokens_;
  std::unique_ptr<api::Authenticator> auth_;
  httplib::Server http_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> background_;
};

TEST_F(ApiConcurrencyTest, UsersAndAgentsOnBothTransportsAtOnce) {
  // alice-0..2 and bob-0..2 run to success; alice-c is cancelled by alice
  // while its tasks register.
  const std::vector<std::string> ids = {"alice-0", "alice-1", "alice-2", "bob-0",
                                        "bob-1",   "bob-2",   "alice-c"};
  auto owner = [](const std::string& id) { return id.substr(0, id.find('-')); };
  auto cancelled = [](const std::string& id) { return id == "alice-c"; };
  std::map<std::string, std::atomic<bool>> created;
  for (const auto& id : ids) created[id] = false;
  std::atomic<bool> users_done{false};

  std::vector<std::thread> threads;
  // Submissions, each from its owner's client, all at once.
  for (const auto& id : ids) {
    threads.emplace_back([&, id] {
      auto c = Client(owner(id));
      auto res = c.Post("/experiments", SmallSpec(id).dump(), "application/json");
      ASSERT_TRUE(res) << httplib::to_string(res.error());
      EXPECT_EQ(res->status, 201) << res->body;
      created[id] = true;
    });
  }
  // Slurm starts each job once submitted.
  threads.emplace_back([&] {
    std::set<std::string> running;
    while (running.size() < ids.size() && !stop_) {
      for (const auto& id : ids)
        if (!running.count(id) && created[id])
          if (int64_t job = slurm_.JobOf(JobName(id, 1))) {
            slurm_.SetState(job, JobState::kRunning);
            running.insert(id);
          }
      std::this_thread::yield();
    }
  });
  // Users reading, listing and trespassing while it all runs.
  for (const std::string user : {"alice", "bob", "root", ""}) {
    threads.emplace_back([&, user] {
      auto c = Client(user);
      for (int i = 0; !users_done; ++i) {
        const std::string& id = ids[i % ids.size()];
        bool mine = user == "root" || user == owner(id);
        auto res = c.Get("/experiments/" + id);
        ASSERT_TRUE(res) << user << ": " << httplib::to_string(res.error());
        if (user.empty())
          EXPECT_EQ(res->status, 401);
        else if (res->status != 404)  // not created yet
          EXPECT_EQ(res->status, mine ? 200 : 403) << user << " GET " << id << ": " << res->body;
        res = c.Get("/experiments/" + id + "/sbatch");
        ASSERT_TRUE(res) << user << ": " << httplib::to_string(res.error());
        if (res->status == 200) {
          EXPECT_TRUE(mine) << user << " read the script of " << id;
          // The user's command is in a comment only.
          std::istringstream lines(res->body);
          for (std::string line; std::getline(lines, line);)
            if (line.find("$(not)") != std::string::npos)
              EXPECT_EQ(line.rfind("#   command: ", 0), 0u) << line;
        }
        if (!mine && !user.empty()) {
          res = c.Delete("/experiments/" + id);
          ASSERT_TRUE(res) << user << ": " << httplib::to_string(res.error());
          EXPECT_TRUE(res->status == 403 || res->status == 404)
              << user << " DELETE " << id << ": " << res->status;
          res = c.Post("/experiments/" + id + "/resume", "", "application/json");
          ASSERT_TRUE(res) << user << ": " << httplib::to_string(res.error());
          EXPECT_TRUE(res->status == 403 || res->status == 404)
              << user << " resume " << id << ": " << res->status;
        }
        res = c.Get("/experiments?limit=100");
        ASSERT_TRUE(res) << user << ": " << httplib::to_string(res.error());
        if (user.empty()) {
          EXPECT_EQ(res->status, 401);
        } else {
          EXPECT_EQ(res->status, 200);
          json list = json::parse(res->body);
          for (const auto& e : list["experiments"])
            EXPECT_TRUE(user == "root" || e["owner"] == user) << user << " sees " << e["id"];
        }
        res = c.Post("/experiments?dry_run=true", SmallSpec("dry-" + user).dump(),
                     "application/json");
        ASSERT_TRUE(res) << user << ": " << httplib::to_string(res.error());
        EXPECT_EQ(res->status, user.empty() ? 401 : 200) << res->body;
        res = c.Post("/experiments", "{\"command\": [", "application/json");
        ASSERT_TRUE(res) << user << ": " << httplib::to_string(res.error());
        EXPECT_EQ(res->status, user.empty() ? 401 : 400);
        res = c.Get("/healthz");
        ASSERT_TRUE(res) << user << ": " << httplib::to_string(res.error());
        EXPECT_EQ(res->status, 200);
      }
    });
  }
  // alice cancels alice-c once some of its tasks have registered.
  threads.emplace_back([&] {
    ASSERT_TRUE(WaitFor([&] {
      auto tasks = store_->ListTasks("alice-c", 1);
      return tasks.ok() && std::any_of(tasks->begin(), tasks->end(), [](const TaskRecord& t) {
               return t.state != TaskState::kPending;
             });
    }));
    auto res = Client("alice").Delete("/experiments/alice-c");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200) << res->body;
  });

  // The agents: tasks 0-3 of each job over gRPC, 4-7 over HTTP.
  auto grpc_channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_->port()),
                                          grpc::InsecureChannelCredentials());
  std::map<std::pair<std::string, int>, AgentLog> logs;
  for (const auto& id : ids)
    for (int p = 0; p < kTasks; ++p) logs[{id, p}];
  std::vector<std::thread> agents;
  for (const auto& id : ids) {
    for (int p = 0; p < kTasks; ++p) {
      agents.emplace_back([&, id, p] {
        // An agent starts when its job runs.
        ASSERT_TRUE(WaitFor([&] {
          int64_t job = slurm_.JobOf(JobName(id, 1));
          return job && slurm_.StateOf(job) != JobState::kPending;
        }));
        AgentLog* log = &logs.at({id, p});
        if (p < 4)
          GrpcAgent(id, p, cancelled(id), log, grpc_channel);
        else
          HttpAgent(id, p, cancelled(id), log);
      });
    }
  }
  for (auto& t : agents) t.join();

  // The batch scripts end; every experiment closes.
  for (const auto& id : ids)
    if (!cancelled(id)) slurm_.SetState(slurm_.JobOf(JobName(id, 1)), JobState::kCompleted);
  EXPECT_TRUE(WaitFor([&] {
    for (const auto& id : ids) {
      auto v = experiments_->Get(id);
      if (!v.ok() || !IsTerminal(v->experiment.state) ||
          v->attempts.back().state != AttemptState::kEnded)
        return false;
    }
    return true;
  })) << "experiments or their jobs still open";
  users_done = true;
  for (auto& t : threads) t.join();

  auto root = Client("root");
  for (const auto& id : ids) {
    SCOPED_TRACE(id);
    auto res = root.Get("/experiments/" + id);
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    ASSERT_EQ(res->status, 200);
    json v = json::parse(res->body);
    EXPECT_EQ(v["owner"], owner(id));
    if (cancelled(id)) {
      EXPECT_EQ(v["state"], "cancelled");
      continue;
    }
    EXPECT_EQ(v["state"], "succeeded") << v["reason"];
    // Every task got its role; a re-sent assignment is the same one.
    std::map<std::string, std::set<int>> roles;
    for (int p = 0; p < kTasks; ++p) {
      const AgentLog& log = logs.at({id, p});
      ASSERT_FALSE(log.assignments.empty()) << "task " << p;
      const pb::Assignment& a = log.assignments[0];
      for (const auto& again : log.assignments)
        EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(again, a))
            << "task " << p << ": a different assignment";
      EXPECT_TRUE(roles[a.role()].insert(a.index()).second)
          << a.role() << ":" << a.index() << " twice";
      EXPECT_EQ(log.shutdown, a.role() != "worker") << "task " << p;
      EXPECT_EQ(a.command(2), "it's $(not) run");
    }
    EXPECT_EQ(roles["chief"].size(), 1u);
    EXPECT_EQ(roles["ps"].size(), 1u);
    EXPECT_EQ(roles["worker"].size(), 6u);
  }
  EXPECT_EQ(slurm_.With([](auto& f) { return f.submitted.size(); }), ids.size());

  // Users listed all along, and lists are cached until the store changes:
  // the lists now show the end states, not a body kept from the run.
  for (const std::string user : {"alice", "bob", "root"}) {
    SCOPED_TRACE(user);
    auto res = Client(user).Get("/experiments?limit=100");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    ASSERT_EQ(res->status, 200);
    std::map<std::string, std::string> listed;
    json list = json::parse(res->body);
    for (const auto& e : list["experiments"])
      listed[e["id"].get<std::string>()] = e["state"].get<std::string>();
    for (const auto& id : ids)
      if (user == "root" || owner(id) == user)
        EXPECT_EQ(listed[id], cancelled(id) ? "cancelled" : "succeeded") << id;
  }
  // A list asked again right after a write shows the write.
  auto res = root.Post("/experiments", SmallSpec("late").dump(), "application/json");
  ASSERT_TRUE(res && res->status == 201);
  res = root.Get("/experiments?limit=100");
  ASSERT_TRUE(res && res->status == 200);
  EXPECT_EQ(json::parse(res->body)["experiments"][0]["id"], "late");
}

// A node's relay asks for the TF cluster by digest (agent.proto,
// Register.cluster_by_digest): the real endpoint sends its bytes once per
// connection to the streams that ask, the digest alone to the connection's
// others, and the bytes to a stream that does not ask. Three connections:
// tasks 0-3 (a relay), 4-6 (another), 7 (an agent of its own).
TEST_F(ApiConcurrencyTest, TheClusterGoesOncePerConnectionToTheStreamsThatAskByDigest) {
  auto created =
      Client("alice").Post("/experiments", SmallSpec("alice-d").dump(), "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  ASSERT_TRUE(WaitFor([&] { return slurm_.JobOf(JobName("alice-d", 1)) != 0; }));
  slurm_.SetState(slurm_.JobOf(JobName("alice-d", 1)), JobState::kRunning);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a TCP connection per channel
  const std::string target = "127.0.0.1:" + std::to_string(grpc_->port());
  std::vector<std::unique_ptr<pb::AgentService::Stub>> stubs;
  for (int c = 0; c < 3; ++c)
    stubs.push_back(pb::AgentService::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args)));
  auto connection_of = [](int proc) { return proc < 4 ? 0 : proc < 7 ? 1 : 2; };
  std::vector<std::unique_ptr<Stream>> streams;
  for (int proc = 0; proc < kTasks; ++proc) {
    auto& stream = streams.emplace_back(OpenStream(*stubs[connection_of(proc)]));
    pb::AgentMessage m = Register("alice-d", proc);
    m.mutable_register_()->set_cluster_by_digest(connection_of(proc) < 2);
    ASSERT_TRUE(stream->rw->Write(m)) << "task " << proc;
  }
  std::map<int, int> whole;  // connection -> assignments that carried the bytes
  std::set<std::string> digests;
  std::string zlib;
  for (int proc = 0; proc < kTasks; ++proc) {
    Stream& stream = *streams[proc];
    ASSERT_TRUE(stream.rw->Read(&stream.reply)) << "task " << proc;
    ASSERT_TRUE(stream.reply.has_assignment()) << "task " << proc;
    const pb::Assignment& a = stream.reply.assignment();
    EXPECT_TRUE(a.tf_config().empty());
    EXPECT_FALSE(a.cluster_digest().empty()) << "task " << proc;
    digests.insert(a.cluster_digest());
    if (!a.cluster_zlib().empty()) {
      ++whole[connection_of(proc)];
      zlib = a.cluster_zlib();
    }
  }
  EXPECT_EQ(whole, (std::map<int, int>{{0, 1}, {1, 1}, {2, 1}}))
      << "the bytes once per connection that asks by digest, and to the one that does not";
  EXPECT_EQ(digests.size(), 1u) << "one cluster, one digest";
  std::optional<std::string> cluster = wire::InflateCluster(zlib);
  ASSERT_TRUE(cluster);
  auto parsed = json::parse(*cluster);
  EXPECT_EQ(parsed["worker"].size(), 6u) << *cluster;
  for (auto& stream : streams) stream->context.TryCancel();
  for (auto& stream : streams) stream->rw->Finish();
}

// A node's relay carries its tasks' streams as lanes of one ConnectNode
// stream (agent.proto): each lane means what a Connect stream means, the
// TF cluster's bytes come once per node stream and before any frame that
// names the cluster alone, a lane whose first message is no Register ends
// as INVALID_ARGUMENT without touching the others, the agent's `closed`
// is answered with the lane's end (the exit report's acknowledgment), a
// lane's frames after the service ended it are ignored until its `closed`,
// and lanes open in whatever order their numbers come. Two node streams,
// tasks 0-3 and 4-7, on one channel.
TEST_F(ApiConcurrencyTest, ANodeStreamCarriesItsTasksAsLanes) {
  auto created =
      Client("alice").Post("/experiments", SmallSpec("alice-n").dump(), "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  ASSERT_TRUE(WaitFor([&] { return slurm_.JobOf(JobName("alice-n", 1)) != 0; }));
  slurm_.SetState(slurm_.JobOf(JobName("alice-n", 1)), JobState::kRunning);
  auto stub = pb::AgentService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(grpc_->port()), grpc::InsecureChannelCredentials()));
  struct Node {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<pb::NodeUp, pb::NodeDown>> rw;
    std::vector<pb::ServiceFrame> frames;  // every frame read, in order
    // Reads until `done` holds for the frames read; false if the stream ended first.
    bool ReadUntil(const std::function<bool(const std::vector<pb::ServiceFrame>&)>& done) {
      pb::NodeDown down;
      while (!done(frames)) {
        if (!rw->Read(&down)) return false;
        for (auto& f : *down.mutable_frames()) frames.push_back(std::move(f));
      }
      return true;
    }
  };
  auto message_frame = [](uint64_t lane, pb::AgentMessage m) {
    pb::AgentFrame f;
    f.set_lane(lane);
    *f.mutable_message() = std::move(m);
    return f;
  };
  Node nodes[2];
  for (int n = 0; n < 2; ++n) {
    nodes[n].context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    nodes[n].rw = stub->ConnectNode(&nodes[n].context);
  }
  // Node 0: lane 1 speaks before registering; lanes 5, 4, 3, 2 are tasks
  // 0-3, in two writes. Node 1: lanes 10-13 are tasks 4-7, in one.
  pb::AgentMessage heartbeat;
  *heartbeat.mutable_task() = Ref("alice-n", 0);
  heartbeat.mutable_heartbeat();
  pb::NodeUp up;
  *up.add_frames() = message_frame(1, heartbeat);
  *up.add_frames() = message_frame(5, Register("alice-n", 0));
  ASSERT_TRUE(nodes[0].rw->Write(up));
  up.Clear();
  for (int proc = 1; proc < 4; ++proc)
    *up.add_frames() = message_frame(5 - proc, Register("alice-n", proc));
  ASSERT_TRUE(nodes[0].rw->Write(up));
  up.Clear();
  for (int proc = 4; proc < 8; ++proc)
    *up.add_frames() = message_frame(6 + proc, Register("alice-n", proc));
  ASSERT_TRUE(nodes[1].rw->Write(up));

  auto assignments = [](const std::vector<pb::ServiceFrame>& frames) {
    return std::count_if(frames.begin(), frames.end(), [](const pb::ServiceFrame& f) {
      return f.has_message() && f.message().has_assignment();
    });
  };
  std::map<uint64_t, pb::Assignment> by_lane;
  std::set<std::string> digests;
  std::string zlib;
  for (Node& node : nodes) {
    ASSERT_TRUE(node.ReadUntil([&](const auto& frames) { return assignments(frames) == 4; }));
    bool have_bytes = false;
    int whole = 0;
    for (const pb::ServiceFrame& f : node.frames) {
      if (!f.has_message()) continue;
      const pb::Assignment& a = f.message().assignment();
      ASSERT_TRUE(f.message().has_assignment()) << f.DebugString();
      EXPECT_TRUE(by_lane.emplace(f.lane(), a).second) << "lane " << f.lane() << " twice";
      digests.insert(a.cluster_digest());
      if (!a.cluster_zlib().empty()) {
        ++whole;
        have_bytes = true;
        zlib = a.cluster_zlib();
      }
      EXPECT_TRUE(have_bytes) << "lane " << f.lane() << " named the cluster before its bytes came";
    }
    EXPECT_EQ(whole, 1) << "the bytes once per node stream";
  }
  EXPECT_EQ(by_lane.size(), 8u);
  EXPECT_EQ(digests.size(), 1u);
  ASSERT_TRUE(wire::InflateCluster(zlib));
  const auto lane1_end = std::find_if(nodes[0].frames.begin(), nodes[0].frames.end(),
                                      [](const pb::ServiceFrame& f) { return f.lane() == 1; });
  ASSERT_NE(lane1_end, nodes[0].frames.end()) << "lane 1 was not ended";
  EXPECT_EQ(lane1_end->end().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(lane1_end->end().message(), "the first message must be register");

  // A lane speaks for the task it registered only: lane 5 (task 0) sending
  // task 1's heartbeat is refused on lane 5.
  pb::AgentMessage other;
  *other.mutable_task() = Ref("alice-n", 1);
  other.mutable_heartbeat();
  up.Clear();
  *up.add_frames() = message_frame(5, other);
  ASSERT_TRUE(nodes[0].rw->Write(up));
  auto refusal = [](const std::vector<pb::ServiceFrame>& frames) {
    return std::find_if(frames.begin(), frames.end(), [](const pb::ServiceFrame& f) {
      return f.has_message() && f.message().has_refused();
    });
  };
  ASSERT_TRUE(
      nodes[0].ReadUntil([&](const auto& frames) { return refusal(frames) != frames.end(); }));
  EXPECT_EQ(refusal(nodes[0].frames)->lane(), 5u);
  EXPECT_EQ(refusal(nodes[0].frames)->message().refused().reason(),
            "a stream speaks for one task only");

  // A worker of node 1 exits and closes its lane: the lane's end, OK.
  const auto worker = std::find_if(by_lane.begin(), by_lane.end(), [](const auto& entry) {
    return entry.first >= 10 && entry.second.role() == "worker";
  });
  ASSERT_NE(worker, by_lane.end());
  const uint64_t lane = worker->first;
  pb::AgentMessage exited;
  *exited.mutable_task() = Ref("alice-n", static_cast<int>(lane - 6));
  exited.mutable_exited()->set_exit_code(0);
  up.Clear();
  *up.add_frames() = message_frame(lane, exited);
  up.add_frames()->set_lane(lane);
  up.mutable_frames(1)->set_closed(true);
  ASSERT_TRUE(nodes[1].rw->Write(up));
  auto end_of = [](uint64_t lane) {
    return [lane](const std::vector<pb::ServiceFrame>& frames) {
      return std::any_of(frames.begin(), frames.end(), [lane](const pb::ServiceFrame& f) {
        return f.lane() == lane && f.has_end();
      });
    };
  };
  ASSERT_TRUE(nodes[1].ReadUntil(end_of(lane)));
  EXPECT_EQ(nodes[1].frames.back().end().code(), grpc::StatusCode::OK);

  // Lane 20 speaks out of turn and is ended; a Register on it before its
  // `closed` is ignored: nothing comes for it before the end of lane 21,
  // which speaks out of turn after it.
  up.Clear();
  *up.add_frames() = message_frame(20, heartbeat);
  ASSERT_TRUE(nodes[1].rw->Write(up));
  ASSERT_TRUE(nodes[1].ReadUntil(end_of(20)));
  up.Clear();
  *up.add_frames() = message_frame(20, Register("alice-n", static_cast<int>(lane - 6)));
  *up.add_frames() = message_frame(21, heartbeat);
  ASSERT_TRUE(nodes[1].rw->Write(up));
  const size_t before = nodes[1].frames.size();
  ASSERT_TRUE(nodes[1].ReadUntil(end_of(21)));
  for (size_t i = before; i < nodes[1].frames.size(); ++i)
    EXPECT_EQ(nodes[1].frames[i].lane(), 21u) << nodes[1].frames[i].DebugString();

  for (Node& node : nodes) {
    node.rw->WritesDone();
    node.ReadUntil([](const auto&) { return false; });
    grpc::Status status = node.rw->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
}

// A node stream holds at most 4,096 lanes: a stranger who opens lanes and
// never closes them (each refused, so kept until its `closed`) is bounded;
// the 4,097th ends at once as RESOURCE_EXHAUSTED.
TEST_F(ApiConcurrencyTest, ANodeStreamHoldsAtMost4096Lanes) {
  auto stub = pb::AgentService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(grpc_->port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto rw = stub->ConnectNode(&context);
  pb::NodeUp up;
  for (uint64_t lane = 1; lane <= 4097; ++lane) {
    pb::AgentFrame* frame = up.add_frames();
    frame->set_lane(lane);
    pb::AgentMessage* m = frame->mutable_message();
    m->mutable_task()->set_experiment_id("nobody-" + std::to_string(lane));
    m->mutable_task()->set_attempt(1);
    m->mutable_task()->set_secret("guess");
    m->mutable_register_()->set_node_name("node1");
  }
  ASSERT_TRUE(rw->Write(up));
  pb::NodeDown down;
  std::map<uint64_t, std::vector<pb::ServiceFrame>> by_lane;
  while (by_lane[4097].empty() && rw->Read(&down))
    for (auto& f : *down.mutable_frames()) by_lane[f.lane()].push_back(std::move(f));
  ASSERT_EQ(by_lane[4097].size(), 1u);
  EXPECT_EQ(by_lane[4097][0].end().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(by_lane[4097][0].end().message(),
            "this node stream has 4096 lanes open, the most it may");
  ASSERT_FALSE(by_lane[1].empty());
  EXPECT_TRUE(by_lane[1][0].message().has_refused()) << by_lane[1][0].DebugString();
  context.TryCancel();
  rw->Finish();
}

// The node's relay (agent/relay/) in front of the real endpoint: its
// agents' streams go as lanes of one node stream, each Assignment reaches
// its agent whole (the relay fills in the cluster the node stream carried
// once), and an exit report is acknowledged through the lane's end.
TEST_F(ApiConcurrencyTest, TheNodesRelayCarriesItsAgentsAsLanesOfOneStream) {
  auto created =
      Client("alice").Post("/experiments", SmallSpec("alice-r").dump(), "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  ASSERT_TRUE(WaitFor([&] { return slurm_.JobOf(JobName("alice-r", 1)) != 0; }));
  slurm_.SetState(slurm_.JobOf(JobName("alice-r", 1)), JobState::kRunning);
  agent::NodeRelayOptions options;
  options.socket_path = (dir_.path() / "relay.sock").string();
  options.service = "127.0.0.1:" + std::to_string(grpc_->port());
  options.keepalive_time = std::chrono::milliseconds(0);
  auto relay = agent::StartNodeRelay(options);
  ASSERT_TRUE(relay.ok()) << relay.status().message();
  std::thread serving([&] { (*relay)->ServeUntilIdle(); });
  struct StopRelay {
    agent::NodeRelay& relay;
    std::thread& serving;
    ~StopRelay() {
      relay.Shutdown();
      serving.join();
    }
  } stop_relay{**relay, serving};
  auto stub = pb::AgentService::NewStub(
      grpc::CreateChannel("unix:" + options.socket_path, grpc::InsecureChannelCredentials()));
  std::vector<std::unique_ptr<Stream>> streams;
  for (int proc = 0; proc < kTasks; ++proc) {
    auto& stream = streams.emplace_back(OpenStream(*stub));
    ASSERT_TRUE(stream->rw->Write(Register("alice-r", proc))) << "task " << proc;
  }
  std::optional<int> worker;
  for (int proc = 0; proc < kTasks; ++proc) {
    Stream& stream = *streams[proc];
    if (!stream.rw->Read(&stream.reply)) {
      const grpc::Status status = stream.rw->Finish();
      FAIL() << "task " << proc << ": the stream ended: " << status.error_code() << " "
             << status.error_message();
    }
    ASSERT_TRUE(stream.reply.has_assignment())
        << "task " << proc << ": " << stream.reply.DebugString();
    const pb::Assignment& a = stream.reply.assignment();
    std::optional<std::string> cluster = wire::InflateCluster(a.cluster_zlib());
    ASSERT_TRUE(cluster) << "task " << proc << ": the relay did not fill the cluster in";
    EXPECT_EQ(json::parse(*cluster)["worker"].size(), 6u);
    if (a.role() == "worker") worker = proc;
  }
  EXPECT_EQ((*relay)->node_streams_opened(), 1);
  ASSERT_TRUE(worker);
  // A message the relay's socket takes but that would push the node's
  // stream over tfslurmd's 4 MiB ends its own lane, not the node's others
  // (the worker's exit below still goes through).
  const int big = *worker == 0 ? 1 : 0;
  pb::AgentMessage progress;
  *progress.mutable_task() = Ref("alice-r", big);
  progress.mutable_progress()->set_checkpoint_step(1);
  // 4 MiB less 4 bytes: the relay's socket takes it (at most 4 MiB), but
  // framed in a NodeUp it would be over tfslurmd's 4 MiB.
  std::string& path = *progress.mutable_progress()->mutable_checkpoint_path();
  for (path = std::string((4 << 20) - 200, 'x'); progress.ByteSizeLong() < (4u << 20) - 4;)
    path.push_back('x');
  ASSERT_EQ(progress.ByteSizeLong(), (4u << 20) - 4);
  ASSERT_TRUE(streams[big]->rw->Write(progress));
  EXPECT_FALSE(streams[big]->rw->Read(&streams[big]->reply));
  const grpc::Status too_big = streams[big]->rw->Finish();
  EXPECT_EQ(too_big.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << too_big.error_message();
  EXPECT_NE(too_big.error_message().find("over the 4 MiB tfslurmd takes"), std::string::npos)
      << too_big.error_message();
  Stream& exiting = *streams[*worker];
  pb::AgentMessage exited;
  *exited.mutable_task() = Ref("alice-r", *worker);
  exited.mutable_exited()->set_exit_code(0);
  ASSERT_TRUE(exiting.rw->Write(exited));
  exiting.rw->WritesDone();
  EXPECT_FALSE(exiting.rw->Read(&exiting.reply)) << exiting.reply.DebugString();
  grpc::Status acknowledged = exiting.rw->Finish();
  EXPECT_TRUE(acknowledged.ok()) << acknowledged.error_message();
  for (int proc = 0; proc < kTasks; ++proc) {
    if (proc == *worker || proc == big) continue;
    streams[proc]->context.TryCancel();
    streams[proc]->rw->Finish();
  }
}

// The endpoint's record of what each connection has been sent: by gRPC's
// peer, which names a TCP connection by its address and port; a Unix
// socket's peer names none, so its streams share nothing.
TEST(ConnectionClustersTest, AConnectionIsSentEachClusterOnceAndForgottenWithItsLastStream) {
  agentrpc::ConnectionClusters connections;
  auto first = connections.Join("ipv4:10.0.0.1:40000");
  auto second = connections.Join("ipv4:10.0.0.1:40000");
  auto other = connections.Join("ipv6:[fd00::1]:40000");
  EXPECT_TRUE(first->FirstSend("a"));
  EXPECT_FALSE(second->FirstSend("a")) << "the same connection";
  EXPECT_TRUE(other->FirstSend("a")) << "another connection";
  EXPECT_TRUE(second->FirstSend("b")) << "another cluster (the next attempt's)";
  for (const char* digest : {"c", "d", "e"}) EXPECT_TRUE(first->FirstSend(digest));
  EXPECT_TRUE(first->FirstSend("a")) << "remembered no longer: the last 4 only";
  auto unix_a = connections.Join("unix:/run/tfslurm.sock");
  auto unix_b = connections.Join("unix:/run/tfslurm.sock");
  EXPECT_TRUE(unix_a->FirstSend("a"));
  EXPECT_TRUE(unix_b->FirstSend("a")) << "a Unix socket's streams share nothing";
  EXPECT_EQ(connections.size(), 2u);
  first.reset();
  second.reset();
  EXPECT_EQ(connections.size(), 1u) << "gone with its last stream";
  EXPECT_TRUE(connections.Join("ipv4:10.0.0.1:40000")->FirstSend("a"))
      << "a new connection from the same port starts afresh";
}
}  // namespace
}  // namespace tfslurm::concurrency
