#include "service/store/sqlite_backup.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace tfslurm::store {
namespace {

std::string Reason(sqlite3* db) { return db ? sqlite3_errmsg(db) : "out of memory"; }

Status Exists(const std::string& path) {
  return {StatusCode::kAlreadyExists, path + " exists; name another file, or remove it first"};
}

// fsync(2) of a file or a directory: the copy's bytes, then its name.
Status Sync(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Unavailable("cannot open " + path + " to sync it: " + strerror(errno));
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0) return Unavailable("cannot sync " + path + ": " + strerror(err));
  return Status::Ok();
}

// One row of a one-column PRAGMA, as text ("" when there is none).
std::string PragmaText(sqlite3* db, const char* pragma) {
  sqlite3_stmt* s = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db, pragma, -1, &s, nullptr) == SQLITE_OK &&
      sqlite3_step(s) == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(s, 0);
    if (text) out = reinterpret_cast<const char*>(text);
  }
  sqlite3_finalize(s);
  return out;
}

// Every page of src's main database into dest's, in one step: one read
// transaction of src, so the copy is one moment of it. A writer of a
// database not in WAL mode can hold it off; that is waited for, 30 s at most.
Status CopyPages(sqlite3* src, sqlite3* dest, const std::string& to, BackupInfo* info) {
  sqlite3_backup* backup = sqlite3_backup_init(dest, "main", src, "main");
  if (!backup) return Unavailable("cannot start the backup into " + to + ": " + Reason(dest));
  int rc = SQLITE_OK;
  for (int waited_ms = 0;; waited_ms += 50) {
    rc = sqlite3_backup_step(backup, -1);
    if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || waited_ms >= 30000) break;
    sqlite3_sleep(50);
  }
  info->pages = sqlite3_backup_pagecount(backup);
  sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE)
    return Unavailable("cannot copy the database into " + to + ": " + sqlite3_errstr(rc));
  return Status::Ok();
}

// The copy, made a database of its own: one file (rollback journal, not
// WAL), checked whole, its schema version read.
Status FinishCopy(sqlite3* dest, const std::string& to, BackupInfo* info) {
  if (PragmaText(dest, "PRAGMA journal_mode=DELETE") != "delete")
    return Unavailable("cannot make the copy " + to + " a single file: " + Reason(dest));
  std::string check = PragmaText(dest, "PRAGMA integrity_check");
  if (check != "ok")
    return Internal("the copy " + to +
                    " fails PRAGMA integrity_check: " + (check.empty() ? Reason(dest) : check));
  info->schema_version = std::atoll(PragmaText(dest, "PRAGMA user_version").c_str());
  return Status::Ok();
}

// Gives the finished copy its name, unless that name was taken meanwhile
// (link(2) does not replace), and makes the name durable.
Status Publish(const std::string& temp, const std::string& to) {
  if (link(temp.c_str(), to.c_str()) != 0) {
    int err = errno;
    if (err == EEXIST) return Exists(to);
    return Unavailable("cannot create " + to + ": " + strerror(err));
  }
  unlink(temp.c_str());
  std::string dir = std::filesystem::path(to).parent_path().string();
  return Sync(dir.empty() ? "." : dir);
}

}  // namespace

StatusOr<BackupInfo> BackupConnection(sqlite3* db, const std::string& to_path) {
  struct stat st;
  if (lstat(to_path.c_str(), &st) == 0) return Exists(to_path);
  const std::string temp = to_path + ".partial-" + std::to_string(getpid());
  unlink(temp.c_str());  // a partial copy a crashed run with this pid left
  sqlite3* dest = nullptr;
  BackupInfo info;
  Status s = Status::Ok();
  if (sqlite3_open_v2(temp.c_str(), &dest, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    s = Unavailable("cannot create " + temp + ": " + Reason(dest));
  }
  if (s.ok()) s = CopyPages(db, dest, to_path, &info);
  if (s.ok()) s = FinishCopy(dest, to_path, &info);
  sqlite3_close(dest);
  if (s.ok()) s = Sync(temp);
  if (s.ok()) {
    if (lstat(temp.c_str(), &st) == 0) info.bytes = st.st_size;
    s = Publish(temp, to_path);
  }
  if (!s.ok()) {
    unlink(temp.c_str());
    return s;
  }
  return info;
}

StatusOr<BackupInfo> BackupDatabase(const std::string& db_path, const std::string& to_path) {
  struct stat st;
  if (stat(db_path.c_str(), &st) != 0)
    return NotFound("no database at " + db_path + ": " + strerror(errno));
  // By name too: a copy named like the database's WAL would be taken for it.
  std::error_code ec;
  const auto to = std::filesystem::weakly_canonical(to_path, ec);
  for (const char* suffix : {"", "-wal", "-shm", "-journal", ".lock"}) {
    if (std::filesystem::equivalent(db_path + suffix, to_path, ec) ||
        std::filesystem::weakly_canonical(db_path + suffix, ec) == to)
      return InvalidArgument("--to " + to_path + " is the database's own file " + db_path + suffix +
                             "; name a new file");
  }
  // Read-only: the copy never changes the database, and a read-only
  // connection never checkpoints its WAL when it closes.
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::string reason = Reason(db);
    sqlite3_close(db);
    return Unavailable("cannot open database " + db_path + ": " + reason);
  }
  sqlite3_busy_timeout(db, 5000);
  auto info = BackupConnection(db, to_path);
  sqlite3_close(db);
  return info;
}

}  // namespace tfslurm::store
