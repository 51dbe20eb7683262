// Who is calling, and whether they may touch an experiment. Bearer tokens:
// owners see and change their own experiments, admins all. tfslurmd
// --no-auth (loopback only) makes every caller the local admin.
//
// Thread safety: create the authenticators before serving; then Authenticate,
// CheckAccess and Guard's handlers may be called from any thread (tokens are
// looked up through Tokens, which is thread-safe).
#pragma once

#include <httplib.h>

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "service/core/records.h"
#include "service/core/tokens.h"

namespace tfslurm::api {

struct Principal {
  std::string user;
  bool admin = false;
};

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // Unauthenticated (401) for a missing or unknown token.
  virtual StatusOr<Principal> Authenticate(const httplib::Request& req) = 0;
};

std::unique_ptr<Authenticator> NewTokenAuthenticator(Tokens& tokens);
// --no-auth: every request is the local admin.
std::unique_ptr<Authenticator> NewOpenAuthenticator();

// NotFound (404) unless `p` owns `e` or is an admin, with the same message as
// for an id that does not exist: every route that touches one experiment
// calls this, so none tells a caller that someone else's id exists.
Status CheckAccess(const Principal& p, const ExperimentRecord& e);

using AuthedHandler =
    std::function<void(const httplib::Request&, httplib::Response&, const Principal&)>;
// Authenticates, then calls `handler`; answers 401 itself otherwise.
httplib::Server::Handler Guard(Authenticator& auth, AuthedHandler handler);

}  // namespace tfslurm::api
