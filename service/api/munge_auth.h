// MUNGE authentication (tfslurmd --munge-auth): `Authorization: MUNGE
// <credential>` proves the caller's Unix uid, as munged on this host
// decodes it. Any other Authorization header goes to the token
// authenticator, unchanged.
//
// A credential is accepted only when
// - munged decodes it (munge_decode: valid MAC, not expired by its own TTL,
//   not rewound, not replayed as munged sees it);
// - its payload is MungeRequestPayload(method, path) of this very request,
//   so a credential lifted from one request (or made for another service)
//   cannot be spent on another route, another experiment, or elsewhere;
// - it was encoded at most max_age_s ago (the encoder chooses the TTL, up
//   to munged's maximum; this caps it);
// - it was not seen before (ReplayCache: ours, besides munged's, which lets
//   a client that claims a socket retry replay a credential);
// - its uid is not 0 and has a passwd entry (PrincipalForUid).
// The principal is the uid's user name; it is an admin only as a member of
// admin_group (primary or supplementary), when one is set.
//
// libmunge is used only in munge_auth.cc; nothing in service/core sees it.
//
// Thread safety: MungeRequestPayload, CheckMungeCredential and
// PrincipalForUid are pure functions; ReplayCache and the authenticator may be
// called from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "service/api/auth.h"

namespace tfslurm::api {

struct MungeAuthOptions {
  std::string socket;       // munged's socket; empty: libmunge's default
  int64_t max_age_s = 300;  // a credential older than this is refused
  std::string admin_group;  // members are admins; empty: nobody is, under MUNGE
};

// What munged says about a credential.
struct MungeCredential {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string payload;
  int64_t encoded_at_s = 0;  // munged's MUNGE_OPT_ENCODE_TIME
  int64_t ttl_s = 0;         // MUNGE_OPT_TTL
};

// The payload a credential for `method` `path` (no query string) carries:
// "tfslurm/1 " + method + " " + path. client/tfslurm_client.cc makes the
// same string.
std::string MungeRequestPayload(std::string_view method, std::string_view path);

// Unauthenticated unless `cred` is bound to this request and young enough.
Status CheckMungeCredential(const MungeCredential& cred, std::string_view method,
                            std::string_view path, int64_t now_s, int64_t max_age_s);

// The credentials already accepted, each kept until it could no longer pass
// the age check. Bounded: when full, the entry that expires first is dropped
// (it is the one closest to being refused by age anyway).
class ReplayCache {
 public:
  explicit ReplayCache(size_t capacity = 100000) : capacity_(capacity) {}
  // True the first time `key` is seen before it expires; false for a replay.
  bool Admit(const std::string& key, int64_t expires_at_s, int64_t now_s) ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const size_t capacity_;
  Mutex mu_;
  std::map<std::string, int64_t> expiry_ ABSL_GUARDED_BY(mu_);          // key -> expires at
  std::multimap<int64_t, std::string> by_expiry_ ABSL_GUARDED_BY(mu_);  // expires at -> key
};

// A passwd entry: the name and every group (primary first).
struct UnixUser {
  std::string name;
  std::vector<gid_t> groups;
};
using UserLookup = std::function<std::optional<UnixUser>(uid_t)>;
// getpwuid_r and getgrouplist.
UserLookup SystemUserLookup();

// The principal a MUNGE uid acts as: Unauthenticated for uid 0 (root never
// acts through tfslurmd by MUNGE; an admin uses an admin token or the admin
// group) and for a uid with no passwd entry. admin when `admin_gid` is one
// of the user's groups.
StatusOr<Principal> PrincipalForUid(uid_t uid, const UserLookup& lookup,
                                    std::optional<gid_t> admin_gid);

// Decodes a credential through munged (libmunge's munge_decode).
using MungeDecoder = std::function<StatusOr<MungeCredential>(const std::string& credential)>;
MungeDecoder LibmungeDecoder(const std::string& socket);

// `tokens` answers every request that is not `Authorization: MUNGE ...`.
// InvalidArgument when admin_group names no group.
StatusOr<std::unique_ptr<Authenticator>> NewMungeAuthenticator(
    const MungeAuthOptions& options, std::unique_ptr<Authenticator> tokens, MungeDecoder decoder,
    UserLookup lookup, std::function<int64_t()> now_s);

}  // namespace tfslurm::api
