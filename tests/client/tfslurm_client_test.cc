#include "client/tfslurm_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <sstream>
#include <thread>

#include "client/tfctl/wait.h"

namespace tfslurm::client {
namespace {

// An in-process stand-in for tfslurmd on a free port, with canned answers.
class FakeService {
 public:
  // port 0: any free port. `routes` are set before the server listens.
  explicit FakeService(int port = 0, const std::function<void(httplib::Server&)>& routes = {}) {
    if (routes) routes(server_);
    port_ = port == 0 ? server_.bind_to_any_port("127.0.0.1")
                      : (server_.bind_to_port("127.0.0.1", port) ? port : -1);
    // Bound means listening: a request made before the thread accepts waits.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeService() {
    server_.stop();
    thread_.join();
  }
  httplib::Server& server() { return server_; }
  Connection connection(const std::string& token = "") const {
    return {"http://127.0.0.1:" + std::to_string(port_), token, "--url"};
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

// A port nothing listens on: the kernel picks a free one, which is released
// again without ever listening, so connecting to it is refused at once.
int UnusedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof addr;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(ClientTest, CarriesTheServicesMessageAndFields) {
  FakeService fake;
  fake.server().Post("/experiments", [](const httplib::Request&, httplib::Response& res) {
    res.status = 400;
    res.set_content(R"({"error": {"code": "invalid_argument",
      "message": "the experiment spec has 2 invalid fields",
      "fields": [{"field": "cluster.worker", "reason": "must be from 0 to 4096, got -1"},
                 {"field": "command", "reason": "is required"}],
      "retryable": false}})",
                    "application/json");
  });
  Client client(fake.connection());
  auto r = client.Submit({{"cluster", {{"worker", -1}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(client.last_error_http_status(), 400);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(r.status().retryable());
  EXPECT_EQ(r.status().message(), "the experiment spec has 2 invalid fields");
  EXPECT_EQ(r.status().fields(),
            (std::vector<FieldError>{{"cluster.worker", "must be from 0 to 4096, got -1"},
                                     {"command", "is required"}}));
}

TEST(ClientTest, SendsTheTokenAsBearerOnlyWhenOneIsConfigured) {
  FakeService fake;
  std::string seen;
  bool had_header = false;
  fake.server().Get("/experiments/x", [&](const httplib::Request& req, httplib::Response& res) {
    had_header = req.has_header("Authorization");
    seen = req.get_header_value("Authorization");
    res.set_content(R"({"id": "x", "state": "running", "checkpoint": null, "slurm_job_id": null})",
                    "application/json");
  });
  auto with = Client(fake.connection("s3cret")).GetExperiment("x");
  ASSERT_TRUE(with.ok()) << with.status().message();
  EXPECT_EQ(seen, "Bearer s3cret");
  EXPECT_EQ(with->state, "running");

  auto without = Client(fake.connection()).GetExperiment("x");
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(had_header);
}

TEST(ClientTest, UnreachableServiceNamesTheUrlAndWhereItCameFrom) {
  std::string url = "http://127.0.0.1:" + std::to_string(UnusedPort());
  Client client(Connection{url, "", "TFSLURM_URL"});
  auto r = client.ListExperiments({});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(client.last_error_http_status(), 0);
  // No answer at all: Unavailable, like a dependency the service cannot reach.
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("cannot reach tfslurmd at " + url + " (from TFSLURM_URL)"),
            std::string::npos)
      << r.status().message();
}

TEST(ClientTest, AnAnswerThatIsNotTheServicesSaysSo) {
  FakeService fake;
  fake.server().Get("/experiments", [](const httplib::Request&, httplib::Response& res) {
    res.status = 502;
    res.set_content("<html>Bad Gateway</html>", "text/html");
  });
  Client client(fake.connection());
  auto r = client.ListExperiments({});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(client.last_error_http_status(), 502);
  EXPECT_EQ(r.status().code(), StatusCode::kUnknown);
  EXPECT_FALSE(r.status().retryable());
  EXPECT_NE(r.status().message().find("answered HTTP 502"), std::string::npos);
}

TEST(ClientTest, TheServicesUnavailableIsRetryableAndKeepsItsHttpStatus) {
  FakeService fake;
  fake.server().Post("/experiments/a/resume", [](const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    res.set_content(R"({"error": {"code": "unavailable", "message": "the Slurm job is finishing",
                        "fields": [], "retryable": true}})",
                    "application/json");
  });
  Client client(fake.connection());
  auto r = client.ResumeExperiment("a");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(r.status().retryable());
  EXPECT_EQ(client.last_error_http_status(), 503);
  EXPECT_EQ(r.status().message(), "the Slurm job is finishing");
}

TEST(ClientTest, A401IsUnauthenticatedWhoeverSentIt) {
  FakeService fake;
  fake.server().Get("/experiments/tfslurmd", [](const httplib::Request&, httplib::Response& res) {
    res.status = 401;
    res.set_content(R"({"error": {"code": "unauthenticated", "message": "unknown token",
                        "fields": [], "retryable": false}})",
                    "application/json");
  });
  fake.server().Get("/experiments/proxy", [](const httplib::Request&, httplib::Response& res) {
    res.status = 401;
    res.set_content("<html>Authorization Required</html>", "text/html");
  });
  Client client(fake.connection());
  auto service = client.GetExperiment("tfslurmd");
  ASSERT_FALSE(service.ok());
  EXPECT_EQ(service.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(service.status().message(), "unknown token");
  auto proxy = client.GetExperiment("proxy");
  ASSERT_FALSE(proxy.ok());
  EXPECT_EQ(proxy.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(client.last_error_http_status(), 401);
  EXPECT_NE(proxy.status().message().find("answered HTTP 401"), std::string::npos);
}

TEST(ClientTest, UnknownOrMissingCodesAreUnknownAndNotRetryable) {
  FakeService fake;
  fake.server().Get(
      R"(/experiments/(.*))", [](const httplib::Request& req, httplib::Response& res) {
        res.status = 503;
        std::string code = req.matches[1];
        res.set_content(code == "none" ? R"({"error": {"message": "m", "retryable": true}})"
                                       : R"({"error": {"code": ")" + code +
                                             R"(", "message": "m", "retryable": true}})",
                        "application/json");
      });
  Client client(fake.connection());
  for (const char* code : {"none", "ok", "brand_new_code"}) {
    auto r = client.GetExperiment(code);
    ASSERT_FALSE(r.ok()) << code;
    EXPECT_EQ(r.status().code(), StatusCode::kUnknown) << code;
    EXPECT_FALSE(r.status().retryable()) << code;
    EXPECT_EQ(r.status().message(), "m") << code;
  }
}

TEST(ClientTest, LastErrorHttpStatusIsResetByEveryCall) {
  FakeService fake;
  fake.server().Get("/experiments/bad", [](const httplib::Request&, httplib::Response& res) {
    res.status = 404;
    res.set_content(R"({"error": {"code": "not_found", "message": "no experiment bad"}})",
                    "application/json");
  });
  fake.server().Get("/experiments/good", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"id": "good", "state": "running"})", "application/json");
  });
  fake.server().Get("/experiments/garbled", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("not json", "text/plain");
  });
  Client client(fake.connection());
  ASSERT_FALSE(client.GetExperiment("bad").ok());
  EXPECT_EQ(client.last_error_http_status(), 404);
  ASSERT_TRUE(client.GetExperiment("good").ok());
  EXPECT_EQ(client.last_error_http_status(), 0);
  ASSERT_FALSE(client.GetExperiment("bad").ok());
  auto garbled = client.GetExperiment("garbled");
  ASSERT_FALSE(garbled.ok());
  EXPECT_EQ(client.last_error_http_status(), 0);
  EXPECT_NE(garbled.status().message().find("without a JSON body"), std::string::npos);
}

// tfctl's --wait: an error answer, even a retryable one, ends the wait at
// once; no answer is ridden out (the service may be restarting).
TEST(WaitUntilFinishedTest, AnErrorAnswerEndsTheWaitAtOnce) {
  FakeService fake;
  fake.server().Get("/experiments/a", [](const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    res.set_content(R"({"error": {"code": "unavailable", "message": "the store is unavailable",
                        "fields": [], "retryable": true}})",
                    "application/json");
  });
  Client client(fake.connection());
  auto start = std::chrono::steady_clock::now();
  auto r = tfctl::WaitUntilFinished(client, "a", 0, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "the store is unavailable");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(WaitUntilFinishedTest, RidesOutAServiceThatDoesNotAnswerYet) {
  int port = UnusedPort();
  Client client(Connection{"http://127.0.0.1:" + std::to_string(port), "", "--url"});
  std::unique_ptr<FakeService> late;
  std::thread starter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    late = std::make_unique<FakeService>(port, [](httplib::Server& server) {
      server.Get("/experiments/a", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(R"({"id": "a", "state": "succeeded", "events": [
                            {"id": 1, "attempt": 1, "what": "ended", "why": "done"}]})",
                        "application/json");
      });
    });
  });
  std::ostringstream events;
  auto r = tfctl::WaitUntilFinished(client, "a", 0, &events);
  starter.join();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->state, "succeeded");
  EXPECT_NE(events.str().find("ended: done"), std::string::npos) << events.str();
}

TEST(ClientTest, ListSendsStatesAndLimit) {
  FakeService fake;
  std::string state, limit;
  fake.server().Get("/experiments", [&](const httplib::Request& req, httplib::Response& res) {
    state = req.get_param_value("state");
    limit = req.get_param_value("limit");
    res.set_content(R"({"experiments": [{"id": "a", "state": "running",
                        "task_counts": {"worker": {"total": 2, "running": 1}}}], "total": 7})",
                    "application/json");
  });
  auto r = Client(fake.connection()).ListExperiments({{"running", "queued"}, 10});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(state, "running,queued");
  EXPECT_EQ(limit, "10");
  ASSERT_EQ(r->experiments.size(), 1u);
  EXPECT_EQ(r->experiments[0].task_counts.at("worker").running, 1);
  EXPECT_EQ(r->total, 7);
}

TEST(ClientTest, PathAndQueryValuesAreEncoded) {
  FakeService fake;
  std::string task;
  fake.server().Get("/experiments/a/logs",
                    [&](const httplib::Request& req, httplib::Response& res) {
                      task = req.get_param_value("task");
                      res.set_content("", "text/plain");
                    });
  fake.server().Get(
      R"(/experiments/(.*))", [&](const httplib::Request& req, httplib::Response& res) {
        res.status = 404;
        res.set_content(
            R"({"error": {"code": "not_found", "message": "raw path )" + req.target + R"("}})",
            "application/json");
      });
  Client client(fake.connection());
  auto get = client.GetExperiment("../x?y");
  ASSERT_FALSE(get.ok());
  EXPECT_EQ(get.status().message(), "raw path /experiments/..%2Fx%3Fy");

  LogQuery query;
  query.experiment_id = "a";
  query.task = "../../etc/passwd&attempt=1";
  auto logs = client.ReadLogs(query, [](std::string_view) {});
  ASSERT_TRUE(logs.ok()) << logs.status().message();
  EXPECT_EQ(task, "../../etc/passwd&attempt=1");
}

TEST(ClientTest, ReadLogsStreamsAndReturnsTheEndOffset) {
  FakeService fake;
  fake.server().Get("/experiments/a/logs", [](const httplib::Request& req, httplib::Response& res) {
    EXPECT_EQ(req.get_param_value("tail"), "2");
    res.set_header("X-Tfslurm-Log-Offset", "100");
    res.set_chunked_content_provider("text/plain", [](size_t, httplib::DataSink& sink) {
      sink.write("line 1\n", 7);
      sink.write("line 2\n", 7);
      sink.done();
      return true;
    });
  });
  std::string received;
  LogQuery query;
  query.experiment_id = "a";
  query.tail = 2;
  auto end = Client(fake.connection()).ReadLogs(query, [&](std::string_view d) { received += d; });
  ASSERT_TRUE(end.ok()) << end.status().message();
  EXPECT_EQ(received, "line 1\nline 2\n");
  EXPECT_EQ(*end, 114);
}

TEST(ClientTest, ReadLogsErrorsCarryTheServicesMessage) {
  FakeService fake;
  fake.server().Get("/experiments/a/logs", [](const httplib::Request&, httplib::Response& res) {
    res.status = 400;
    res.set_content(R"({"error": {"code": "invalid_argument", "message": "task must be ROLE:INDEX",
                        "fields": [{"field": "task", "reason": "must be ROLE:INDEX"}]}})",
                    "application/json");
  });
  std::string received;
  LogQuery query;
  query.experiment_id = "a";
  query.task = "bad";
  auto end = Client(fake.connection()).ReadLogs(query, [&](std::string_view d) { received += d; });
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().message(), "task must be ROLE:INDEX");
  EXPECT_EQ(end.status().fields().at(0).field, "task");
  EXPECT_EQ(received, "");
}

}  // namespace
}  // namespace tfslurm::client
