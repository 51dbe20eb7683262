// API tokens: made for a user, kept only as their SHA-256, looked up by the
// token a request carries. api/auth.cc reads the header; this decides.
//
// Thread safety: thread-safe (the store and randomness ports are).
#pragma once

#include <string>

#include "base/status.h"
#include "service/core/ports/clock.h"
#include "service/core/ports/store.h"
#include "service/core/records.h"

namespace tfslurm {

class Tokens {
 public:
  Tokens(Store& store, Randomness& random, Clock& clock)
      : store_(store), random_(random), clock_(clock) {}

  // A new random token for `user`; stores only its hash. Returns the token,
  // which nothing can show again. InvalidArgument for a bad user name.
  StatusOr<std::string> Create(const std::string& user, bool admin);
  // The record of `token`; Unauthenticated when it is not one.
  StatusOr<TokenRecord> Find(const std::string& token);

 private:
  Store& store_;
  Randomness& random_;
  Clock& clock_;
};

}  // namespace tfslurm
