#include "service/api/munge_auth.h"

#include <grp.h>
#include <munge.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "base/sha256.h"
#include "service/system/accounts.h"

namespace tfslurm::api {
namespace {

constexpr std::string_view kMungePrefix = "MUNGE ";

Status Refused(const std::string& why) {
  return Status(StatusCode::kUnauthenticated, "MUNGE credential refused: " + why);
}

class MungeAuthenticator final : public Authenticator {
 public:
  MungeAuthenticator(const MungeAuthOptions& options, std::optional<gid_t> admin_gid,
                     std::unique_ptr<Authenticator> tokens, MungeDecoder decoder, UserLookup lookup,
                     std::function<int64_t()> now_s)
      : options_(options),
        admin_gid_(admin_gid),
        tokens_(std::move(tokens)),
        decoder_(std::move(decoder)),
        lookup_(std::move(lookup)),
        now_s_(std::move(now_s)) {}

  StatusOr<Principal> Authenticate(const httplib::Request& req) override {
    const std::string header = req.get_header_value("Authorization");
    if (header.compare(0, kMungePrefix.size(), kMungePrefix) != 0) {
      if (!header.empty()) return tokens_->Authenticate(req);
      return Status(StatusCode::kUnauthenticated,
                    "this request needs a MUNGE credential or a token: tfctl sends a MUNGE "
                    "credential when no token is set; or send 'Authorization: Bearer <token>' "
                    "(tfctl token create)");
    }
    const std::string credential = header.substr(kMungePrefix.size());
    if (credential.empty() || credential.size() > 8192)
      return Refused("the header must be 'MUNGE <credential>', at most 8192 characters");
    auto cred = decoder_(credential);
    if (!cred.ok()) return cred.status();
    const int64_t now = now_s_();
    if (Status s = CheckMungeCredential(*cred, req.method, req.path, now, options_.max_age_s);
        !s.ok())
      return s;
    auto principal = PrincipalForUid(cred->uid, lookup_, admin_gid_);
    if (!principal.ok()) return principal.status();
    // Kept until the age check would refuse it anyway (one second of slack).
    if (!replays_.Admit(Sha256Hex(credential), cred->encoded_at_s + options_.max_age_s + 1, now))
      return Refused("it was used before (replayed); make a new credential for each request");
    return principal;
  }

 private:
  const MungeAuthOptions options_;
  const std::optional<gid_t> admin_gid_;
  std::unique_ptr<Authenticator> tokens_;
  MungeDecoder decoder_;
  UserLookup lookup_;
  std::function<int64_t()> now_s_;
  ReplayCache replays_;
};

}  // namespace

std::string MungeRequestPayload(std::string_view method, std::string_view path) {
  std::string payload = "tfslurm/1 ";
  payload.append(method);
  payload += ' ';
  payload.append(path);
  return payload;
}

Status CheckMungeCredential(const MungeCredential& cred, std::string_view method,
                            std::string_view path, int64_t now_s, int64_t max_age_s) {
  const std::string want = MungeRequestPayload(method, path);
  if (cred.payload != want)
    return Refused("its payload must be '" + want +
                   "' (it binds the credential to this request); it is not");
  if (now_s - cred.encoded_at_s > max_age_s)
    return Refused("it was made " + std::to_string(now_s - cred.encoded_at_s) +
                   " s ago; tfslurmd accepts credentials for " + std::to_string(max_age_s) + " s");
  return Status::Ok();
}

bool ReplayCache::Admit(const std::string& key, int64_t expires_at_s, int64_t now_s) {
  MutexLock lock(mu_);
  while (!by_expiry_.empty() && by_expiry_.begin()->first < now_s) {
    expiry_.erase(by_expiry_.begin()->second);
    by_expiry_.erase(by_expiry_.begin());
  }
  if (expiry_.count(key)) return false;
  if (capacity_ == 0) return true;
  while (expiry_.size() >= capacity_) {
    expiry_.erase(by_expiry_.begin()->second);
    by_expiry_.erase(by_expiry_.begin());
  }
  expiry_.emplace(key, expires_at_s);
  by_expiry_.emplace(expires_at_s, key);
  return true;
}

size_t ReplayCache::size() {
  MutexLock lock(mu_);
  return expiry_.size();
}

UserLookup SystemUserLookup() {
  return [](uid_t uid) -> std::optional<UnixUser> {
    auto account = system::LookupAccount(uid);
    if (!account) return std::nullopt;
    return UnixUser{account->user, {account->groups.begin(), account->groups.end()}};
  };
}

StatusOr<Principal> PrincipalForUid(uid_t uid, const UserLookup& lookup,
                                    std::optional<gid_t> admin_gid) {
  if (uid == 0)
    return Refused(
        "it was made by uid 0 (root); root does not act through MUNGE, use an admin token");
  auto user = lookup(uid);
  if (!user || user->name.empty())
    return Refused("uid " + std::to_string(uid) + " has no account on the tfslurmd host");
  bool admin = admin_gid && std::find(user->groups.begin(), user->groups.end(), *admin_gid) !=
                                user->groups.end();
  return Principal{user->name, admin};
}

MungeDecoder LibmungeDecoder(const std::string& socket) {
  return [socket](const std::string& credential) -> StatusOr<MungeCredential> {
    munge_ctx_t ctx = munge_ctx_create();
    if (ctx == nullptr) return Status(StatusCode::kInternal, "munge_ctx_create failed");
    if (!socket.empty() && munge_ctx_set(ctx, MUNGE_OPT_SOCKET, socket.c_str()) != EMUNGE_SUCCESS) {
      munge_ctx_destroy(ctx);
      return Status(StatusCode::kInternal, "cannot set the munge socket to " + socket);
    }
    void* buf = nullptr;
    int len = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    munge_err_t err = munge_decode(credential.c_str(), ctx, &buf, &len, &uid, &gid);
    MungeCredential cred;
    cred.uid = uid;
    cred.gid = gid;
    // The payload is allocated even for the expired, rewound and replayed errors.
    if (buf != nullptr) cred.payload.assign(static_cast<const char*>(buf), len);
    free(buf);
    time_t encoded = 0;
    int ttl = 0;
    munge_ctx_get(ctx, MUNGE_OPT_ENCODE_TIME, &encoded);
    munge_ctx_get(ctx, MUNGE_OPT_TTL, &ttl);
    cred.encoded_at_s = encoded;
    cred.ttl_s = ttl;
    std::string detail = munge_ctx_strerror(ctx) ? munge_ctx_strerror(ctx) : munge_strerror(err);
    munge_ctx_destroy(ctx);
    switch (err) {
      case EMUNGE_SUCCESS:
        return cred;
      case EMUNGE_CRED_REPLAYED:
        return Refused("munged says it was used before (replayed); make a new one per request");
      case EMUNGE_CRED_EXPIRED:
        return Refused("munged says it has expired (" + detail + ")");
      case EMUNGE_CRED_REWOUND:
        return Refused("munged says it was made in the future (" + detail + "); check the clocks");
      case EMUNGE_SOCKET:
        return Status(StatusCode::kUnavailable,
                      "tfslurmd cannot reach munged" +
                          (socket.empty() ? std::string() : " at " + socket) + ": " + detail);
      default:
        return Refused(detail);
    }
  };
}

StatusOr<std::unique_ptr<Authenticator>> NewMungeAuthenticator(
    const MungeAuthOptions& options, std::unique_ptr<Authenticator> tokens, MungeDecoder decoder,
    UserLookup lookup, std::function<int64_t()> now_s) {
  std::optional<gid_t> admin_gid;
  if (!options.admin_group.empty()) {
    struct group gr;
    struct group* found = nullptr;
    std::vector<char> buf(1 << 16);
    getgrnam_r(options.admin_group.c_str(), &gr, buf.data(), buf.size(), &found);
    if (found == nullptr)
      return Status(StatusCode::kInvalidArgument,
                    "--munge-admin-group: no group named '" + options.admin_group + "'");
    admin_gid = gr.gr_gid;
  }
  return std::unique_ptr<Authenticator>(std::make_unique<MungeAuthenticator>(
      options, admin_gid, std::move(tokens), std::move(decoder), std::move(lookup),
      std::move(now_s)));
}

}  // namespace tfslurm::api
