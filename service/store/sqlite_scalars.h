// Training scalars in SQLite (schema/migrations/0006_scalars.sql): appending
// with downsampling, and reading. Internal to service/store; SqliteStore
// calls them under its lock.
//
// Thread safety: none of their own; the caller holds the lock of the
// connection `sql` belongs to.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "service/core/ports/store.h"
#include "service/store/sqlite_statement.h"

namespace tfslurm::store {

// Store::AppendScalars, inside a transaction the caller opened and commits
// (or rolls back on an error).
StatusOr<AppendedScalars> AppendScalarsInTransaction(StatementCache& sql,
                                                     const std::string& experiment_id, int attempt,
                                                     std::span<const ScalarPoint> points,
                                                     const ScalarLimits& limits);

// Store::ReadScalars, in one statement (so of one moment).
StatusOr<std::vector<ScalarSeries>> ReadScalarSeries(StatementCache& sql,
                                                     const std::string& experiment_id,
                                                     const std::vector<std::string>& tags);

// Store::ListScalarTags.
StatusOr<std::vector<std::string>> ReadScalarTags(StatementCache& sql,
                                                  const std::string& experiment_id);

}  // namespace tfslurm::store
