#include "service/api/auth.h"

#include <spdlog/spdlog.h>

#include "service/api/errors.h"
#include "service/api/request_params.h"

namespace tfslurm::api {
namespace {

class TokenAuthenticator final : public Authenticator {
 public:
  explicit TokenAuthenticator(Tokens& tokens) : tokens_(tokens) {}
  StatusOr<Principal> Authenticate(const httplib::Request& req) override {
    const std::string header = req.get_header_value("Authorization");
    static const std::string kPrefix = "Bearer ";
    if (header.empty())
      return Status(
          StatusCode::kUnauthenticated,
          "this request needs a token: send 'Authorization: Bearer <token>' (create one with "
          "'tfslurmd token create --user NAME')");
    if (header.compare(0, 6, "MUNGE ") == 0)
      return Status(StatusCode::kUnauthenticated,
                    "this tfslurmd does not accept MUNGE credentials (it runs without "
                    "--munge-auth); send 'Authorization: Bearer <token>'");
    if (header.compare(0, kPrefix.size(), kPrefix) != 0 || header.size() == kPrefix.size())
      return Status(StatusCode::kUnauthenticated,
                    "the Authorization header must be 'Bearer <token>'");
    auto token = tokens_.Find(header.substr(kPrefix.size()));
    if (!token.ok()) return token.status();
    return Principal{token->user, token->admin};
  }

 private:
  Tokens& tokens_;
};

class OpenAuthenticator final : public Authenticator {
 public:
  StatusOr<Principal> Authenticate(const httplib::Request&) override {
    return Principal{"local", true};
  }
};

}  // namespace

std::unique_ptr<Authenticator> NewTokenAuthenticator(Tokens& tokens) {
  return std::make_unique<TokenAuthenticator>(tokens);
}
std::unique_ptr<Authenticator> NewOpenAuthenticator() {
  return std::make_unique<OpenAuthenticator>();
}

Status CheckAccess(const Principal& p, const ExperimentRecord& e) {
  if (p.admin || p.user == e.owner) return Status::Ok();
  // Word for word the store's answer for an id it does not have
  // (store/sqlite_store.cc, GetExperiment): a 403 here would tell anyone with
  // a token which ids exist.
  return NotFound("no experiment with id '" + e.id + "'");
}

httplib::Server::Handler Guard(Authenticator& auth, AuthedHandler handler) {
  return
      [&auth, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
        auto principal = auth.Authenticate(req);
        if (!principal.ok()) return ReplyError(res, principal.status());
        if (Status s = CheckQueryIsUtf8(req); !s.ok()) return ReplyError(res, s);
        handler(req, res, *principal);
        // A 500 is a bug: its message goes to the caller, and to the log with
        // the route, so that the operator sees it too. (An exception that
        // escapes the handler is logged by http_api.cc's exception handler.)
        if (res.status == 500)
          spdlog::error("{} {}: {}", req.method, PercentEncodedForLog(req.path), res.body);
      };
}

}  // namespace tfslurm::api
