#include "client/tfslurm_client.h"

#include <httplib.h>
#include <munge.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/unsafe_text.h"
#include "client/terminal_text.h"
#include "tls/probe.h"

namespace tfslurm::client {
namespace {

using nlohmann::json;

// Requests other than log follows get an answer within this; a submission
// waits for slurmctld, which can be slow on a busy cluster.
constexpr int kReadTimeoutS = 60;
// Longer than the service's follow window, in which it either sends output
// or ends the response.
constexpr int kFollowReadTimeoutS = 300;
constexpr const char* kLogOffsetHeader = "X-Tfslurm-Log-Offset";

// Percent-encodes everything but RFC 3986's unreserved characters, so that a
// value can never change the shape of the path or query it is put in.
std::string Encode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string ExperimentPath(const std::string& id) { return "/experiments/" + Encode(id); }

// The first string of `value` (a key or a value) that is not UTF-8, named by
// its field ("command[1]", "env.LR"), or OK. JSON text is UTF-8, and
// nlohmann's dump throws on anything else (type_error 316): what a user gave
// from a file, a flag or a directory name is checked here instead, so that
// the answer names the field and shows the bytes escaped.
Status CheckUtf8(const json& value, const std::string& field) {
  auto refuse = [&](const std::string& text, const std::string& what) {
    const std::string where = field.empty() ? "the request" : field;
    const size_t at = FirstInvalidUtf8(text).value_or(0);
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X",
                  static_cast<unsigned>(static_cast<uint8_t>(text[at])));
    return InvalidArgument(where + (what.empty() ? "" : " " + what) + " is not valid UTF-8 (byte " +
                               byte + " at offset " + std::to_string(at) + "): '" +
                               EscapeForTerminal(text) + "'; only UTF-8 text can be sent",
                           {{where, "must be UTF-8 text, got '" + EscapeForTerminal(text) + "'"}});
  };
  auto invalid = [](const std::string& text) { return FirstInvalidUtf8(text).has_value(); };
  if (value.is_string()) {
    if (invalid(value.get_ref<const std::string&>()))
      return refuse(value.get_ref<const std::string&>(), "");
  } else if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      if (invalid(key)) return refuse(key, "has a key that");
      if (Status s = CheckUtf8(item, field.empty() ? key : field + "." + key); !s.ok()) return s;
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i)
      if (Status s = CheckUtf8(value[i], field + "[" + std::to_string(i) + "]"); !s.ok()) return s;
  }
  return Status::Ok();
}

// httplib names its errors in one word ("Connection"); say what happened.
std::string Describe(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
      return "could not connect (connection refused, or no route to the host)";
    case httplib::Error::ConnectionTimeout:
      return "timed out while connecting";
    case httplib::Error::Read:
      return "no complete answer (the connection broke or timed out)";
    case httplib::Error::Write:
      return "could not send the request";
    default:
      return httplib::to_string(error);
  }
}

// An https:// service that did not pass verification, or spoke no TLS:
// one handshake of our own says exactly why (tls/probe.h), with what the
// certificate was checked against.
Status TlsFailure(const Connection& c) {
  tls::ProbeOptions probe;
  std::string target = c.url.substr(c.url.find("://") + 3);
  if (!tls::SplitTarget(target, &probe.host, &probe.port)) {
    probe.host = target;
    probe.port = 443;
  }
  if (!c.cacert.empty()) {
    std::ifstream in(c.cacert);
    std::stringstream pem;
    pem << in.rdbuf();
    probe.ca_pem = pem.str();
  }
  tls::ProbeResult r = tls::ProbeTls(probe);
  const std::string against = c.cacert.empty()
                                  ? "this machine's trust store"
                                  : "the CA file " + c.cacert + " (from " + c.cacert_origin + ")";
  switch (r.kind) {
    case tls::ProbeResult::Kind::kUnverified:
      return Error("cannot verify tfslurmd at " + c.url + ": " + r.reason +
                   ". Its certificate was checked against " + against +
                   "; give the service's CA with --cacert or TFSLURM_CACERT, or run `tfctl "
                   "login` to see its fingerprint and pin it");
    case tls::ProbeResult::Kind::kNotTls:
      return Error("tfslurmd at " + c.url + " did not answer in TLS (" + r.reason +
                   "); if it serves plaintext, its URL is http://");
    case tls::ProbeResult::Kind::kVerified:
    case tls::ProbeResult::Kind::kUnreachable:
      break;
  }
  return Unavailable("cannot reach tfslurmd at " + c.url + ": the TLS connection failed" +
                     (r.reason.empty() ? "" : " (" + r.reason + ")"));
}

// No answer at all: Unavailable, as the service itself reports a dependency
// it cannot reach.
Status Unreachable(const Connection& c, httplib::Error error) {
  if (error == httplib::Error::SSLConnection || error == httplib::Error::SSLServerVerification ||
      error == httplib::Error::SSLServerHostnameVerification ||
      error == httplib::Error::SSLLoadingCerts)
    return TlsFailure(c);
  std::string origin = c.url_origin == "default" ? "the default" : "from " + c.url_origin;
  return Unavailable("cannot reach tfslurmd at " + c.url + " (" + origin + "): " + Describe(error) +
                     ". Is the service running there? Set the URL with --url, TFSLURM_URL or "
                     "`url = ...` in ~/.config/tfslurm/config.");
}

// The service's error body ({"error": {code, message, fields, retryable}}),
// or, for anything else that answers, its status and the start of the body.
// The code is the body's (retryable follows from it: the service sets
// `retryable` exactly for unavailable); a missing or unknown code is
// kUnknown. An answer in another format is kUnknown too, except a 401, which
// is kUnauthenticated whoever sent it.
Status ServiceError(int status, const std::string& body, const std::string& url) {
  StatusCode fallback = status == 401 ? StatusCode::kUnauthenticated : StatusCode::kUnknown;
  json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const json& e = j["error"];
    StatusCode code = ParseStatusCode(e.value("code", ""));
    if (code == StatusCode::kOk || code == StatusCode::kUnknown) code = fallback;
    std::vector<FieldError> fields;
    for (const json& f : e.value("fields", json::array()))
      fields.push_back({f.value("field", ""), f.value("reason", "")});
    return Status(code, e.value("message", "HTTP " + std::to_string(status)), std::move(fields));
  }
  std::string excerpt = body.substr(0, 200);
  return Status(fallback, url + " answered HTTP " + std::to_string(status) +
                              ", which is not tfslurmd's error format" +
                              (excerpt.empty() ? "" : ": " + excerpt));
}

// "tfslurm/1 METHOD PATH" (service/api/munge_auth.h's MungeRequestPayload).
std::string MungePayload(std::string_view method, const std::string& path) {
  return "tfslurm/1 " + std::string(method) + " " + path.substr(0, path.find('?'));
}

template <typename T>
StatusOr<T> Convert(StatusOr<json> body, T (*from_json)(const json&), const std::string& url) {
  if (!body.ok()) return body.status();
  try {
    return from_json(*body);
  } catch (const json::exception& e) {
    return Error(url + " answered with JSON of an unexpected shape: " + e.what());
  }
}

}  // namespace

Client::Client(Connection connection)
    : connection_(std::move(connection)),
      http_(std::make_unique<httplib::Client>(connection_.url)) {
  if (connection_.url.rfind("https://", 0) == 0) {
    // Verified against --cacert (else the system's store) and the URL's
    // host, as cpp-httplib does by default. A partial chain may be the
    // anchor: `tfctl login` pins the certificate the service presents.
    if (!connection_.cacert.empty()) http_->set_ca_cert_path(connection_.cacert);
    http_->enable_server_certificate_verification(true);
    X509_STORE_set_flags(SSL_CTX_get_cert_store(static_cast<SSL_CTX*>(http_->tls_context())),
                         X509_V_FLAG_PARTIAL_CHAIN);
  }
  http_->set_connection_timeout(5);
  http_->set_read_timeout(kReadTimeoutS);
  // A request's headers and body go out as separate writes; without this the
  // body waits on the server's delayed ACK.
  http_->set_tcp_nodelay(true);
  if (!connection_.token.empty()) http_->set_bearer_token_auth(connection_.token);
}

std::string Client::MungeAuthorization(std::string_view method, const std::string& path) {
  munge_error_.clear();
  if (!connection_.token.empty()) return "";
  munge_ctx_t ctx = munge_ctx_create();
  if (ctx == nullptr) {
    munge_error_ = "munge_ctx_create failed";
    return "";
  }
  const std::string payload = MungePayload(method, path);
  char* cred = nullptr;
  munge_err_t err = EMUNGE_SUCCESS;
  if (!connection_.munge_socket.empty())
    err = munge_ctx_set(ctx, MUNGE_OPT_SOCKET, connection_.munge_socket.c_str());
  if (err == EMUNGE_SUCCESS)
    err = munge_encode(&cred, ctx, payload.data(), static_cast<int>(payload.size()));
  std::string header;
  if (err == EMUNGE_SUCCESS && cred != nullptr) {
    header = std::string("MUNGE ") + cred;
  } else {
    const char* detail = munge_ctx_strerror(ctx);
    munge_error_ = "munged " +
                   (connection_.munge_socket.empty() ? std::string("(libmunge's default socket)")
                                                     : "at " + connection_.munge_socket) +
                   " made no credential: " + (detail ? detail : munge_strerror(err));
  }
  free(cred);
  munge_ctx_destroy(ctx);
  return header;
}

Status Client::WithTokenOrigin(Status status) const {
  // A token the service refused: say which one, as an unreachable URL's
  // message says where the URL came from. Only its first characters: the
  // rest is a secret, and may be on a shared screen.
  if (status.code() != StatusCode::kUnauthenticated || connection_.token.empty()) return status;
  const std::string& t = connection_.token;
  const std::string shown = t.size() > 12 ? t.substr(0, 8) + "..." : "...";
  return Status(status.code(),
                status.message() + " (tfctl sent the token " + shown + " from " +
                    (connection_.token_origin.empty() ? "its options" : connection_.token_origin) +
                    "; give another with --token, TFSLURM_TOKEN or `token = ...` in "
                    "~/.config/tfslurm/config)",
                status.fields());
}

Status Client::WithMungeError(Status status) const {
  // Only where the service asked for MUNGE: a token-only tfslurmd never would.
  if (status.code() != StatusCode::kUnauthenticated || munge_error_.empty() ||
      status.message().find("MUNGE") == std::string::npos)
    return status;
  return Status(status.code(),
                status.message() + " (no token is set, and " + munge_error_ +
                    "; set TFSLURM_MUNGE_SOCKET, or give a token)",
                status.fields());
}

Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

StatusOr<json> Client::Call(Method method, const std::string& path, const json* body) {
  last_error_http_status_ = 0;
  httplib::Headers headers = {{"Accept", "application/json"}};
  std::string munge = MungeAuthorization(method == Method::kGet      ? "GET"
                                         : method == Method::kDelete ? "DELETE"
                                                                     : "POST",
                                         path);
  if (!munge.empty()) headers.emplace("Authorization", munge);
  if (body)
    if (Status s = CheckUtf8(*body, ""); !s.ok()) return s;
  httplib::Result res = method == Method::kGet      ? http_->Get(path, headers)
                        : method == Method::kDelete ? http_->Delete(path, headers)
                        : body ? http_->Post(path, headers, body->dump(), "application/json")
                               : http_->Post(path, headers);
  if (!res) return Unreachable(connection_, res.error());
  if (res->status < 200 || res->status >= 300) {
    last_error_http_status_ = res->status;
    return WithTokenOrigin(WithMungeError(ServiceError(res->status, res->body, connection_.url)));
  }
  json j = json::parse(res->body, nullptr, false);
  if (j.is_discarded())
    return Error(connection_.url + path + " answered HTTP " + std::to_string(res->status) +
                 " without a JSON body; is this tfslurmd?");
  return j;
}

StatusOr<Experiment> Client::Submit(const json& spec) {
  return Convert(Call(Method::kPost, "/experiments", &spec), ExperimentFromJson, connection_.url);
}

StatusOr<DryRun> Client::SubmitDryRun(const json& spec) {
  return Convert(Call(Method::kPost, "/experiments?dry_run=true", &spec), DryRunFromJson,
                 connection_.url);
}

StatusOr<Experiment> Client::GetExperiment(const std::string& id) {
  return Convert(Call(Method::kGet, ExperimentPath(id), nullptr), ExperimentFromJson,
                 connection_.url);
}

StatusOr<ExperimentList> Client::ListExperiments(const ListQuery& query) {
  std::string path = "/experiments?limit=" + std::to_string(query.limit);
  if (!query.states.empty()) {
    std::string states;
    for (const std::string& s : query.states) states += (states.empty() ? "" : ",") + s;
    path += "&state=" + Encode(states);
  }
  return Convert(Call(Method::kGet, path, nullptr), ExperimentListFromJson, connection_.url);
}

StatusOr<TrainingMetrics> Client::GetTrainingMetrics(const std::string& id,
                                                     const std::vector<std::string>& tags) {
  std::string path = ExperimentPath(id) + "/metrics";
  for (size_t i = 0; i < tags.size(); ++i) path += (i ? "&tag=" : "?tag=") + Encode(tags[i]);
  return Convert(Call(Method::kGet, path, nullptr), TrainingMetricsFromJson, connection_.url);
}

StatusOr<Experiment> Client::CancelExperiment(const std::string& id) {
  return Convert(Call(Method::kDelete, ExperimentPath(id), nullptr), ExperimentFromJson,
                 connection_.url);
}

StatusOr<Experiment> Client::ResumeExperiment(const std::string& id, const json& changes) {
  json body = json::object();
  if (!changes.is_null()) body["changes"] = changes;
  return Convert(Call(Method::kPost, ExperimentPath(id) + "/resume", &body), ExperimentFromJson,
                 connection_.url);
}

StatusOr<json> Client::DeleteExperiment(const std::string& id, bool files) {
  json body = json::object();
  return Call(Method::kPost, ExperimentPath(id) + "/delete" + (files ? "?files=true" : ""), &body);
}

StatusOr<json> Client::SubmitSweep(const json& spec) {
  return Call(Method::kPost, "/sweeps", &spec);
}

StatusOr<json> Client::ListSweeps() { return Call(Method::kGet, "/sweeps", nullptr); }

StatusOr<json> Client::GetSweep(const std::string& id) {
  return Call(Method::kGet, "/sweeps/" + Encode(id), nullptr);
}

StatusOr<json> Client::CancelSweep(const std::string& id) {
  json body = json::object();
  return Call(Method::kPost, "/sweeps/" + Encode(id) + "/cancel", &body);
}

StatusOr<json> Client::DeleteSweep(const std::string& id, bool files) {
  json body = json::object();
  return Call(Method::kPost, "/sweeps/" + Encode(id) + "/delete" + (files ? "?files=true" : ""),
              &body);
}

StatusOr<CreatedToken> Client::CreateToken(const std::string& user, bool admin) {
  json body = {{"admin", admin}};
  if (!user.empty()) body["user"] = user;
  auto answer = Call(Method::kPost, "/tokens", &body);
  if (!answer.ok()) return answer.status();
  try {
    return CreatedToken{answer->at("token").get<std::string>(),
                        answer->at("user").get<std::string>(), answer->at("admin").get<bool>()};
  } catch (const json::exception& e) {
    return Error(connection_.url +
                 " answered POST /tokens with JSON of an unexpected shape: " + e.what());
  }
}

StatusOr<int64_t> Client::ReadLogs(const LogQuery& query,
                                   const std::function<void(std::string_view)>& sink) {
  last_error_http_status_ = 0;
  std::string path = ExperimentPath(query.experiment_id) + "/logs?";
  if (!query.task.empty()) path += "task=" + Encode(query.task) + "&";
  if (query.attempt) path += "attempt=" + std::to_string(*query.attempt) + "&";
  if (query.tail) path += "tail=" + std::to_string(*query.tail) + "&";
  if (query.offset) path += "offset=" + std::to_string(*query.offset) + "&";
  if (query.follow) path += "follow=true&";
  path.pop_back();

  int status = 0;
  int64_t offset = 0;
  std::string error_body;
  if (query.follow) http_->set_read_timeout(kFollowReadTimeoutS);
  httplib::Headers headers;
  if (std::string munge = MungeAuthorization("GET", path); !munge.empty())
    headers.emplace("Authorization", munge);
  httplib::Result res = http_->Get(
      path, headers,
      [&](const httplib::Response& response) {
        status = response.status;
        std::string start = response.get_header_value(kLogOffsetHeader);
        std::from_chars(start.data(), start.data() + start.size(), offset);
        return true;
      },
      [&](const char* data, size_t length) {
        if (status == 200) {
          sink(std::string_view(data, length));
          offset += static_cast<int64_t>(length);
        } else {
          error_body.append(data, length);
        }
        return true;
      });
  http_->set_read_timeout(kReadTimeoutS);
  if (!res && status == 0) return Unreachable(connection_, res.error());
  if (!res)
    return Unavailable("the log stream from " + connection_.url + " broke after byte " +
                       std::to_string(offset) + ": " + Describe(res.error()));
  if (status != 200) {
    last_error_http_status_ = status;
    return WithMungeError(ServiceError(status, error_body, connection_.url));
  }
  return offset;
}

}  // namespace tfslurm::client
