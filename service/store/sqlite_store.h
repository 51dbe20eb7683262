// The SQLite implementation of the store port (core/ports/store.h).
//
// Thread safety: a store from OpenSqliteStore is thread-safe; its own
// background thread checkpoints the WAL.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "service/core/ports/store.h"

namespace tfslurm::store {

struct SqliteOptions {
  // A background thread checkpoints the WAL into the database file (with
  // its fsync) when a commit leaves at least this many pages in it (SQLite's
  // own automatic checkpoint, which would do it inside that commit, is off)...
  int checkpoint_wal_pages = 1000;
  // ...and this often while there are commits not yet checkpointed: with
  // synchronous=NORMAL, a commit is durable once checkpointed.
  std::chrono::milliseconds checkpoint_interval{1000};
};

// Opens (creating if needed) the SQLite database at `path`, in WAL mode, and
// brings its schema up to date with the embedded migrations. A database
// written by a newer tfslurmd is refused with FailedPrecondition.
StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                                 const SqliteOptions& options = {});

// Checkpoints the background thread of an OpenSqliteStore store has run.
int64_t WalCheckpointsForTest(Store& store);

}  // namespace tfslurm::store
