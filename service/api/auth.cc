#include "service/api/auth.h"

#include <regex>

#include "service/api/errors.h"
#include "service/core/experiments.h"

namespace tfslurm::api {
namespace {

class TokenAuthenticator final : public Authenticator {
 public:
  explicit TokenAuthenticator(store::Store& store) : store_(store) {}
  StatusOr<Principal> Authenticate(const httplib::Request& req) override {
    const std::string header = req.get_header_value("Authorization");
    static const std::string kPrefix = "Bearer ";
    if (header.empty())
      return Status(
          StatusCode::kUnauthenticated,
          "this request needs a token: send 'Authorization: Bearer <token>' (create one with "
          "'tfslurmd token create --user NAME')");
    if (header.compare(0, kPrefix.size(), kPrefix) != 0 || header.size() == kPrefix.size())
      return Status(StatusCode::kUnauthenticated,
                    "the Authorization header must be 'Bearer <token>'");
    auto token = store_.GetToken(Sha256Hex(header.substr(kPrefix.size())));
    if (!token.ok()) {
      if (token.status().code() == StatusCode::kNotFound)
        return Status(StatusCode::kUnauthenticated, "the token is not valid");
      return token.status();
    }
    return Principal{token->user, token->admin};
  }

 private:
  store::Store& store_;
};

class OpenAuthenticator final : public Authenticator {
 public:
  StatusOr<Principal> Authenticate(const httplib::Request&) override {
    return Principal{"local", true};
  }
};

}  // namespace

std::unique_ptr<Authenticator> NewTokenAuthenticator(store::Store& store) {
  return std::make_unique<TokenAuthenticator>(store);
}
std::unique_ptr<Authenticator> NewOpenAuthenticator() {
  return std::make_unique<OpenAuthenticator>();
}

StatusOr<std::string> CreateToken(store::Store& store, const std::string& user, bool admin,
                                  int64_t now_ms) {
  static const std::regex kUser("[A-Za-z0-9_.@-]{1,64}");
  if (!std::regex_match(user, kUser))
    return InvalidArgument("user must be 1-64 of letters, digits, _ . @ -, got '" + user + "'",
                           {{"user", "invalid user name"}});
  std::string token = "tfs_" + NewSystemRandomness()->NewSecret();
  if (Status s = store.PutToken({Sha256Hex(token), user, admin, now_ms}); !s.ok()) return s;
  return token;
}

Status CheckAccess(const Principal& p, const ExperimentRecord& e) {
  if (p.admin || p.user == e.owner) return Status::Ok();
  return Status(StatusCode::kPermissionDenied,
                "experiment '" + e.id +
                    "' belongs to another user; only its owner or an admin may see or change it");
}

httplib::Server::Handler Guard(Authenticator& auth, AuthedHandler handler) {
  return
      [&auth, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
        auto principal = auth.Authenticate(req);
        if (!principal.ok()) return ReplyError(res, principal.status());
        handler(req, res, *principal);
      };
}

}  // namespace tfslurm::api
