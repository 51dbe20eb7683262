// The tfslurm REST client: one method per call of the service's API
// (service/api/http_api.h and logs_api.h). tfctl is built on it.
//
// Every method returns a Result: the value, or an Error with the service's
// message and field list, or, when the service cannot be reached, a message
// that names the URL tried and where it came from. Not thread-safe: use one
// Client per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/connection.h"
#include "client/experiment_types.h"
#include "client/result.h"

namespace httplib {
class Client;
}

namespace tfslurm::client {

struct ListQuery {
  std::vector<std::string> states;  // empty: all
  int limit = 50;
};

struct LogQuery {
  std::string experiment_id;
  std::string task;               // ROLE:INDEX; empty: the batch script's output
  std::optional<int> attempt;     // empty: the current attempt
  std::optional<int> tail;        // only the last N lines
  std::optional<int64_t> offset;  // start at this byte (a follower going on)
  bool follow = false;
};

class Client {
 public:
  explicit Client(Connection connection);
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;

  const Connection& connection() const { return connection_; }

  Result<Experiment> Submit(const nlohmann::json& spec);
  // Validates and renders without storing or submitting anything.
  Result<DryRun> SubmitDryRun(const nlohmann::json& spec);
  Result<Experiment> GetExperiment(const std::string& id);
  Result<ExperimentList> ListExperiments(const ListQuery& query);
  Result<Experiment> CancelExperiment(const std::string& id);
  // Starts a new attempt from the experiment's latest checkpoint.
  Result<Experiment> ResumeExperiment(const std::string& id);

  // Streams log bytes to `sink` as they arrive. Returns the offset just
  // after the last byte received; a follow request ends when the attempt
  // ends or after the service's follow window, and the caller goes on from
  // that offset while the attempt runs.
  Result<int64_t> ReadLogs(const LogQuery& query,
                           const std::function<void(std::string_view)>& sink);

 private:
  enum class Method { kGet, kPost, kDelete };
  // One JSON request; `body` only for kPost (nullptr: an empty body).
  Result<nlohmann::json> Call(Method method, const std::string& path, const nlohmann::json* body);

  Connection connection_;
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace tfslurm::client
