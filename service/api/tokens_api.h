// POST /tokens: mints an API token for the caller, or, for an admin, for
// anyone. Body (optional): {"user": NAME, "admin": BOOL}; no user: the
// caller's own. A non-admin may mint only a non-admin token for themselves
// (403 otherwise); that is how a user who proved their Unix identity with
// MUNGE gets a token for curl and the dashboard. Answers 201
// {"token", "user", "admin"}; the token is shown only then, the store keeps
// its SHA-256 (core/tokens.h).
//
// Thread safety: register once before serving; Tokens and the authenticator
// are thread-safe.
#pragma once

#include <httplib.h>

#include "service/api/auth.h"
#include "service/core/tokens.h"

namespace tfslurm::api {

void RegisterTokenRoutes(httplib::Server& server, Tokens& tokens, Authenticator& auth);

}  // namespace tfslurm::api
