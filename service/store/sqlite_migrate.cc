#include "service/store/sqlite_migrate.h"

#include <ctime>

#include "base/build_info.h"
#include "service/store/sqlite_backup.h"

namespace tfslurm::store {
namespace {

std::string ThisBuild() {
  return std::string("this tfslurmd (") + base::TfslurmVersion() + ", commit " +
         base::TfslurmCommit() + ")";
}

int UserVersion(sqlite3* db) {
  sqlite3_stmt* s = nullptr;
  int version = 0;
  if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, nullptr) == SQLITE_OK &&
      sqlite3_step(s) == SQLITE_ROW) {
    version = sqlite3_column_int(s, 0);
  }
  sqlite3_finalize(s);
  return version;
}

// "2026-11-28T031502Z": sorts by time, and has no ':' (scp, rsync).
std::string UtcStamp() {
  char text[32];
  time_t now = time(nullptr);
  struct tm utc;
  gmtime_r(&now, &utc);
  strftime(text, sizeof(text), "%Y-%m-%dT%H%M%SZ", &utc);
  return text;
}

// One script: every pending migration, then the new version, between
// BEGIN IMMEDIATE and COMMIT. SQLite's DDL is transactional, and the
// migrations hold no statement that would end the transaction (no PRAGMA
// but user_version, no VACUUM).
std::string MigrationScript(const std::vector<Migration>& migrations, int from, int to) {
  std::string sql = "BEGIN IMMEDIATE;\n";
  for (const Migration& m : migrations) {
    if (m.version <= from) continue;
    sql += std::string("-- ") + m.name + "\n" + m.sql + "\n";
  }
  return sql + "PRAGMA user_version=" + std::to_string(to) + ";\nCOMMIT;";
}

// The migration a failed script stopped in, for the message: the pending
// ones tried again in turn, in a transaction that is rolled back.
std::string FailingMigration(sqlite3* db, const std::vector<Migration>& migrations, int from) {
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) return "";
  std::string name;
  for (const Migration& m : migrations) {
    if (m.version <= from) continue;
    if (sqlite3_exec(db, m.sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
      name = m.name;
      break;
    }
  }
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  return name;
}

}  // namespace

StatusOr<MigrationOutcome> MigrateSchema(sqlite3* db, const std::string& path,
                                         const std::vector<Migration>& migrations) {
  MigrationOutcome out;
  out.from_version = UserVersion(db);
  out.to_version = migrations.empty() ? 0 : migrations.back().version;
  if (out.from_version > out.to_version) {
    return FailedPrecondition(
        "database " + path + " has schema version " + std::to_string(out.from_version) +
        ", newer than " + ThisBuild() + " knows (" + std::to_string(out.to_version) +
        "): a newer tfslurmd wrote it. Downgrading is refused: run the newer tfslurmd again, or "
        "restore a backup taken before the upgrade (the copy an upgrade makes is " +
        path + ".schema-" + std::to_string(out.to_version) + ".*)");
  }
  if (out.from_version == out.to_version) return out;
  if (out.from_version > 0) {
    out.backup_path = path + ".schema-" + std::to_string(out.from_version) + "." + UtcStamp();
    auto copy = BackupConnection(db, out.backup_path);
    if (!copy.ok()) {
      return Status(copy.status().code(),
                    "before migrating database " + path + " from schema version " +
                        std::to_string(out.from_version) + " to " + std::to_string(out.to_version) +
                        ", its copy failed, so nothing was "
                        "migrated: " +
                        copy.status().message());
    }
  }
  std::string script = MigrationScript(migrations, out.from_version, out.to_version);
  char* err = nullptr;
  if (sqlite3_exec(db, script.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string reason = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    std::string name = FailingMigration(db, migrations, out.from_version);
    return FailedPrecondition(
        "migration " + (name.empty() ? std::string("of the schema") : name) + " failed: " + reason +
        ". Database " + path + " is unchanged, at schema version " +
        std::to_string(UserVersion(db)) + " (" + ThisBuild() + " needs " +
        std::to_string(out.to_version) + "): the tfslurmd that ran on it before still can" +
        (out.backup_path.empty() ? std::string() : "; a copy is in " + out.backup_path));
  }
  return out;
}

}  // namespace tfslurm::store
