// The accounts port (core/ports/accounts.h) on the real machine, and the
// passwd and group lookups it and MUNGE identity (api/munge_auth.h) share.
//
// Thread safety: every function and object here is thread-safe (the
// reentrant getpw*_r and getgrouplist).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "service/core/ports/accounts.h"

namespace tfslurm::system {

// The passwd entry of `name` or `uid`, with every group of the account
// (getgrouplist), the primary group first; nullopt when there is none.
std::optional<RunAs> LookupAccount(const std::string& name);
std::optional<RunAs> LookupAccount(uid_t uid);

// Personal mode: every owner's jobs run as tfslurmd's own account.
std::unique_ptr<Accounts> NewPersonalAccounts();
// Site mode: an owner's jobs run as the owner's own account.
std::unique_ptr<Accounts> NewSiteAccounts();

// Whether this process may act as another account on one of its threads
// (ScopedThreadIdentity) and give it a directory: site mode needs that.
// Tries it with `probe` (nobody's uid and gid); the error says what failed.
Status CheckCanActAs(uid_t probe_uid, gid_t probe_gid);

}  // namespace tfslurm::system
