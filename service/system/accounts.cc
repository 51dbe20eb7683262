#include "service/system/accounts.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "service/system/thread_identity.h"

namespace tfslurm::system {
namespace {

// getpwnam_r / getpwuid_r with a buffer grown until the entry fits.
template <typename Key, typename Lookup>
std::optional<RunAs> FromPasswd(Key key, Lookup lookup) {
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<size_t>(size) : 16384);
  struct passwd pw;
  struct passwd* found = nullptr;
  while (lookup(key, &pw, buf.data(), buf.size(), &found) == ERANGE && buf.size() < (1 << 20))
    buf.resize(buf.size() * 2);
  if (found == nullptr) return std::nullopt;
  RunAs account{pw.pw_name, pw.pw_uid, pw.pw_gid, {}, {}};
  const std::string home = pw.pw_dir && *pw.pw_dir ? pw.pw_dir : "/";
  account.identity_env = {"HOME=" + home, "USER=" + account.user, "LOGNAME=" + account.user};
  int n = 64;
  std::vector<gid_t> groups(n);
  while (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0 && n < 65536)
    groups.resize(static_cast<size_t>(n) > groups.size() ? n : groups.size() * 2);
  groups.resize(std::max(n, 0));
  account.groups.push_back(pw.pw_gid);
  for (gid_t g : groups)
    if (g != pw.pw_gid) account.groups.push_back(g);
  return account;
}

class PersonalAccounts final : public Accounts {
 public:
  PersonalAccounts() {
    if (auto self = LookupAccount(getuid())) {
      self_ = *self;
      self_.identity_env.clear();  // tfslurmd's own environment is its account's
    } else {
      // A uid without a passwd entry (a container's): run as it anyway.
      self_ = RunAs{std::to_string(getuid()), getuid(), getgid(), {getgid()}, {}};
    }
  }
  StatusOr<RunAs> ForOwner(const std::string&) override { return self_; }

 private:
  RunAs self_;
};

class SiteAccounts final : public Accounts {
 public:
  StatusOr<RunAs> ForOwner(const std::string& owner) override {
    auto account = LookupAccount(owner);
    if (!account)
      return Status{StatusCode::kPermissionDenied,
                    "user '" + owner +
                        "' has no Unix account on this host; tfslurmd runs in site mode, where "
                        "each experiment's job runs as its owner's account"};
    if (account->uid == 0)
      return Status{StatusCode::kPermissionDenied,
                    "user '" + owner + "' is uid 0; in site mode no experiment's job runs as root"};
    return *account;
  }
};

}  // namespace

std::optional<RunAs> LookupAccount(const std::string& name) {
  if (name.empty()) return std::nullopt;
  return FromPasswd(name.c_str(), getpwnam_r);
}

std::optional<RunAs> LookupAccount(uid_t uid) { return FromPasswd(uid, getpwuid_r); }

std::unique_ptr<Accounts> NewPersonalAccounts() { return std::make_unique<PersonalAccounts>(); }
std::unique_ptr<Accounts> NewSiteAccounts() { return std::make_unique<SiteAccounts>(); }

Status CheckCanActAs(uid_t probe_uid, gid_t probe_gid) {
  ScopedThreadIdentity probe(probe_uid, probe_gid, {probe_gid});
  if (!probe.ok())
    return FailedPrecondition(
        "site mode (--site) acts as each experiment's owner, which needs root (or "
        "CAP_SETUID, CAP_SETGID and CAP_CHOWN); taking uid " +
        std::to_string(probe_uid) + " failed: " + probe.error());
  return Status::Ok();
}

}  // namespace tfslurm::system
