// The store: every experiment, attempt, task and event, durably. The
// interface is all core/ sees; sqlite_store.cc is the only code that
// includes sqlite3.h. Thread-safe: every method may be called from any
// thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "service/core/records.h"
#include "service/core/status.h"

namespace tfslurm::store {

// A set of writes applied in one transaction: all or none.
struct Changes {
  std::optional<ExperimentRecord> experiment;
  bool create_experiment = false;       // insert; AlreadyExists when the id is taken
  std::vector<AttemptRecord> attempts;  // upserted by (experiment_id, number)
  std::vector<TaskRecord> tasks;        // upserted by (experiment_id, attempt, proc_id)
  std::vector<EventRecord> events;      // appended
  // Removes an experiment with its attempts, tasks and events (a submission
  // Slurm refused leaves nothing behind). Applied first.
  std::optional<std::string> delete_experiment;
  bool empty() const {
    return !experiment && attempts.empty() && tasks.empty() && events.empty() && !delete_experiment;
  }
};

struct ListQuery {
  std::vector<ExperimentState> states;  // empty: all
  std::string owner;                    // empty: all owners
  int limit = 50;
  int offset = 0;
};

// One experiment of a list page (Store::ListPage).
struct ListedExperiment {
  std::string id;
  // The ListVersion of the last write that changed what a list shows of
  // this experiment; 0 if none has since the store was opened. What a list
  // shows of it is the same for as long as this stays.
  uint64_t version = 0;
  std::optional<ExperimentSummary> summary;  // read when asked for
};

class Store {
 public:
  virtual ~Store() = default;

  Status Apply(const Changes& changes) { return ApplyAll({&changes, 1}); }
  // Several sets of changes in one transaction: all or none. One commit
  // where a loop over experiments (a poll finding 100 jobs ended) would
  // make one each, each appending to the WAL while holding the store.
  virtual Status ApplyAll(std::span<const Changes> batch) = 0;

  virtual StatusOr<ExperimentRecord> GetExperiment(const std::string& id) = 0;
  // The page `query` asks for, newest first, as a list shows them. Calls
  // `need(id, version)` once per experiment, in page order, and reads the
  // summary of those it returns true for: a caller that keeps what it made
  // of a summary at a version reads only what changed since. The page, the
  // versions and the summaries are of one moment.
  using NeedSummary = std::function<bool(const std::string& id, uint64_t version)>;
  virtual StatusOr<std::vector<ListedExperiment>> ListPage(const ListQuery& query,
                                                           const NeedSummary& need) = 0;
  // The page with every summary (ExperimentSummary).
  StatusOr<std::vector<ExperimentSummary>> ListExperiments(const ListQuery& query);
  virtual StatusOr<int64_t> CountExperiments(const ListQuery& query) = 0;
  // Grows with every write that may change what ListExperiments or
  // CountExperiments return: a list computed at one version holds while the
  // version stays. Events alone, and task rows whose role and state stay
  // (heartbeats), leave it as it is.
  virtual uint64_t ListVersion() = 0;
  // Experiments not in a terminal state, for the lifecycle to pick up at start.
  virtual StatusOr<std::vector<ExperimentRecord>> ListOpenExperiments() = 0;

  virtual StatusOr<std::vector<AttemptRecord>> ListAttempts(const std::string& experiment_id) = 0;
  virtual StatusOr<std::vector<TaskRecord>> ListTasks(const std::string& experiment_id,
                                                      int attempt) = 0;
  // The newest `limit` events, oldest first.
  virtual StatusOr<std::vector<EventRecord>> ListEvents(const std::string& experiment_id,
                                                        int limit) = 0;

  virtual Status PutToken(const TokenRecord& token) = 0;
  // NotFound for an unknown hash.
  virtual StatusOr<TokenRecord> GetToken(const std::string& sha256) = 0;
};

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
