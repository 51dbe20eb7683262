// Consistent copies of the SQLite database with SQLite's online backup API
// (sqlite.org/backup.html): `tfslurmd backup --to FILE` while the service
// runs, and the copy tfslurmd takes itself before it migrates a database to
// a newer schema (sqlite_store.cc).
//
// The copy is read in one read transaction of the source: in WAL mode that
// is a snapshot, so the service's writes go on meanwhile and none of them
// is half in the copy. It is written under a temporary name beside FILE,
// checked (PRAGMA integrity_check), synced, and only then renamed to FILE:
// a FILE that exists is whole.
//
// Thread safety: the functions are thread-safe; each uses connections of
// its own (or, for BackupConnection, the caller's, which the caller
// serializes).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

struct sqlite3;

namespace tfslurm::store {

struct BackupInfo {
  int64_t schema_version = 0;  // PRAGMA user_version of the copy
  int64_t pages = 0;           // pages copied
  int64_t bytes = 0;           // the copy's size
};

// Copies the database at db_path (which must exist; it is never created or
// written) to to_path, which must not exist. Errors: NotFound for a missing
// database, AlreadyExists for an existing to_path, InvalidArgument when
// to_path is the database itself or one of its -wal/-shm/.lock files,
// Unavailable for what the file systems refuse (the message names the path
// and SQLite's or the system's reason), Internal when the copy fails its
// integrity check.
StatusOr<BackupInfo> BackupDatabase(const std::string& db_path, const std::string& to_path);

// The same from an open connection `db` (its "main" database), for the
// store's own copy before a migration.
StatusOr<BackupInfo> BackupConnection(sqlite3* db, const std::string& to_path);

}  // namespace tfslurm::store
