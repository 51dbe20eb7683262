// The store's upgrade safety (store/sqlite_migrate.h) and its online copies
// (store/sqlite_backup.h), on real SQLite files.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "service/store/sqlite_backup.h"
#include "service/store/sqlite_migrate.h"
#include "tests/unit/test_dir.h"

namespace tfslurm::store {
namespace {

namespace fs = std::filesystem;

class BackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("backup-test");
    path_ = (dir_ / "t.db").string();
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db_), SQLITE_OK);
    Exec("PRAGMA journal_mode=WAL");
  }
  void TearDown() override {
    sqlite3_close(db_);
    fs::remove_all(dir_);
  }
  void Exec(const std::string& sql) {
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << err;
  }
  static int64_t Int(sqlite3* db, const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
      v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
  }
  bool HasTable(const std::string& name) {
    return Int(db_, "SELECT count(*) FROM sqlite_master WHERE name='" + name + "'") == 1;
  }
  std::vector<fs::path> Copies() {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().rfind("t.db.schema-", 0) == 0) out.push_back(e.path());
    return out;
  }

  fs::path dir_;
  std::string path_;
  sqlite3* db_ = nullptr;
};

const std::vector<Migration> kThree = {
    {1, "0001_a.sql", "CREATE TABLE a (x INTEGER);"},
    {2, "0002_b.sql", "CREATE TABLE b (x INTEGER);"},
    {3, "0003_c.sql", "CREATE TABLE c (x INTEGER);"},
};

TEST_F(BackupTest, MigratesANewDatabaseWithoutACopy) {
  auto out = MigrateSchema(db_, path_, kThree);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->from_version, 0);
  EXPECT_EQ(out->to_version, 3);
  EXPECT_TRUE(out->backup_path.empty());
  EXPECT_EQ(Int(db_, "PRAGMA user_version"), 3);
  EXPECT_TRUE(HasTable("c"));
  EXPECT_TRUE(Copies().empty());
}

TEST_F(BackupTest, CopiesTheDatabaseBeforeMigratingIt) {
  ASSERT_TRUE(MigrateSchema(db_, path_, {kThree[0]}).ok());
  Exec("INSERT INTO a VALUES (42)");
  auto out = MigrateSchema(db_, path_, kThree);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->from_version, 1);
  ASSERT_EQ(Copies().size(), 1u);
  EXPECT_EQ(Copies()[0].string(), out->backup_path);
  sqlite3* copy = nullptr;
  ASSERT_EQ(sqlite3_open_v2(out->backup_path.c_str(), &copy, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  EXPECT_EQ(Int(copy, "PRAGMA user_version"), 1) << "the copy is the database as it was";
  EXPECT_EQ(Int(copy, "SELECT x FROM a"), 42);
  EXPECT_EQ(Int(copy, "SELECT count(*) FROM sqlite_master WHERE name='b'"), 0);
  sqlite3_close(copy);
}

TEST_F(BackupTest, AFailedMigrationLeavesTheDatabaseAsItWas) {
  ASSERT_TRUE(MigrateSchema(db_, path_, {kThree[0]}).ok());
  // 2 would succeed on its own; 3 fails: neither may stay.
  std::vector<Migration> broken = {
      kThree[0], kThree[1], {3, "0003_bad.sql", "CREATE TABLE a (y);"}};
  auto out = MigrateSchema(db_, path_, broken);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kFailedPrecondition);
  const std::string& m = out.status().message();
  EXPECT_NE(m.find("migration 0003_bad.sql failed: table a already exists"), std::string::npos)
      << m;
  EXPECT_NE(m.find("unchanged, at schema version 1"), std::string::npos) << m;
  EXPECT_NE(m.find("a copy is in " + path_ + ".schema-1."), std::string::npos) << m;
  EXPECT_EQ(Int(db_, "PRAGMA user_version"), 1);
  EXPECT_FALSE(HasTable("b")) << "migration 2 must be rolled back with 3";
  EXPECT_FALSE(Int(db_, "SELECT 1 FROM sqlite_master WHERE type='table' AND sql LIKE '%(y)%'") ==
               1);
}

TEST_F(BackupTest, RefusesADatabaseNewerThanItsMigrationsNamingBoth) {
  Exec("PRAGMA user_version=7");
  auto out = MigrateSchema(db_, path_, kThree);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(out.status().message().find("has schema version 7, newer than this tfslurmd ("),
            std::string::npos)
      << out.status().message();
  EXPECT_NE(out.status().message().find(") knows (3)"), std::string::npos)
      << out.status().message();
  EXPECT_EQ(Int(db_, "PRAGMA user_version"), 7);
  EXPECT_TRUE(Copies().empty());
}

TEST_F(BackupTest, BackupIsConsistentWhileAnotherConnectionWrites) {
  Exec("CREATE TABLE rows (n INTEGER, pad TEXT); PRAGMA user_version=5");
  // A writer commits a pair of rows per transaction, as fast as it can:
  // a copy of one moment holds an even count.
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    sqlite3* w = nullptr;
    sqlite3_open(path_.c_str(), &w);
    sqlite3_busy_timeout(w, 5000);
    for (int i = 0; !stop; ++i) {
      sqlite3_exec(w,
                   "BEGIN IMMEDIATE; INSERT INTO rows VALUES (1, hex(randomblob(500)));"
                   "INSERT INTO rows VALUES (2, hex(randomblob(500))); COMMIT;",
                   nullptr, nullptr, nullptr);
    }
    sqlite3_close(w);
  });
  while (Int(db_, "SELECT count(*) FROM rows") < 2000) std::this_thread::yield();
  std::vector<std::string> copies;
  for (int i = 0; i < 3; ++i) {
    copies.push_back((dir_ / ("copy" + std::to_string(i) + ".db")).string());
    auto info = BackupDatabase(path_, copies.back());
    ASSERT_TRUE(info.ok()) << info.status().message();
    EXPECT_EQ(info->schema_version, 5);
    EXPECT_GT(info->pages, 0);
  }
  stop = true;
  writer.join();
  for (const std::string& c : copies) {
    sqlite3* copy = nullptr;
    ASSERT_EQ(sqlite3_open_v2(c.c_str(), &copy, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    int64_t n = Int(copy, "SELECT count(*) FROM rows");
    EXPECT_GT(n, 0);
    EXPECT_EQ(n % 2, 0) << c << " holds half a transaction";
    EXPECT_EQ(Int(copy, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check='ok'"),
              1);
    sqlite3_close(copy);
    EXPECT_FALSE(fs::exists(c + "-wal")) << "the copy is one file";
  }
}

TEST_F(BackupTest, BackupRefusesToOverwriteOrToCopyOntoTheDatabase) {
  Exec("CREATE TABLE t (x)");
  std::string to = (dir_ / "c.db").string();
  ASSERT_TRUE(BackupDatabase(path_, to).ok());
  auto again = BackupDatabase(path_, to);
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists) << again.status().message();
  auto onto = BackupDatabase(path_, path_);
  EXPECT_EQ(onto.status().code(), StatusCode::kInvalidArgument) << onto.status().message();
  // Named like the database's own files, existing or not.
  for (const char* suffix : {"-wal", "-journal", ".lock"}) {
    auto own = BackupDatabase(path_, path_ + suffix);
    EXPECT_EQ(own.status().code(), StatusCode::kInvalidArgument) << suffix;
  }
  auto missing = BackupDatabase((dir_ / "none.db").string(), (dir_ / "x.db").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().message();
  EXPECT_FALSE(fs::exists(dir_ / "none.db")) << "a backup never creates the database";
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().string().find(".partial-"), std::string::npos) << e.path();
}

}  // namespace
}  // namespace tfslurm::store
