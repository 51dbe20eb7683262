// SQLite implementation of Store. One connection guarded by a mutex: SQLite
// serializes writers anyway, and a single connection keeps prepared
// statements simple. WAL lets a reader (sqlite3 CLI, a backup) look while
// the service writes.
//
// Checkpoints (copying the WAL back into the database file, with an fsync)
// run on a thread of their own, with its own connection: SQLite's automatic
// checkpoint runs inside the COMMIT that crosses its threshold, and so on
// whichever request thread made that commit.
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "service/store/migrations.h"
#include "service/store/store.h"

namespace tfslurm::store {
namespace {

// RAII for one prepared statement, with typed binding and reading.
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~Statement() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }
  template <typename T>
  Statement& Bind(int i, const std::optional<T>& v) {
    if (v) return Bind(i, static_cast<int64_t>(*v));
    sqlite3_bind_null(stmt_, i);
    return *this;
  }

  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(stmt_); }

  std::string Text(int col) {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, sqlite3_column_bytes(stmt_, col)) : std::string();
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  std::optional<int64_t> OptInt(int col) {
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
    return Int(col);
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

constexpr const char* kExperimentColumns =
    "id, owner, spec, state, reason, current_attempt, restarts, model_dir, mem_per_task_mb, "
    "mem_explanation, checkpoint_step, checkpoint_path, created_at, updated_at, next_attempt_at";

// The list's columns: an experiment's without its spec (a list never shows
// it), then its current attempt's, from `attempts a`.
constexpr const char* kSummaryColumns =
    "e.id, e.owner, '', e.state, e.reason, e.current_attempt, e.restarts, e.model_dir, "
    "e.mem_per_task_mb, e.mem_explanation, e.checkpoint_step, e.checkpoint_path, e.created_at, "
    "e.updated_at, e.next_attempt_at, a.number, a.slurm_job_id, a.nodes, a.slurm_state";
constexpr int kSummaryAttemptColumn = 15;

ExperimentRecord ReadExperiment(Statement& s) {
  ExperimentRecord e;
  e.id = s.Text(0);
  e.owner = s.Text(1);
  e.spec_json = s.Text(2);
  e.state = ParseExperimentState(s.Text(3)).value_or(ExperimentState::kFailed);
  e.reason = s.Text(4);
  e.current_attempt = static_cast<int>(s.Int(5));
  e.restarts = static_cast<int>(s.Int(6));
  e.model_dir = s.Text(7);
  e.mem_per_task_mb = s.Int(8);
  e.mem_explanation = s.Text(9);
  e.checkpoint_step = s.OptInt(10);
  e.checkpoint_path = s.Text(11);
  e.created_at = s.Int(12);
  e.updated_at = s.Int(13);
  e.next_attempt_at = s.Int(14);
  return e;
}

// PASSIVE checkpoints on a thread of its own: when a commit leaves the WAL
// at checkpoint_wal_pages or more, and every checkpoint_interval while the
// WAL has commits not yet checkpointed. A PASSIVE checkpoint never blocks
// the serving connection: it copies what no reader still needs and leaves
// the rest for the next one. Thread-safe: OnCommit is called by the serving connection's
// WAL hook, under the store's mutex.
class WalCheckpointer {
 public:
  // Takes ownership of `db`, a connection of its own to the database.
  WalCheckpointer(sqlite3* db, const SqliteOptions& options)
      : db_(db), options_(options), thread_([this] { Run(); }) {}
  ~WalCheckpointer() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
    sqlite3_close(db_);
  }
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  // A commit left `wal_pages` pages in the WAL.
  void OnCommit(int wal_pages) {
    bool wake;
    {
      std::lock_guard lock(mu_);
      wal_pages_ = wal_pages;
      // Fewer pages than checkpointed: the WAL started over from its head.
      if (wal_pages_ < checkpointed_pages_) checkpointed_pages_ = 0;
      wake = wal_pages_ - checkpointed_pages_ >= options_.checkpoint_wal_pages;
    }
    if (wake) wake_.notify_one();
  }

  int64_t checkpoints() {
    std::lock_guard lock(mu_);
    return checkpoints_;
  }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      wake_.wait_for(lock, options_.checkpoint_interval, [this] {
        return stop_ || wal_pages_ - checkpointed_pages_ >= options_.checkpoint_wal_pages;
      });
      if (stop_ || wal_pages_ == checkpointed_pages_) continue;
      // Counted as checkpointed now: pages the checkpoint leaves behind (a
      // reader still needs them) wait for the next one.
      checkpointed_pages_ = wal_pages_;
      lock.unlock();
      // SQLITE_BUSY (another checkpoint running, e.g. a sqlite3 CLI's) is
      // not an error: the next commit or interval tries again.
      sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      lock.lock();
      ++checkpoints_;
    }
  }

  sqlite3* const db_;
  const SqliteOptions options_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  int wal_pages_ = 0;           // in the WAL after the last commit
  int checkpointed_pages_ = 0;  // in the WAL when the last checkpoint began
  int64_t checkpoints_ = 0;
  std::thread thread_;  // last: started once the members above exist
};

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(sqlite3* db) : db_(db) {}
  ~SqliteStore() override {
    // The checkpointer's connection closes first, so that closing db_, the
    // last connection, checkpoints the whole WAL and removes it.
    checkpointer_.reset();
    for (auto& [_, stmt] : statements_) sqlite3_finalize(stmt);
    sqlite3_close(db_);
  }

  // Hands checkpoints to a thread with its own connection `checkpoint_db`
  // (SQLite's automatic checkpoint is off from here on).
  void StartCheckpointer(sqlite3* checkpoint_db, const SqliteOptions& options) {
    std::lock_guard lock(mu_);
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

  int64_t CheckpointsForTest() { return checkpointer_ ? checkpointer_->checkpoints() : 0; }

  Status Migrate(const std::string& path) {
    std::lock_guard lock(mu_);
    // The page cache holds the working set of a large store (SQLite's
    // default of 2 MiB made a list of 1,000 experiments read its pages from
    // the file again on every request); it grows only as pages are read.
    for (const char* pragma :
         {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON",
          "PRAGMA busy_timeout=5000", "PRAGMA cache_size=-65536"}) {
      if (Status s = Exec(pragma); !s.ok()) return s;
    }
    int64_t current = 0;
    {
      Statement s = Prepare("PRAGMA user_version");
      if (s.Step() == SQLITE_ROW) current = s.Int(0);
    }
    const auto& migrations = EmbeddedMigrations();
    int latest = migrations.empty() ? 0 : migrations.back().version;
    if (current > latest) {
      return FailedPrecondition("database " + path + " has schema version " +
                                std::to_string(current) + ", newer than this tfslurmd knows (" +
                                std::to_string(latest) +
                                "); run a newer tfslurmd, or restore a backup taken before the "
                                "upgrade");
    }
    for (const Migration& m : migrations) {
      if (m.version <= current) continue;
      // Each migration and its version bump commit together, so a crash
      // leaves the database at one version or the next.
      std::string sql = std::string("BEGIN IMMEDIATE;\n") + m.sql +
                        "\nPRAGMA user_version=" + std::to_string(m.version) + ";\nCOMMIT;";
      if (Status s = Exec(sql.c_str()); !s.ok()) {
        Exec("ROLLBACK");
        return Internal(std::string("migration ") + m.name + " failed: " + s.message());
      }
    }
    return Status::Ok();
  }

  Status ApplyAll(std::span<const Changes> batch) override {
    if (std::all_of(batch.begin(), batch.end(), [](const Changes& c) { return c.empty(); }))
      return Status::Ok();
    std::lock_guard lock(mu_);
    if (Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    // Judged against the counts from before the batch: a set that a
    // former one makes look changed counts as changed, which only costs a
    // list computed again.
    std::vector<bool> listed;
    for (const Changes& c : batch) listed.push_back(ChangesWhatListsShow(c));
    for (const Changes& c : batch) {
      if (Status s = ApplyLocked(c); !s.ok()) {
        Exec("ROLLBACK");
        return s;
      }
    }
    if (Status s = Exec("COMMIT"); !s.ok()) {
      // A COMMIT that fails may or may not have rolled back: forget what
      // the cache knows of these experiments rather than guess.
      Exec("ROLLBACK");
      for (const Changes& c : batch) {
        ForgetTaskCounts(c);
        ChangedWhatListsShow(c);
      }
      return s;
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      CountCommittedTasks(batch[i]);
      if (listed[i]) ChangedWhatListsShow(batch[i]);
    }
    return Status::Ok();
  }

  StatusOr<ExperimentRecord> GetExperiment(const std::string& id) override {
    std::lock_guard lock(mu_);
    Statement s =
        Prepare(std::string("SELECT ") + kExperimentColumns + " FROM experiments WHERE id=?");
    s.Bind(1, id);
    int rc = s.Step();
    if (rc == SQLITE_ROW) return ReadExperiment(s);
    if (rc == SQLITE_DONE) return NotFound("no experiment with id '" + id + "'");
    return Error("reading experiment");
  }

  StatusOr<std::vector<ListedExperiment>> ListPage(const ListQuery& q,
                                                   const NeedSummary& need) override {
    std::lock_guard lock(mu_);
    // One read transaction, so that the page and its summaries are of one
    // moment even if another process writes between the queries.
    if (Status s = Exec("BEGIN"); !s.ok()) return s;
    auto page = ListPageLocked(q, need);
    Exec("COMMIT");
    return page;
  }

  StatusOr<int64_t> CountExperiments(const ListQuery& q) override {
    std::lock_guard lock(mu_);
    Statement s = Prepare("SELECT count(*) FROM experiments" + Where(q));
    BindWhere(s, q);
    if (s.Step() != SQLITE_ROW) return Error("counting experiments");
    return s.Int(0);
  }

  uint64_t ListVersion() override {
    std::lock_guard lock(mu_);
    return list_version_;
  }

  StatusOr<std::vector<ExperimentRecord>> ListOpenExperiments() override {
    std::lock_guard lock(mu_);
    Statement s = Prepare(std::string("SELECT ") + kExperimentColumns +
                          " FROM experiments WHERE state NOT IN ('succeeded','failed','cancelled')"
                          " ORDER BY created_at");
    std::vector<ExperimentRecord> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) out.push_back(ReadExperiment(s));
    if (rc != SQLITE_DONE) return Error("listing open experiments");
    return out;
  }

  StatusOr<std::vector<AttemptRecord>> ListAttempts(const std::string& id) override {
    std::lock_guard lock(mu_);
    Statement s = Prepare(
        "SELECT experiment_id, number, secret_sha256, job_name, slurm_job_id, state, slurm_state, "
        "end_reason, reason, nodes, sbatch_script, start_step, exit_code, submitted_at, "
        "started_at, "
        "ended_at FROM attempts WHERE experiment_id=? ORDER BY number");
    s.Bind(1, id);
    std::vector<AttemptRecord> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      AttemptRecord a;
      a.experiment_id = s.Text(0);
      a.number = static_cast<int>(s.Int(1));
      a.secret_sha256 = s.Text(2);
      a.job_name = s.Text(3);
      a.slurm_job_id = s.Int(4);
      a.state = s.Text(5);
      a.slurm_state = s.Text(6);
      a.end_reason = s.Text(7);
      a.reason = s.Text(8);
      a.nodes = s.Text(9);
      a.sbatch_script = s.Text(10);
      a.start_step = s.OptInt(11);
      a.exit_code = static_cast<int>(s.Int(12));
      a.submitted_at = s.Int(13);
      a.started_at = s.Int(14);
      a.ended_at = s.Int(15);
      out.push_back(std::move(a));
    }
    if (rc != SQLITE_DONE) return Error("listing attempts");
    return out;
  }

  StatusOr<std::vector<TaskRecord>> ListTasks(const std::string& id, int attempt) override {
    std::lock_guard lock(mu_);
    Statement s = Prepare(
        "SELECT experiment_id, attempt, proc_id, role, role_index, node, address, state, "
        "exit_code, "
        "signal, registered_at, last_heartbeat, ended_at FROM tasks WHERE experiment_id=? AND "
        "attempt=? ORDER BY proc_id");
    s.Bind(1, id).Bind(2, attempt);
    std::vector<TaskRecord> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      TaskRecord t;
      t.experiment_id = s.Text(0);
      t.attempt = static_cast<int>(s.Int(1));
      t.proc_id = static_cast<int>(s.Int(2));
      t.role = s.Text(3);
      t.index = static_cast<int>(s.Int(4));
      t.node = s.Text(5);
      t.address = s.Text(6);
      t.state = s.Text(7);
      if (auto v = s.OptInt(8)) t.exit_code = static_cast<int>(*v);
      if (auto v = s.OptInt(9)) t.signal = static_cast<int>(*v);
      t.registered_at = s.Int(10);
      t.last_heartbeat = s.Int(11);
      t.ended_at = s.Int(12);
      out.push_back(std::move(t));
    }
    if (rc != SQLITE_DONE) return Error("listing tasks");
    return out;
  }

  StatusOr<std::vector<EventRecord>> ListEvents(const std::string& id, int limit) override {
    std::lock_guard lock(mu_);
    Statement s = Prepare(
        "SELECT id, experiment_id, attempt, at, what, why FROM (SELECT * FROM events WHERE "
        "experiment_id=? ORDER BY id DESC LIMIT ?) ORDER BY id");
    s.Bind(1, id).Bind(2, limit);
    std::vector<EventRecord> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      out.push_back(
          {s.Int(0), s.Text(1), static_cast<int>(s.Int(2)), s.Int(3), s.Text(4), s.Text(5)});
    }
    if (rc != SQLITE_DONE) return Error("listing events");
    return out;
  }

  Status PutToken(const TokenRecord& t) override {
    std::lock_guard lock(mu_);
    Statement s = Prepare("INSERT INTO tokens (sha256, user, admin, created_at) VALUES (?,?,?,?)");
    s.Bind(1, t.sha256).Bind(2, t.user).Bind(3, t.admin ? 1 : 0).Bind(4, t.created_at);
    if (s.Step() != SQLITE_DONE) return Error("writing token");
    return Status::Ok();
  }

  StatusOr<TokenRecord> GetToken(const std::string& sha256) override {
    std::lock_guard lock(mu_);
    Statement s = Prepare("SELECT sha256, user, admin, created_at FROM tokens WHERE sha256=?");
    s.Bind(1, sha256);
    int rc = s.Step();
    if (rc == SQLITE_DONE) return NotFound("unknown token");
    if (rc != SQLITE_ROW) return Error("reading token");
    return TokenRecord{s.Text(0), s.Text(1), s.Int(2) != 0, s.Int(3)};
  }

 private:
  StatusOr<std::vector<ListedExperiment>> ListPageLocked(const ListQuery& q,
                                                         const NeedSummary& need) {
    // The page's ids from the index alone; then the summaries asked for,
    // each with its current attempt; then the task counts of the open ones
    // not in task_counts_: at most three queries whatever the page size.
    Statement page = Prepare("SELECT e.id FROM experiments e" + Where(q, "e.") +
                             " ORDER BY e.created_at DESC, e.id DESC LIMIT ? OFFSET ?");
    int n = BindWhere(page, q);
    page.Bind(n, q.limit).Bind(n + 1, q.offset);
    std::vector<ListedExperiment> out;
    std::unordered_map<std::string, size_t> needed;  // by id: the place in out
    nlohmann::json needed_ids = nlohmann::json::array();
    int rc;
    while ((rc = page.Step()) == SQLITE_ROW) {
      ListedExperiment listed;
      listed.id = page.Text(0);
      auto version = item_versions_.find(listed.id);
      if (version != item_versions_.end()) listed.version = version->second;
      if (need(listed.id, listed.version)) {
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
    // Open experiments whose counts are not cached: by id, their place in out.
    std::unordered_map<std::string, size_t> uncounted;
    nlohmann::json uncounted_ids = nlohmann::json::array();
    while ((rc = s.Step()) == SQLITE_ROW) {
      ExperimentSummary summary;
      summary.experiment = ReadExperiment(s);
      summary.has_attempt = s.OptInt(kSummaryAttemptColumn).has_value();
      summary.slurm_job_id = s.Int(kSummaryAttemptColumn + 1);
      summary.nodes = s.Text(kSummaryAttemptColumn + 2);
      summary.slurm_state = s.Text(kSummaryAttemptColumn + 3);
      const ExperimentRecord& e = summary.experiment;
      size_t i = needed.at(e.id);
      if (!IsTerminal(e.state)) {
        auto cached = task_counts_.find(e.id);
        if (cached != task_counts_.end() && cached->second.attempt == e.current_attempt) {
          summary.task_counts = cached->second.counts;
        } else {
          uncounted.emplace(e.id, i);
          uncounted_ids.push_back(e.id);
        }
      }
      out[i].summary = std::move(summary);
    }
    if (rc != SQLITE_DONE) return Error("listing experiments");
    if (uncounted.empty()) return out;

    // The current attempt's tasks of the experiments not cached yet, in one
    // query, into the cache.
    Statement tasks = Prepare(
        "SELECT t.experiment_id, t.attempt, t.proc_id, t.role, t.state FROM experiments e JOIN "
        "tasks t ON t.experiment_id = e.id AND t.attempt = e.current_attempt WHERE e.id IN "
        "(SELECT value FROM json_each(?))");
    tasks.Bind(1, uncounted_ids.dump());
    std::unordered_map<std::string, CountedTasks> loaded;
    for (const auto& [id, i] : uncounted)
      loaded[id].attempt = out[i].summary->experiment.current_attempt;
    while ((rc = tasks.Step()) == SQLITE_ROW) {
      auto it = loaded.find(tasks.Text(0));
      if (it == loaded.end() || it->second.attempt != tasks.Int(1)) continue;
      it->second.Set(static_cast<int>(tasks.Int(2)), tasks.Text(3), tasks.Text(4));
    }
    if (rc != SQLITE_DONE) return Error("counting tasks");
    for (auto& [id, counted] : loaded) {
      out[uncounted[id]].summary->task_counts = counted.counts;
      task_counts_[id] = std::move(counted);
    }
    return out;
  }

  // The current attempt's tasks of an open experiment, counted by role and
  // state for the list, and kept up to date as tasks are written.
  struct CountedTasks {
    int attempt = 0;
    std::unordered_map<int, std::pair<std::string, std::string>> by_proc;  // role, state
    std::vector<TaskStateCount> counts;  // of by_proc; no zero counts

    void Set(int proc_id, const std::string& role, const std::string& state) {
      auto [it, added] = by_proc.try_emplace(proc_id, role, state);
      if (!added) {
        if (it->second.first == role && it->second.second == state) return;
        Add(it->second.first, it->second.second, -1);
        it->second = {role, state};
      }
      Add(role, state, 1);
    }
    void Add(const std::string& role, const std::string& state, int n) {
      for (auto it = counts.begin(); it != counts.end(); ++it) {
        if (it->role != role || it->state != state) continue;
        it->count += n;
        if (it->count == 0) counts.erase(it);
        return;
      }
      counts.push_back({role, state, n});
    }
  };

  // After `c` committed: the cached counts follow its task rows. Tasks of an
  // attempt other than the cached one leave the cache alone: a list that
  // finds the experiment on another attempt reads that attempt's tasks.
  void CountCommittedTasks(const Changes& c) {
    if (c.delete_experiment) task_counts_.erase(*c.delete_experiment);
    for (const TaskRecord& t : c.tasks) {
      auto it = task_counts_.find(t.experiment_id);
      if (it != task_counts_.end() && it->second.attempt == t.attempt)
        it->second.Set(t.proc_id, t.role, t.state);
    }
    // A list shows no counts for a finished experiment.
    if (c.experiment && IsTerminal(c.experiment->state)) task_counts_.erase(c.experiment->id);
  }

  // Whether `c` may change what ListExperiments or CountExperiments return:
  // anything does but events and task rows that keep the role and state
  // task_counts_ knows for them (the heartbeats flushed at every Tick, while
  // a dashboard lists). What the cache does not know counts as a change.
  bool ChangesWhatListsShow(const Changes& c) const {
    if (c.experiment || !c.attempts.empty() || c.delete_experiment) return true;
    for (const TaskRecord& t : c.tasks) {
      auto it = task_counts_.find(t.experiment_id);
      if (it == task_counts_.end() || it->second.attempt != t.attempt) return true;
      auto known = it->second.by_proc.find(t.proc_id);
      if (known == it->second.by_proc.end() || known->second.first != t.role ||
          known->second.second != t.state)
        return true;
    }
    return false;
  }

  // A new ListVersion, which every experiment `c` names is changed at.
  void ChangedWhatListsShow(const Changes& c) {
    ++list_version_;
    // A deleted experiment is listed no more; an id used again is created
    // again, which sets its version anew.
    if (c.delete_experiment) item_versions_.erase(*c.delete_experiment);
    if (c.experiment) item_versions_[c.experiment->id] = list_version_;
    for (const AttemptRecord& a : c.attempts) item_versions_[a.experiment_id] = list_version_;
    for (const TaskRecord& t : c.tasks) item_versions_[t.experiment_id] = list_version_;
  }

  void ForgetTaskCounts(const Changes& c) {
    if (c.delete_experiment) task_counts_.erase(*c.delete_experiment);
    if (c.experiment) task_counts_.erase(c.experiment->id);
    for (const TaskRecord& t : c.tasks) task_counts_.erase(t.experiment_id);
  }

  Status ApplyLocked(const Changes& c) {
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
                        ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
      if (!c.create_experiment)
        sql +=
            " ON CONFLICT(id) DO UPDATE SET owner=excluded.owner, spec=excluded.spec, "
            "state=excluded.state, reason=excluded.reason, "
            "current_attempt=excluded.current_attempt, "
            "restarts=excluded.restarts, model_dir=excluded.model_dir, "
            "mem_per_task_mb=excluded.mem_per_task_mb, mem_explanation=excluded.mem_explanation, "
            "checkpoint_step=excluded.checkpoint_step, checkpoint_path=excluded.checkpoint_path, "
            "updated_at=excluded.updated_at, next_attempt_at=excluded.next_attempt_at";
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
          "submitted_at, "
          "started_at, ended_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON "
          "CONFLICT(experiment_id, "
          "number) DO UPDATE SET secret_sha256=excluded.secret_sha256, job_name=excluded.job_name, "
          "slurm_job_id=excluded.slurm_job_id, state=excluded.state, "
          "slurm_state=excluded.slurm_state, "
          "end_reason=excluded.end_reason, reason=excluded.reason, nodes=excluded.nodes, "
          "sbatch_script=excluded.sbatch_script, start_step=excluded.start_step, "
          "exit_code=excluded.exit_code, submitted_at=excluded.submitted_at, "
          "started_at=excluded.started_at, ended_at=excluded.ended_at");
      s.Bind(1, a.experiment_id).Bind(2, a.number).Bind(3, a.secret_sha256).Bind(4, a.job_name);
      s.Bind(5, a.slurm_job_id).Bind(6, a.state).Bind(7, a.slurm_state).Bind(8, a.end_reason);
      s.Bind(9, a.reason).Bind(10, a.nodes).Bind(11, a.sbatch_script).Bind(12, a.start_step);
      s.Bind(13, a.exit_code).Bind(14, a.submitted_at).Bind(15, a.started_at).Bind(16, a.ended_at);
      if (s.Step() != SQLITE_DONE) return Error("writing attempt");
    }
    for (const TaskRecord& t : c.tasks) {
      Statement s = Prepare(
          "INSERT OR REPLACE INTO tasks (experiment_id, attempt, proc_id, role, role_index, node, "
          "address, state, exit_code, signal, registered_at, last_heartbeat, ended_at) VALUES "
          "(?,?,?,?,?,?,?,?,?,?,?,?,?)");
      s.Bind(1, t.experiment_id)
          .Bind(2, t.attempt)
          .Bind(3, t.proc_id)
          .Bind(4, t.role)
          .Bind(5, t.index);
      s.Bind(6, t.node).Bind(7, t.address).Bind(8, t.state).Bind(9, t.exit_code).Bind(10, t.signal);
      s.Bind(11, t.registered_at).Bind(12, t.last_heartbeat).Bind(13, t.ended_at);
      if (s.Step() != SQLITE_DONE) return Error("writing task");
    }
    for (const EventRecord& ev : c.events) {
      Statement s =
          Prepare("INSERT INTO events (experiment_id, attempt, at, what, why) VALUES (?,?,?,?,?)");
      s.Bind(1, ev.experiment_id)
          .Bind(2, ev.attempt)
          .Bind(3, ev.at)
          .Bind(4, ev.what)
          .Bind(5, ev.why);
      if (s.Step() != SQLITE_DONE) return Error("writing event");
    }
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

  // Statements are cached by their SQL text; the caller holds mu_.
  Statement Prepare(const std::string& sql) {
    auto it = statements_.find(sql);
    if (it == statements_.end()) {
      sqlite3_stmt* stmt = nullptr;
      if (sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) !=
          SQLITE_OK) {
        // Our SQL is fixed text: failing to prepare it is a bug, not input.
        fprintf(stderr, "tfslurmd: cannot prepare SQL (%s): %s\n", sqlite3_errmsg(db_),
                sql.c_str());
        abort();
      }
      it = statements_.emplace(sql, stmt).first;
    }
    return Statement(db_, it->second);
  }

  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      return Unavailable("database: " + msg);
    }
    return Status::Ok();
  }

  Status Error(const std::string& what) {
    return Unavailable("database error while " + what + ": " + sqlite3_errmsg(db_));
  }

  std::mutex mu_;
  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
  // By experiment id, for the open experiments a list has shown: a list of
  // 1,000 would otherwise read 6,000 task rows to count them on every
  // request. One tfslurmd owns a database and every task write goes through
  // Apply, so the cache cannot go stale.
  std::unordered_map<std::string, CountedTasks> task_counts_;
  // See ListVersion: bumped after each commit ChangesWhatListsShow.
  uint64_t list_version_ = 0;
  // By experiment id, the list_version_ of its last such commit; absent: 0
  // (none since the store was opened). See ListedExperiment::version.
  std::unordered_map<std::string, uint64_t> item_versions_;
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

StatusOr<std::vector<ExperimentSummary>> Store::ListExperiments(const ListQuery& query) {
  auto page = ListPage(query, [](const std::string&, uint64_t) { return true; });
  if (!page.ok()) return page.status();
  std::vector<ExperimentSummary> out;
  out.reserve(page->size());
  for (ListedExperiment& listed : *page) out.push_back(std::move(listed.summary.value()));
  return out;
}

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
