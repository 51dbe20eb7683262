// Sweeps and their trials in SQLite (schema/migrations/0010_sweeps.sql).
// Internal to service/store; SqliteStore calls them under its lock.
//
// Thread safety: none of their own; the caller holds the lock of the
// connection `sql` belongs to.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "service/core/ports/store.h"
#include "service/core/records.h"
#include "service/store/sqlite_statement.h"

namespace tfslurm::store {

// The sweep and trial rows of `c`, inside the caller's transaction:
// AlreadyExists for a sweep created with a taken id.
Status WriteSweepChanges(StatementCache& sql, const Changes& c);

StatusOr<SweepRecord> ReadSweep(StatementCache& sql, const std::string& id);
StatusOr<std::vector<SweepRecord>> ReadSweeps(StatementCache& sql, const SweepQuery& query);
StatusOr<std::vector<SweepTrialRecord>> ReadSweepTrials(StatementCache& sql,
                                                        const std::string& sweep_id);
StatusOr<std::vector<std::pair<std::string, int64_t>>> CountEndedTrials(StatementCache& sql);

}  // namespace tfslurm::store
