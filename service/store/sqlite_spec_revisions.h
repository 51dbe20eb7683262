// Spec revisions in SQLite (schema/migrations/0009_spec_revisions.sql):
// every revision of an experiment's spec, kept whole. Internal to
// service/store; SqliteStore calls them under its lock.
//
// Thread safety: none of their own; the caller holds the lock of the
// connection `sql` belongs to.
#pragma once

#include <string>
#include <vector>

#include "service/core/records.h"
#include "service/store/sqlite_statement.h"

namespace tfslurm::store {

// Inside the caller's transaction; AlreadyExists when the revision is there.
Status InsertSpecRevision(StatementCache& sql, const SpecRevisionRecord& r);

// Oldest first.
StatusOr<std::vector<SpecRevisionRecord>> ReadSpecRevisions(StatementCache& sql,
                                                            const std::string& experiment_id);

}  // namespace tfslurm::store
