// The tfslurm REST client: one method per call of the service's API
// (service/api/http_api.h and logs_api.h). tfctl is built on it.
//
// Every method returns a StatusOr: the value, or a Status with the service's
// error code (base/status.h), message and field list; or, when the service
// cannot be reached, an Unavailable status whose message names the URL tried
// and where it came from. A missing or unknown error code, and an answer
// that is not tfslurmd's error format (its HTTP status is in the message),
// are kUnknown, except that any 401 is kUnauthenticated (so tfctl can say how
// the token is given). retryable() follows from the code, as the service
// sets `retryable` exactly for unavailable.
//
// Identity: the connection's token as `Authorization: Bearer`; with no
// token, a fresh MUNGE credential per request (`Authorization: MUNGE`,
// made by the local munged, so it proves this process's uid), whose payload
// binds it to the request: "tfslurm/1 METHOD PATH", the path without its
// query (service/api/munge_auth.h makes the same string). When munged cannot
// make one, the request goes without, and a 401 that asks for MUNGE says why.
//
// Thread safety: none; use one Client per thread (last_error_http_status()
// describes the Client's last call).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "client/connection.h"
#include "client/experiment_types.h"

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

struct CreatedToken {
  std::string token;  // shown once; the service keeps only its hash
  std::string user;
  bool admin = false;
};

class Client {
 public:
  explicit Client(Connection connection);
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;

  const Connection& connection() const { return connection_; }

  StatusOr<Experiment> Submit(const nlohmann::json& spec);
  // Validates and renders without storing or submitting anything.
  StatusOr<DryRun> SubmitDryRun(const nlohmann::json& spec);
  StatusOr<Experiment> GetExperiment(const std::string& id);
  StatusOr<ExperimentList> ListExperiments(const ListQuery& query);
  StatusOr<Experiment> CancelExperiment(const std::string& id);
  // Starts a new attempt from the experiment's latest checkpoint. `changes`
  // (null: none): the spec fields to change, as a merge patch on the spec
  // (POST /experiments/{id}/resume, schema/openapi.yaml).
  StatusOr<Experiment> ResumeExperiment(const std::string& id,
                                        const nlohmann::json& changes = nullptr);

  // Removes an ended experiment from the service (POST /experiments/{id}/
  // delete), and with `files` its directory; answers the service's JSON.
  StatusOr<nlohmann::json> DeleteExperiment(const std::string& id, bool files);

  // Sweeps (schema/openapi.yaml, Sweep and SweepSummary), as the service's
  // JSON: POST /sweeps, GET /sweeps, GET /sweeps/{id}, POST /sweeps/{id}/cancel.
  StatusOr<nlohmann::json> SubmitSweep(const nlohmann::json& spec);
  StatusOr<nlohmann::json> ListSweeps();
  StatusOr<nlohmann::json> GetSweep(const std::string& id);
  StatusOr<nlohmann::json> CancelSweep(const std::string& id);
  // POST /sweeps/{id}/delete[?files=true]: an ended sweep and its trials'
  // experiments removed.
  StatusOr<nlohmann::json> DeleteSweep(const std::string& id, bool files);

  // The experiment's training scalars; only `tags` when not empty.
  StatusOr<TrainingMetrics> GetTrainingMetrics(const std::string& id,
                                               const std::vector<std::string>& tags = {});

  // Streams log bytes to `sink` as they arrive. Returns the offset just
  // after the last byte received; a follow request ends when the attempt
  // ends or after the service's follow window, and the caller goes on from
  // that offset while the attempt runs.
  // POST /tokens: a new token for `user` (empty: the caller). Only an admin
  // may name another user or ask for an admin token.
  StatusOr<CreatedToken> CreateToken(const std::string& user, bool admin);

  StatusOr<int64_t> ReadLogs(const LogQuery& query,
                             const std::function<void(std::string_view)>& sink);

  // The HTTP status (4xx, 5xx) of the error answer that made the last call
  // fail; 0 when the last call succeeded or failed without such an answer:
  // the service could not be reached, a log stream broke, or a 2xx answer
  // was not what tfslurmd sends. This tells "the service answered
  // unavailable" (503, retry the request) from "no answer" (Unavailable too,
  // the service may be restarting), which the status code alone does not.
  int last_error_http_status() const { return last_error_http_status_; }

 private:
  enum class Method { kGet, kPost, kDelete };
  // One JSON request; `body` only for kPost (nullptr: an empty body).
  StatusOr<nlohmann::json> Call(Method method, const std::string& path, const nlohmann::json* body);
  // The Authorization header's value for `method` `path` when there is no
  // token (the token is set on http_ once): "MUNGE <credential>", or empty,
  // with munge_error_ saying why.
  std::string MungeAuthorization(std::string_view method, const std::string& path);
  // A 401's status, with why no MUNGE credential was sent, if that is why.
  Status WithMungeError(Status status) const;
  // A 401's status, with which token was sent and where it came from.
  Status WithTokenOrigin(Status status) const;

  Connection connection_;
  std::unique_ptr<httplib::Client> http_;
  int last_error_http_status_ = 0;
  std::string munge_error_;  // why the last request carried no MUNGE credential
};

}  // namespace tfslurm::client
