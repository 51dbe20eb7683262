// SQLite implementation of Store. One connection guarded by a mutex: SQLite
// serializes writers anyway, and a single connection keeps prepared
// statements simple. WAL lets a reader (sqlite3 CLI, a backup) look while
// the service writes. It caches nothing of what it holds: every read
// reads the database (the API's cache of lists, api/list_cache.h, follows
// core's commits instead).
//
// Checkpoints (copying the WAL back into the database file, with an fsync)
// run on a thread of their own, with its own connection: SQLite's automatic
// checkpoint runs inside the COMMIT that crosses its threshold, and so on
// whichever request thread made that commit.
#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "base/mutex.h"
#include "service/store/migrations.h"
#include "service/store/sqlite_checkpointer.h"
#include "service/store/sqlite_migrate.h"
#include "service/store/sqlite_rows.h"
#include "service/store/sqlite_scalars.h"
#include "service/store/sqlite_spec_revisions.h"
#include "service/store/sqlite_statement.h"
#include "service/store/sqlite_store.h"
#include "service/store/sqlite_sweeps.h"

namespace tfslurm::store {
namespace {

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(sqlite3* db) : db_(db), statements_(std::in_place, db) {}
  ~SqliteStore() override {
    // The checkpointer's connection closes first, so that closing db_, the
    // last connection, checkpoints the whole WAL and removes it.
    checkpointer_.reset();
    statements_.reset();
    sqlite3_close(db_);
  }

  // Hands checkpoints to a thread with its own connection `checkpoint_db`
  // (SQLite's automatic checkpoint is off from here on).
  void StartCheckpointer(sqlite3* checkpoint_db, const SqliteOptions& options)
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    checkpointer_ = std::make_unique<WalCheckpointer>(checkpoint_db, options);
    // Replaces the hook sqlite3_wal_autocheckpoint installs.
    sqlite3_wal_hook(
        db_,
        [](void* checkpointer, sqlite3*, const char*, int pages) {
          static_cast<WalCheckpointer*>(checkpointer)->OnCommit(pages);
          return SQLITE_OK;
        },
        checkpointer_.get());
  }

  // Without mu_: checkpointer_ no longer changes once the store is handed out.
  int64_t CheckpointsForTest() { return checkpointer_ ? checkpointer_->checkpoints() : 0; }

  Status Migrate(const std::string& path) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    // The page cache holds the working set of a large store (SQLite's
    // default of 2 MiB made a list of 1,000 experiments read its pages from
    // the file again on every request); it grows only as pages are read.
    for (const char* pragma :
         {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON",
          "PRAGMA busy_timeout=5000", "PRAGMA cache_size=-65536"}) {
      if (Status s = Exec(pragma); !s.ok()) return s;
    }
    auto migrated = MigrateSchema(db_, path, EmbeddedMigrations());
    if (!migrated.ok()) return migrated.status();
    if (migrated->from_version != migrated->to_version) {
      spdlog::info("database {}: schema version {} -> {}{}", path, migrated->from_version,
                   migrated->to_version,
                   migrated->backup_path.empty()
                       ? std::string(" (a new database)")
                       : "; the database as it was is copied to " + migrated->backup_path);
    }
    return Status::Ok();
  }

  Status ApplyAll(std::span<const Changes> batch) override ABSL_LOCKS_EXCLUDED(mu_) {
    if (std::all_of(batch.begin(), batch.end(), [](const Changes& c) { return c.empty(); }))
      return Status::Ok();
    MutexLock lock(mu_);
    if (Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    for (const Changes& c : batch) {
      if (Status s = ApplyLocked(c); !s.ok()) {
        RollBack();
        return s;
      }
    }
    if (Status s = Exec("COMMIT"); !s.ok()) {
      // A COMMIT that fails may or may not have rolled back; the caller
      // (core) tells its CommitObservers so.
      RollBack();
      return s;
    }
    return Status::Ok();
  }

  StatusOr<ExperimentRecord> GetExperiment(const std::string& id) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    Statement s =
        Prepare(std::string("SELECT ") + kExperimentColumns + " FROM experiments WHERE id=?");
    s.Bind(1, id);
    int rc = s.Step();
    if (rc == SQLITE_ROW) return ReadExperiment(s);
    if (rc == SQLITE_DONE) return NotFound("no experiment with id '" + id + "'");
    return Error("reading experiment");
  }

  StatusOr<std::vector<ListedExperiment>> ListPage(const ListQuery& q,
                                                   const NeedSummary& need) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    // One read transaction, so that the page and its summaries are of one
    // moment even if another process writes between the queries.
    if (Status s = Exec("BEGIN"); !s.ok()) return s;
    auto page = ListPageLocked(q, need);
    // A read: its COMMIT only ends the snapshot, and the page stands either way.
    static_cast<void>(Exec("COMMIT"));
    return page;
  }

  StatusOr<int64_t> CountExperiments(const ListQuery& q) override ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    Statement s = Prepare("SELECT count(*) AS total FROM experiments" + Where(q));
    BindWhere(s, q);
    if (s.Step() != SQLITE_ROW) return Error("counting experiments");
    return s.Int("total");
  }

  StatusOr<std::vector<ExperimentRecord>> ListOpenExperiments() override ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    Statement s = Prepare(std::string("SELECT ") + kExperimentColumns +
                          " FROM experiments WHERE state NOT IN ('succeeded','failed','cancelled')"
                          " ORDER BY created_at");
    std::vector<ExperimentRecord> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      auto row = ReadExperiment(s);
      if (!row.ok()) return row.status();
      out.push_back(std::move(row).value());
    }
    if (rc != SQLITE_DONE) return Error("listing open experiments");
    return out;
  }

  StatusOr<std::vector<std::string>> ListEndedBefore(int64_t before_ms, int limit) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    Statement s = Prepare(
        "SELECT id FROM experiments WHERE state IN ('succeeded','failed','cancelled') AND "
        "updated_at < ? ORDER BY updated_at LIMIT ?");
    s.Bind(1, before_ms).Bind(2, limit);
    std::vector<std::string> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) out.push_back(s.Text("id"));
    if (rc != SQLITE_DONE) return Error("listing ended experiments");
    return out;
  }

  StatusOr<std::vector<AttemptRecord>> ListAttempts(const std::string& id) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    Statement s = Prepare(std::string("SELECT ") + kAttemptColumns +
                          " FROM attempts WHERE experiment_id=? ORDER BY number");
    s.Bind(1, id);
    std::vector<AttemptRecord> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      auto row = ReadAttempt(s);
      if (!row.ok()) return row.status();
      out.push_back(std::move(row).value());
    }
    if (rc != SQLITE_DONE) return Error("listing attempts");
    return out;
  }

  StatusOr<std::vector<TaskRecord>> ListTasks(const std::string& id, int attempt) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    Statement s = Prepare(std::string("SELECT ") + kTaskColumns +
                          " FROM tasks WHERE experiment_id=? AND attempt=? ORDER BY task_index");
    s.Bind(1, id).Bind(2, attempt);
    std::vector<TaskRecord> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      auto row = ReadTask(s);
      if (!row.ok()) return row.status();
      out.push_back(std::move(row).value());
    }
    if (rc != SQLITE_DONE) return Error("listing tasks");
    return out;
  }

  StatusOr<TaskPageRows> ListTaskPage(const std::string& id, int attempt,
                                      const TaskQuery& query) override ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    TaskPageRows out;
    // From the index tasks_by_role_state alone.
    Statement counts = Prepare(
        "SELECT role, state, count(*) AS tasks FROM tasks WHERE experiment_id=? AND attempt=? "
        "GROUP BY role, state");
    counts.Bind(1, id).Bind(2, attempt);
    int rc;
    while ((rc = counts.Step()) == SQLITE_ROW) {
      TaskState state;
      TFSLURM_ASSIGN_OR_RETURN(
          state, StoredName(kTaskStateNames, counts.Text("state"), "task state",
                            "experiment " + id + ", attempt " + std::to_string(attempt)));
      const int n = static_cast<int>(counts.Int("tasks"));
      out.counts.push_back({counts.Text("role"), state, n});
      if (!query.state || *query.state == state) out.total += n;
    }
    if (rc != SQLITE_DONE) return Error("counting tasks");
    Statement s = Prepare(
        std::string("SELECT ") + kTaskColumns + " FROM tasks WHERE experiment_id=? AND attempt=?" +
        (query.state ? " AND state=?" : "") + " ORDER BY task_index LIMIT ? OFFSET ?");
    s.Bind(1, id).Bind(2, attempt);
    const int next = query.state ? 4 : 3;  // the index of LIMIT's placeholder
    if (query.state) s.Bind(3, TaskStateName(*query.state));
    s.Bind(next, query.limit < 0 ? int64_t{-1} : query.limit).Bind(next + 1, query.offset);
    while ((rc = s.Step()) == SQLITE_ROW) {
      auto row = ReadTask(s);
      if (!row.ok()) return row.status();
      out.tasks.push_back(std::move(row).value());
    }
    if (rc != SQLITE_DONE) return Error("listing tasks");
    return out;
  }

  StatusOr<std::vector<SpecRevisionRecord>> ListSpecRevisions(const std::string& id) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    return ReadSpecRevisions(*statements_, id);
  }

  StatusOr<std::vector<EventRecord>> ListEvents(const std::string& id, int limit) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    Statement s = Prepare(std::string("SELECT ") + kEventColumns +
                          " FROM (SELECT * FROM events WHERE experiment_id=? ORDER BY id DESC "
                          "LIMIT ?) ORDER BY id");
    s.Bind(1, id).Bind(2, limit);
    std::vector<EventRecord> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      auto row = ReadEvent(s);
      if (!row.ok()) return row.status();
      out.push_back(std::move(row).value());
    }
    if (rc != SQLITE_DONE) return Error("listing events");
    return out;
  }

  StatusOr<SweepRecord> GetSweep(const std::string& id) override ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    return ReadSweep(*statements_, id);
  }
  StatusOr<std::vector<SweepRecord>> ListSweeps(const SweepQuery& q) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    return ReadSweeps(*statements_, q);
  }
  StatusOr<std::vector<SweepTrialRecord>> ListSweepTrials(const std::string& id) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    return ReadSweepTrials(*statements_, id);
  }
  StatusOr<std::vector<std::pair<std::string, int64_t>>> CountTrialsByEndReason() override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    return CountEndedTrials(*statements_);
  }

  StatusOr<AppendedScalars> AppendScalars(const std::string& experiment_id, int attempt,
                                          std::span<const ScalarPoint> points,
                                          const ScalarLimits& limits) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    if (points.empty()) return AppendedScalars{};
    MutexLock lock(mu_);
    if (Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    auto appended =
        AppendScalarsInTransaction(*statements_, experiment_id, attempt, points, limits);
    if (!appended.ok()) {
      RollBack();
      return appended;
    }
    if (Status s = Exec("COMMIT"); !s.ok()) {
      RollBack();
      return s;
    }
    return appended;
  }

  StatusOr<std::vector<ScalarSeries>> ReadScalars(const std::string& experiment_id,
                                                  const std::vector<std::string>& tags) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    return ReadScalarSeries(*statements_, experiment_id, tags);
  }

  StatusOr<std::vector<std::string>> ListScalarTags(const std::string& experiment_id) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    return ReadScalarTags(*statements_, experiment_id);
  }

  Status PutToken(const TokenRecord& t) override ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    Statement s = Prepare("INSERT INTO tokens (sha256, user, admin, created_at) VALUES (?,?,?,?)");
    s.Bind(1, t.sha256).Bind(2, t.user).Bind(3, t.admin ? 1 : 0).Bind(4, t.created_at);
    if (s.Step() != SQLITE_DONE) return Error("writing token");
    return Status::Ok();
  }

  StatusOr<TokenRecord> GetToken(const std::string& sha256) override ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(mu_);
    Statement s = Prepare(std::string("SELECT ") + kTokenColumns + " FROM tokens WHERE sha256=?");
    s.Bind(1, sha256);
    int rc = s.Step();
    if (rc == SQLITE_DONE) return NotFound("unknown token");
    if (rc != SQLITE_ROW) return Error("reading token");
    return ReadToken(s);
  }

 private:
  StatusOr<std::vector<ListedExperiment>> ListPageLocked(const ListQuery& q,
                                                         const NeedSummary& need)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // The page's ids from the index alone; then the summaries asked for,
    // each with its current attempt; then the task counts of the open ones
    // among them: at most three queries whatever the page size.
    Statement page = Prepare("SELECT e.id AS id FROM experiments e" + Where(q, "e.") +
                             " ORDER BY e.created_at DESC, e.id DESC LIMIT ? OFFSET ?");
    int n = BindWhere(page, q);
    page.Bind(n, q.limit).Bind(n + 1, q.offset);
    std::vector<ListedExperiment> out;
    std::unordered_map<std::string, size_t> needed;  // by id: the place in out
    nlohmann::json needed_ids = nlohmann::json::array();
    int rc;
    while ((rc = page.Step()) == SQLITE_ROW) {
      ListedExperiment listed;
      listed.id = page.Text("id");
      if (need(listed.id)) {
        needed.emplace(listed.id, out.size());
        needed_ids.push_back(listed.id);
      }
      out.push_back(std::move(listed));
    }
    if (rc != SQLITE_DONE) return Error("listing experiments");
    if (needed.empty()) return out;

    Statement s =
        Prepare(std::string("SELECT ") + kSummaryColumns +
                " FROM experiments e LEFT JOIN attempts a ON a.experiment_id = e.id AND "
                "a.number = e.current_attempt WHERE e.id IN (SELECT value FROM json_each(?))");
    s.Bind(1, needed_ids.dump());
    nlohmann::json open_ids = nlohmann::json::array();  // whose tasks a list counts
    while ((rc = s.Step()) == SQLITE_ROW) {
      auto read = ReadSummary(s);
      if (!read.ok()) return read.status();
      ExperimentSummary summary = std::move(read).value();
      if (!IsTerminal(summary.experiment.state)) open_ids.push_back(summary.experiment.id);
      out[needed.at(summary.experiment.id)].summary = std::move(summary);
    }
    if (rc != SQLITE_DONE) return Error("listing experiments");
    if (open_ids.empty()) return out;

    // The current attempt's tasks of the open ones, counted by role and
    // state (from the index tasks_by_role_state alone), in one query.
    Statement counts = Prepare(
        "SELECT t.experiment_id AS experiment_id, t.role AS role, t.state AS state, count(*) AS "
        "tasks FROM experiments e JOIN tasks t ON t.experiment_id = e.id AND t.attempt = "
        "e.current_attempt WHERE e.id IN (SELECT value FROM json_each(?)) GROUP BY "
        "t.experiment_id, t.role, t.state");
    counts.Bind(1, open_ids.dump());
    while ((rc = counts.Step()) == SQLITE_ROW) {
      auto& summary = out[needed.at(counts.Text("experiment_id"))].summary;
      auto state = StoredName(kTaskStateNames, counts.Text("state"), "task state",
                              "a task of " + counts.Text("experiment_id"));
      if (!state.ok()) return state.status();
      summary->task_counts.push_back(
          {counts.Text("role"), *state, static_cast<int>(counts.Int("tasks"))});
    }
    if (rc != SQLITE_DONE) return Error("counting tasks");
    return out;
  }

  Status ApplyLocked(const Changes& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (c.delete_experiment) {
      // Foreign keys cascade to attempts, tasks and events.
      Statement s = Prepare("DELETE FROM experiments WHERE id=?");
      s.Bind(1, *c.delete_experiment);
      if (s.Step() != SQLITE_DONE) return Error("deleting experiment");
    }
    if (c.experiment) {
      const ExperimentRecord& e = *c.experiment;
      // An upsert, not REPLACE: REPLACE deletes first, cascading to attempts.
      std::string sql = std::string("INSERT INTO experiments (") + kExperimentColumns +
                        ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
      if (!c.create_experiment)
        sql +=
            " ON CONFLICT(id) DO UPDATE SET owner=excluded.owner, spec=excluded.spec, "
            "state=excluded.state, reason=excluded.reason, "
            "current_attempt=excluded.current_attempt, "
            "restarts=excluded.restarts, model_dir=excluded.model_dir, "
            "mem_per_task_mb=excluded.mem_per_task_mb, mem_explanation=excluded.mem_explanation, "
            "checkpoint_step=excluded.checkpoint_step, checkpoint_path=excluded.checkpoint_path, "
            "updated_at=excluded.updated_at, next_attempt_at=excluded.next_attempt_at, "
            "excluded_nodes=excluded.excluded_nodes, spec_revision=excluded.spec_revision";
      Statement s = Prepare(sql);
      s.Bind(1, e.id)
          .Bind(2, e.owner)
          .Bind(3, e.spec_json)
          .Bind(4, std::string(ExperimentStateName(e.state)));
      s.Bind(5, e.reason).Bind(6, e.current_attempt).Bind(7, e.restarts).Bind(8, e.model_dir);
      s.Bind(9, e.mem_per_task_mb).Bind(10, e.mem_explanation).Bind(11, e.checkpoint_step);
      s.Bind(12, e.checkpoint_path)
          .Bind(13, e.created_at)
          .Bind(14, e.updated_at)
          .Bind(15, e.next_attempt_at);
      std::string excluded;
      for (const std::string& node : e.excluded_nodes)
        excluded += (excluded.empty() ? "" : ",") + node;
      s.Bind(16, excluded).Bind(17, e.spec_revision);
      int rc = s.Step();
      if (rc == SQLITE_CONSTRAINT && c.create_experiment)
        return {StatusCode::kAlreadyExists, "an experiment with id '" + e.id + "' exists"};
      if (rc != SQLITE_DONE) return Error("writing experiment");
    }
    for (const AttemptRecord& a : c.attempts) {
      // Upsert rather than REPLACE: REPLACE deletes the row first, which would
      // cascade to the attempt's tasks.
      Statement s = Prepare(
          "INSERT INTO attempts (experiment_id, number, secret_sha256, job_name, slurm_job_id, "
          "state, "
          "slurm_state, end_reason, reason, nodes, sbatch_script, start_step, exit_code, "
          "submitted_at, started_at, ended_at, in_place, spec_revision, node_slots) "
          "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON "
          "CONFLICT(experiment_id, "
          "number) DO UPDATE SET secret_sha256=excluded.secret_sha256, job_name=excluded.job_name, "
          "slurm_job_id=excluded.slurm_job_id, state=excluded.state, "
          "slurm_state=excluded.slurm_state, "
          "end_reason=excluded.end_reason, reason=excluded.reason, nodes=excluded.nodes, "
          "sbatch_script=excluded.sbatch_script, start_step=excluded.start_step, "
          "exit_code=excluded.exit_code, submitted_at=excluded.submitted_at, "
          "started_at=excluded.started_at, ended_at=excluded.ended_at, "
          "in_place=excluded.in_place, spec_revision=excluded.spec_revision, "
          "node_slots=excluded.node_slots");
      s.Bind(1, a.experiment_id).Bind(2, a.number).Bind(3, a.secret_sha256).Bind(4, a.job_name);
      s.Bind(5, a.slurm_job_id).Bind(6, AttemptStateName(a.state)).Bind(7, a.slurm_state);
      s.Bind(8, a.end_reason ? EndReasonName(*a.end_reason) : "");
      s.Bind(9, a.reason).Bind(10, a.nodes).Bind(11, a.sbatch_script).Bind(12, a.start_step);
      s.Bind(13, a.exit_code).Bind(14, a.submitted_at).Bind(15, a.started_at).Bind(16, a.ended_at);
      s.Bind(17, a.in_place ? 1 : 0).Bind(18, a.spec_revision).Bind(19, a.node_slots.ToText());
      if (s.Step() != SQLITE_DONE) return Error("writing attempt");
    }
    for (const TaskRecord& t : c.tasks)
      if (Status s = WriteTask(*statements_, t); !s.ok()) return s;
    for (const SpecRevisionRecord& r : c.spec_revisions)
      if (Status s = InsertSpecRevision(*statements_, r); !s.ok()) return s;
    if (Status s = WriteSweepChanges(*statements_, c); !s.ok()) return s;
    for (const EventRecord& ev : c.events)
      if (Status s = WriteEvent(*statements_, ev); !s.ok()) return s;
    return Status::Ok();
  }

  // `table` prefixes the columns ("e.") when the query joins other tables.
  static std::string Where(const ListQuery& q, const std::string& table = "") {
    std::string where;
    if (!q.states.empty()) {
      where += " WHERE " + table + "state IN (";
      for (size_t i = 0; i < q.states.size(); ++i) where += i ? ",?" : "?";
      where += ")";
    }
    if (!q.owner.empty()) where += (where.empty() ? " WHERE " : " AND ") + table + "owner=?";
    return where;
  }

  static int BindWhere(Statement& s, const ListQuery& q) {
    int n = 1;
    for (ExperimentState st : q.states) s.Bind(n++, std::string(ExperimentStateName(st)));
    if (!q.owner.empty()) s.Bind(n++, q.owner);
    return n;
  }

  Statement Prepare(const std::string& sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return statements_->Prepare(sql);
  }

  // After a failure inside a transaction, whose own error is what the caller
  // gets: a ROLLBACK that fails too (none is open, as after a COMMIT that
  // rolled back itself) leaves nothing more to undo.
  void RollBack() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { static_cast<void>(Exec("ROLLBACK")); }

  Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      return Unavailable("database: " + msg);
    }
    return Status::Ok();
  }

  Status Error(const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return statements_->Error(what);
  }

  Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  // An optional only so that the destructor finalizes them before closing db_.
  std::optional<StatementCache> statements_ ABSL_GUARDED_BY(mu_);
  // Not guarded: set once (StartCheckpointer, under mu_ for db_'s WAL hook)
  // by OpenSqliteStore before the store is handed out, and reset only by the
  // destructor; read without mu_ in between. The WalCheckpointer is
  // thread-safe itself.
  std::unique_ptr<WalCheckpointer> checkpointer_;
};

}  // namespace

namespace {

StatusOr<sqlite3*> OpenConnection(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Unavailable("cannot open database " + path + ": " + msg);
  }
  return db;
}

}  // namespace

StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                                 const SqliteOptions& options) {
  auto db = OpenConnection(path);
  if (!db.ok()) return db.status();
  auto store = std::make_unique<SqliteStore>(*db);
  if (Status s = store->Migrate(path); !s.ok()) return s;
  auto checkpoint_db = OpenConnection(path);
  if (!checkpoint_db.ok()) return checkpoint_db.status();
  sqlite3_busy_timeout(*checkpoint_db, 5000);
  store->StartCheckpointer(*checkpoint_db, options);
  return std::unique_ptr<Store>(std::move(store));
}

int64_t WalCheckpointsForTest(Store& store) {
  auto* sqlite = dynamic_cast<SqliteStore*>(&store);
  return sqlite ? sqlite->CheckpointsForTest() : 0;
}

}  // namespace tfslurm::store
