#include "service/store/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

namespace tfslurm::store {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("store-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "t.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  static Changes NewExperiment(const std::string& id, int64_t created, ExperimentState state) {
    Changes c;
    c.create_experiment = true;
    ExperimentRecord e;
    e.id = id;
    e.owner = "alice";
    e.spec_json = "{}";
    e.state = state;
    e.model_dir = "/m/" + id;
    e.created_at = e.updated_at = created;
    c.experiment = e;
    AttemptRecord a;
    a.experiment_id = id;
    a.number = 1;
    a.job_name = "tfx-" + id + "-a1";
    a.sbatch_script = "#!/bin/bash\n";
    c.attempts.push_back(a);
    TaskRecord t;
    t.experiment_id = id;
    t.attempt = 1;
    t.role = "ps";
    c.tasks.push_back(t);
    c.events.push_back({0, id, 1, created, "submitting", "why"});
    return c;
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(StoreTest, PersistsAcrossReopen) {
  {
    auto s = OpenSqliteStore(path_);
    ASSERT_TRUE(s.ok()) << s.status().message();
    ASSERT_TRUE((*s)->Apply(NewExperiment("a", 1, ExperimentState::kRunning)).ok());
  }
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE(s.ok());
  auto e = (*s)->GetExperiment("a");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->owner, "alice");
  EXPECT_EQ(e->state, ExperimentState::kRunning);
  EXPECT_EQ((*s)->ListAttempts("a")->size(), 1u);
  EXPECT_EQ((*s)->ListTasks("a", 1)->size(), 1u);
  EXPECT_EQ((*s)->ListEvents("a", 10)->size(), 1u);
}

TEST_F(StoreTest, CreateOfExistingIdIsAlreadyExistsAndChangesNothing) {
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE((*s)->Apply(NewExperiment("a", 1, ExperimentState::kRunning)).ok());
  Status st = (*s)->Apply(NewExperiment("a", 2, ExperimentState::kQueued));
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ((*s)->GetExperiment("a")->state, ExperimentState::kRunning);
  EXPECT_EQ((*s)->ListEvents("a", 10)->size(), 1u) << "the failed transaction must leave nothing";
}

TEST_F(StoreTest, UpdatingAnExperimentKeepsItsAttempts) {
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE((*s)->Apply(NewExperiment("a", 1, ExperimentState::kRunning)).ok());
  Changes c;
  ExperimentRecord e = *(*s)->GetExperiment("a");
  e.state = ExperimentState::kSucceeded;
  c.experiment = e;
  ASSERT_TRUE((*s)->Apply(c).ok());
  EXPECT_EQ((*s)->ListAttempts("a")->size(), 1u);
  EXPECT_EQ((*s)->ListTasks("a", 1)->size(), 1u);
}

TEST_F(StoreTest, ListFiltersNewestFirstAndPages) {
  auto s = OpenSqliteStore(path_);
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(
        (*s)->Apply(NewExperiment("e" + std::to_string(i), 100 + i,
                                  i % 2 ? ExperimentState::kRunning : ExperimentState::kFailed))
            .ok());
  ListQuery q;
  auto all = (*s)->ListExperiments(q);
  ASSERT_EQ(all->size(), 5u);
  EXPECT_EQ(all->front().id, "e4");
  q.states = {ExperimentState::kRunning};
  auto running = (*s)->ListExperiments(q);
  ASSERT_EQ(running->size(), 2u);
  EXPECT_EQ(running->front().id, "e3");
  EXPECT_EQ(*(*s)->CountExperiments(q), 2);
  ListQuery page;
  page.limit = 2;
  page.offset = 2;
  auto p = (*s)->ListExperiments(page);
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ(p->front().id, "e2");
  EXPECT_EQ((*s)->ListOpenExperiments()->size(), 2u);
}

TEST_F(StoreTest, DeleteRemovesEverything) {
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE((*s)->Apply(NewExperiment("a", 1, ExperimentState::kQueued)).ok());
  Changes c;
  c.delete_experiment = "a";
  ASSERT_TRUE((*s)->Apply(c).ok());
  EXPECT_EQ((*s)->GetExperiment("a").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE((*s)->ListAttempts("a")->empty());
  EXPECT_TRUE((*s)->ListEvents("a", 10)->empty());
}

TEST_F(StoreTest, UsesWalAndRefusesNewerSchema) {
  { ASSERT_TRUE(OpenSqliteStore(path_).ok()); }
  sqlite3* db;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=999", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto s = OpenSqliteStore(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("schema version 999"), std::string::npos)
      << s.status().message();
}

TEST_F(StoreTest, UpgradesAnOlderDatabaseInPlace) {
  // A database at version 1 with data, as an older tfslurmd left it.
  {
    auto s = OpenSqliteStore(path_);
    ASSERT_TRUE((*s)->Apply(NewExperiment("old", 1, ExperimentState::kSucceeded)).ok());
  }
  sqlite3* db;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE tokens; PRAGMA user_version=1", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->GetExperiment("old")->state, ExperimentState::kSucceeded);
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM tokens", -1, &st, nullptr), SQLITE_OK)
      << "migration 2 must have created the tokens table";
  sqlite3_finalize(st);
  sqlite3_close(db);
}

}  // namespace
}  // namespace tfslurm::store
