// Bringing a database's schema up to this build's (schema/migrations/,
// embedded). Internal to service/store: OpenSqliteStore runs it.
//
// What an upgrade must not do is lose the database, so:
// - every pending migration and the version bump run in ONE transaction:
//   a migration that fails leaves the database exactly as it was, at its
//   old version, and the old tfslurmd still runs on it;
// - a database that has a schema (version > 0) is first copied whole
//   (sqlite_backup.h) to "<db>.schema-<old version>.<UTC time>", beside it;
// - a database newer than this build is refused before anything is read,
//   naming both schema versions and this build.
//
// Thread safety: not thread-safe: the caller serializes use of `db`.
#pragma once

#include <sqlite3.h>

#include <string>
#include <vector>

#include "base/status.h"
#include "service/store/migrations.h"

namespace tfslurm::store {

struct MigrationOutcome {
  int from_version = 0;
  int to_version = 0;
  std::string backup_path;  // "" when nothing was copied (nothing to migrate, or a new database)
};

// Migrates the open connection `db` of the database at `path` to the last
// of `migrations` (in increasing version order). Errors: FailedPrecondition
// for a database newer than `migrations` and for a migration that fails
// (its name and SQLite's reason; the database unchanged), or the backup's
// error (then nothing was migrated).
StatusOr<MigrationOutcome> MigrateSchema(sqlite3* db, const std::string& path,
                                         const std::vector<Migration>& migrations);

}  // namespace tfslurm::store
