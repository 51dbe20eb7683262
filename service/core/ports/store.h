// The store port: every experiment, attempt, task and event, durably, as
// core needs them. service/store/ implements it on SQLite (the only folder
// that includes sqlite3.h); unit tests use it too, on a file in a temp
// directory.
//
// Thread safety: implementations are thread-safe; every method may be called
// from any thread.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "service/core/records.h"

namespace tfslurm {

// Which of an attempt's tasks to read: in task order, only those in
// `state` when given, `limit` of them (-1: all) after `offset`.
struct TaskQuery {
  std::optional<TaskState> state;
  int64_t offset = 0;
  int64_t limit = -1;
  bool All() const { return !state && offset == 0 && limit < 0; }
};

// Store::ListTaskPage's answer.
struct TaskPageRows {
  std::vector<TaskRecord> tasks;
  int64_t total = 0;                   // the tasks `state` keeps (every task without it)
  std::vector<TaskStateCount> counts;  // every task, by role and state
};

// A set of writes applied in one transaction: all or none.
struct Changes {
  std::optional<ExperimentRecord> experiment;
  bool create_experiment = false;                  // insert; AlreadyExists when the id is taken
  std::vector<AttemptRecord> attempts;             // upserted by (experiment_id, number)
  std::vector<TaskRecord> tasks;                   // upserted by (experiment_id, attempt, proc_id)
  std::vector<EventRecord> events;                 // appended
  std::vector<SpecRevisionRecord> spec_revisions;  // inserted; AlreadyExists when one is there
  // Removes an experiment with its attempts, tasks and events (a submission
  // Slurm refused leaves nothing behind). Applied first.
  std::optional<std::string> delete_experiment;
  std::optional<SweepRecord> sweep;
  bool create_sweep = false;  // insert; AlreadyExists when the id is taken
  // Upserted by (sweep_id, index), after the experiment row: a trial's row
  // and its experiment's are written in one transaction.
  std::vector<SweepTrialRecord> sweep_trials;
  // Removes a sweep with its trials' rows (not their experiments).
  std::optional<std::string> delete_sweep;
  bool empty() const {
    return !experiment && attempts.empty() && tasks.empty() && events.empty() &&
           spec_revisions.empty() && !delete_experiment && !sweep && sweep_trials.empty() &&
           !delete_sweep;
  }
};

struct SweepQuery {
  std::string owner;  // empty: all owners
  // Only sweeps still running, or with a trial still running (a cancelled
  // sweep's trials end after it).
  bool open_only = false;
};

struct ListQuery {
  std::vector<ExperimentState> states;  // empty: all
  std::string owner;                    // empty: all owners
  int limit = 50;
  int offset = 0;
};

// Asked by Store::ListPage of each experiment of a page: whether to read
// its summary. A caller that keeps what it made of a summary (the API's
// list cache) reads only those it does not keep.
using NeedSummary = std::function<bool(const std::string& id)>;

// One experiment of a list page (Store::ListPage).
struct ListedExperiment {
  std::string id;
  std::optional<ExperimentSummary> summary;  // read when NeedSummary said so
};

// How much of an experiment's training scalars the store keeps.
struct ScalarLimits {
  // A tag that grows past this is thinned to about half of it: every other
  // point goes, except each attempt's first and the newest, so a series
  // keeps its whole span at a coarser step.
  int points_per_tag = 1000;
  // Tags beyond this many are not kept (AppendedScalars::refused_tags).
  int tags = 100;
};

// What AppendScalars did not keep: tags new to the experiment beyond
// ScalarLimits::tags, each named once.
struct AppendedScalars {
  std::vector<std::string> refused_tags;
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
  // `need(id)` once per experiment, in page order, after reading the page's
  // ids and before reading any summary, then reads the summaries of those
  // it returned true for: each with its current attempt and, for an open
  // experiment, that attempt's tasks counted by role and state. The page
  // and its summaries are of one moment (one read transaction), read in at
  // most three queries whatever the page size. Nothing is cached: every
  // call reads the store.
  virtual StatusOr<std::vector<ListedExperiment>> ListPage(const ListQuery& query,
                                                           const NeedSummary& need) = 0;
  // The page with every summary (ExperimentSummary).
  StatusOr<std::vector<ExperimentSummary>> ListExperiments(const ListQuery& query) {
    auto page = ListPage(query, [](const std::string&) { return true; });
    if (!page.ok()) return page.status();
    std::vector<ExperimentSummary> out;
    out.reserve(page->size());
    for (ListedExperiment& listed : *page) out.push_back(std::move(listed.summary.value()));
    return out;
  }
  virtual StatusOr<int64_t> CountExperiments(const ListQuery& query) = 0;
  // Ids of ended experiments (succeeded, failed, cancelled) last changed
  // before `before_ms`, oldest first, at most `limit`: the retention sweep's.
  virtual StatusOr<std::vector<std::string>> ListEndedBefore(int64_t before_ms, int limit) = 0;
  // Experiments not in a terminal state, for the lifecycle to pick up at start.
  virtual StatusOr<std::vector<ExperimentRecord>> ListOpenExperiments() = 0;

  virtual StatusOr<std::vector<AttemptRecord>> ListAttempts(const std::string& experiment_id) = 0;
  virtual StatusOr<std::vector<TaskRecord>> ListTasks(const std::string& experiment_id,
                                                      int attempt) = 0;
  // A page of the attempt's tasks in task order (those in `query.state`
  // only, when given), how many that state keeps, and every task counted by
  // role and state: what GET /experiments/{id} shows of an experiment of
  // 16,384 tasks without reading every row.
  virtual StatusOr<TaskPageRows> ListTaskPage(const std::string& experiment_id, int attempt,
                                              const TaskQuery& query) = 0;
  // Every revision of the experiment's spec, oldest first.
  virtual StatusOr<std::vector<SpecRevisionRecord>> ListSpecRevisions(
      const std::string& experiment_id) = 0;
  // The newest `limit` events, oldest first.
  virtual StatusOr<std::vector<EventRecord>> ListEvents(const std::string& experiment_id,
                                                        int limit) = 0;

  // Adds an attempt's training scalars, in one transaction: a point of the
  // same tag, attempt and step as a kept one replaces it; then each tag past
  // limits.points_per_tag is thinned (ScalarLimits).
  virtual StatusOr<AppendedScalars> AppendScalars(const std::string& experiment_id, int attempt,
                                                  std::span<const ScalarPoint> points,
                                                  const ScalarLimits& limits) = 0;
  // The experiment's tags (only those in `tags`, when it is not empty), by
  // tag, each with its kept points in (attempt, step) order.
  virtual StatusOr<std::vector<ScalarSeries>> ReadScalars(const std::string& experiment_id,
                                                          const std::vector<std::string>& tags) = 0;
  // The experiment's tags only, by name: what ReadScalars would return,
  // without a point.
  virtual StatusOr<std::vector<std::string>> ListScalarTags(const std::string& experiment_id) = 0;

  // NotFound for an unknown id.
  virtual StatusOr<SweepRecord> GetSweep(const std::string& id) = 0;
  // Newest first.
  virtual StatusOr<std::vector<SweepRecord>> ListSweeps(const SweepQuery& query) = 0;
  // By index.
  virtual StatusOr<std::vector<SweepTrialRecord>> ListSweepTrials(const std::string& sweep_id) = 0;
  // Ended trials of every sweep, counted by end reason (its name).
  virtual StatusOr<std::vector<std::pair<std::string, int64_t>>> CountTrialsByEndReason() = 0;

  virtual Status PutToken(const TokenRecord& token) = 0;
  // NotFound for an unknown hash.
  virtual StatusOr<TokenRecord> GetToken(const std::string& sha256) = 0;
};

// Told of every batch of changes core writes, after the store answered: a
// cache of what the store holds (the API's list of experiments) follows the
// writes here rather than inside the store. Called by the writing thread,
// which may hold core's lock: an observer is quick and never calls core.
class CommitObserver {
 public:
  virtual ~CommitObserver() = default;
  // `applied`: the store committed `batch`. Otherwise it may or may not have
  // (a COMMIT that failed): an observer forgets what it knew of them.
  virtual void Committed(std::span<const Changes> batch, bool applied) = 0;
};

}  // namespace tfslurm
