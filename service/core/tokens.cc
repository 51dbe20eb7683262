#include "service/core/tokens.h"

#include <regex>

#include "base/sha256.h"

namespace tfslurm {

namespace {

// Compiled at program start, on one thread (see service/core/checkpoint_state.cc).
const std::regex kUser("[A-Za-z0-9_.@-]{1,64}");

}  // namespace

StatusOr<std::string> Tokens::Create(const std::string& user, bool admin) {
  if (!std::regex_match(user, kUser))
    return InvalidArgument("user must be 1-64 of letters, digits, _ . @ -, got '" + user + "'",
                           {{"user", "invalid user name"}});
  std::string token = "tfs_" + random_.NewSecret();
  if (Status s = store_.PutToken({Sha256Hex(token), user, admin, clock_.NowMs()}); !s.ok())
    return s;
  return token;
}

StatusOr<TokenRecord> Tokens::Find(const std::string& token) {
  auto record = store_.GetToken(Sha256Hex(token));
  if (!record.ok() && record.status().code() == StatusCode::kNotFound)
    return Status(StatusCode::kUnauthenticated, "the token is not valid");
  return record;
}

}  // namespace tfslurm
