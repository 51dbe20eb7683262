#include "service/core/ports/store.h"
#include "service/store/sqlite_store.h"
#include "tests/unit/test_dir.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <thread>

namespace tfslurm::store {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("store-test");
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
    c.events.push_back({0, id, 1, created, EventCode::kSubmitting, "why"});
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

// Issue 49: GET /experiments/{id}'s page of 16,384 tasks, read as a page.
TEST_F(StoreTest, APageOfTasksIsReadInTaskOrderWithEveryTaskCounted) {
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE(s.ok());
  Changes c = NewExperiment("a", 1, ExperimentState::kFailed);
  c.tasks.clear();
  for (int i = 0; i < 1000; ++i) {
    TaskRecord t;
    t.experiment_id = "a";
    t.attempt = 1;
    t.task = TaskIndex(i);
    t.role = i < 10 ? "ps" : "worker";
    t.index = i < 10 ? i : i - 10;
    t.state = i % 100 == 42 ? TaskState::kFailed : TaskState::kReaped;
    c.tasks.push_back(t);
  }
  ASSERT_TRUE((*s)->Apply(c).ok());
  auto page = (*s)->ListTaskPage("a", 1, {std::nullopt, 100, 3});
  ASSERT_TRUE(page.ok()) << page.status().message();
  ASSERT_EQ(page->tasks.size(), 3u);
  EXPECT_EQ(page->tasks[0].task, TaskIndex(100));
  EXPECT_EQ(page->tasks[2].task, TaskIndex(102));
  EXPECT_EQ(page->total, 1000);
  int counted = 0, failed = 0;
  for (const TaskStateCount& n : page->counts) {
    counted += n.count;
    if (n.state == TaskState::kFailed) failed += n.count;
  }
  EXPECT_EQ(counted, 1000);
  EXPECT_EQ(failed, 10);
  page = (*s)->ListTaskPage("a", 1, {TaskState::kFailed, 8, -1});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->total, 10);
  ASSERT_EQ(page->tasks.size(), 2u);
  EXPECT_EQ(page->tasks[0].task, TaskIndex(842));
  EXPECT_EQ(page->tasks[1].task, TaskIndex(942));
  EXPECT_EQ(page->tasks[1].state, TaskState::kFailed);
  page = (*s)->ListTaskPage("a", 2, {});
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->tasks.empty());
  EXPECT_EQ(page->total, 0);
}

TEST_F(StoreTest, CreateOfExistingIdIsAlreadyExistsAndChangesNothing) {
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE((*s)->Apply(NewExperiment("a", 1, ExperimentState::kRunning)).ok());
  Status st = (*s)->Apply(NewExperiment("a", 2, ExperimentState::kQueued));
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ((*s)->GetExperiment("a")->state, ExperimentState::kRunning);
  EXPECT_EQ((*s)->ListEvents("a", 10)->size(), 1u) << "the failed transaction must leave nothing";
}

TEST_F(StoreTest, AListPageReadsTheSummariesAskedForOnlyInPageOrder) {
  auto s = OpenSqliteStore(path_);
  Store& store = **s;
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(
        store.Apply(NewExperiment("e" + std::to_string(i), 10 + i, ExperimentState::kQueued)).ok());
  std::vector<std::string> asked;
  ListQuery q;
  q.limit = 3;
  auto page = store.ListPage(q, [&](const std::string& id) {
    asked.push_back(id);
    return id != "e2";
  });
  ASSERT_TRUE(page.ok()) << page.status().message();
  EXPECT_EQ(asked, (std::vector<std::string>{"e3", "e2", "e1"}));
  ASSERT_EQ(page->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const ListedExperiment& e = (*page)[i];
    EXPECT_EQ(e.id, asked[i]);
    ASSERT_EQ(e.summary.has_value(), e.id != "e2") << e.id;
    if (e.summary) {
      EXPECT_EQ(e.summary->experiment.id, e.id);
      EXPECT_EQ(e.summary->experiment.model_dir, "/m/" + e.id);
    }
  }
}

TEST_F(StoreTest, RowsReadBackFieldByField) {
  auto s = OpenSqliteStore(path_);
  Store& store = **s;
  Changes c = NewExperiment("a", 11, ExperimentState::kRestarting);
  ExperimentRecord& e = *c.experiment;
  e.reason = "r";
  e.current_attempt = 1;
  e.restarts = 3;
  e.mem_per_task_mb = 4;
  e.mem_explanation = "m";
  e.checkpoint_step = 5;
  e.checkpoint_path = "/c";
  e.updated_at = 12;
  e.next_attempt_at = 13;
  e.excluded_nodes = {"node2", "gpu-17"};
  AttemptRecord& a = c.attempts[0];
  a.secret_sha256 = "s";
  a.slurm_job_id = 21;
  a.state = AttemptState::kRunning;
  a.slurm_state = "RUNNING";
  a.end_reason = EndReason::kPreempted;
  a.reason = "ar";
  a.nodes = "n[1-2]";
  a.start_step = 22;
  a.exit_code = 23;
  a.submitted_at = 24;
  a.started_at = 25;
  a.ended_at = 26;
  TaskRecord& t = c.tasks[0];
  t.task = TaskIndex(7);
  t.index = 8;
  t.node = "n1";
  t.address = "n1:9";
  t.local_rank = 3;
  t.state = TaskState::kFailed;
  t.exit_code = 31;
  t.signal = 32;
  t.registered_at = 33;
  t.last_heartbeat = 34;
  t.ended_at = 35;
  ASSERT_TRUE(store.Apply(c).ok());
  ASSERT_TRUE(store.PutToken({"hash", "bob", true, 41}).ok());

  ExperimentRecord re = *store.GetExperiment("a");
  EXPECT_EQ(re.id, "a");
  EXPECT_EQ(re.owner, "alice");
  EXPECT_EQ(re.spec_json, "{}");
  EXPECT_EQ(re.state, ExperimentState::kRestarting);
  EXPECT_EQ(re.reason, "r");
  EXPECT_EQ(re.current_attempt, 1);
  EXPECT_EQ(re.restarts, 3);
  EXPECT_EQ(re.model_dir, "/m/a");
  EXPECT_EQ(re.mem_per_task_mb, 4);
  EXPECT_EQ(re.mem_explanation, "m");
  EXPECT_EQ(re.checkpoint_step, 5);
  EXPECT_EQ(re.checkpoint_path, "/c");
  EXPECT_EQ(re.created_at, 11);
  EXPECT_EQ(re.updated_at, 12);
  EXPECT_EQ(re.next_attempt_at, 13);
  EXPECT_EQ(re.excluded_nodes, (std::vector<std::string>{"node2", "gpu-17"}));

  ExperimentSummary listed = (*store.ListExperiments({}))[0];
  EXPECT_EQ(listed.experiment.reason, "r");
  EXPECT_EQ(listed.experiment.checkpoint_step, 5);
  EXPECT_EQ(listed.experiment.next_attempt_at, 13);
  EXPECT_TRUE(listed.experiment.spec_json.empty());
  EXPECT_TRUE(listed.has_attempt);
  EXPECT_EQ(listed.slurm_job_id, 21);
  EXPECT_EQ(listed.nodes, "n[1-2]");
  EXPECT_EQ(listed.slurm_state, "RUNNING");

  AttemptRecord ra = (*store.ListAttempts("a"))[0];
  EXPECT_EQ(ra.experiment_id, "a");
  EXPECT_EQ(ra.number, 1);
  EXPECT_EQ(ra.secret_sha256, "s");
  EXPECT_EQ(ra.job_name, "tfx-a-a1");
  EXPECT_EQ(ra.slurm_job_id, 21);
  EXPECT_EQ(ra.state, AttemptState::kRunning);
  EXPECT_EQ(ra.slurm_state, "RUNNING");
  EXPECT_EQ(ra.end_reason, EndReason::kPreempted);
  EXPECT_EQ(ra.reason, "ar");
  EXPECT_EQ(ra.nodes, "n[1-2]");
  EXPECT_EQ(ra.sbatch_script, "#!/bin/bash\n");
  EXPECT_EQ(ra.start_step, 22);
  EXPECT_EQ(ra.exit_code, 23);
  EXPECT_EQ(ra.submitted_at, 24);
  EXPECT_EQ(ra.started_at, 25);
  EXPECT_EQ(ra.ended_at, 26);

  TaskRecord rt = (*store.ListTasks("a", 1))[0];
  EXPECT_EQ(rt.experiment_id, "a");
  EXPECT_EQ(rt.attempt, 1);
  EXPECT_EQ(rt.task, TaskIndex(7));
  EXPECT_EQ(rt.role, "ps");
  EXPECT_EQ(rt.index, 8);
  EXPECT_EQ(rt.node, "n1");
  EXPECT_EQ(rt.address, "n1:9");
  EXPECT_EQ(rt.local_rank, 3);
  EXPECT_EQ(rt.state, TaskState::kFailed);
  EXPECT_EQ(rt.exit_code, 31);
  EXPECT_EQ(rt.signal, 32);
  EXPECT_EQ(rt.registered_at, 33);
  EXPECT_EQ(rt.last_heartbeat, 34);
  EXPECT_EQ(rt.ended_at, 35);
  t.task = TaskIndex(8);
  t.exit_code.reset();
  t.signal.reset();
  Changes unset;
  unset.tasks.push_back(t);
  ASSERT_TRUE(store.Apply(unset).ok());
  TaskRecord unset_read = (*store.ListTasks("a", 1))[1];
  EXPECT_FALSE(unset_read.exit_code.has_value()) << "NULL reads as none";
  EXPECT_FALSE(unset_read.signal.has_value());

  EventRecord rv = (*store.ListEvents("a", 10))[0];
  EXPECT_GT(rv.id, 0);
  EXPECT_EQ(rv.experiment_id, "a");
  EXPECT_EQ(rv.attempt, 1);
  EXPECT_EQ(rv.at, 11);
  EXPECT_EQ(rv.what, EventCode::kSubmitting);
  EXPECT_EQ(rv.why, "why");

  TokenRecord rk = *store.GetToken("hash");
  EXPECT_EQ(rk.sha256, "hash");
  EXPECT_EQ(rk.user, "bob");
  EXPECT_TRUE(rk.admin);
  EXPECT_EQ(rk.created_at, 41);
}

TEST_F(StoreTest, ABatchIsWrittenWholeOrNotAtAll) {
  auto s = OpenSqliteStore(path_);
  Store& store = **s;
  ASSERT_TRUE(store.Apply(NewExperiment("a", 1, ExperimentState::kRunning)).ok());
  std::vector<Changes> batch(3);
  batch[0].experiment = *store.GetExperiment("a");
  batch[0].experiment->state = ExperimentState::kSucceeded;
  batch[1] = NewExperiment("b", 2, ExperimentState::kQueued);
  batch[2] = NewExperiment("a", 3, ExperimentState::kQueued);  // taken: the batch fails
  EXPECT_EQ(store.ApplyAll(batch).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store.GetExperiment("a")->state, ExperimentState::kRunning);
  EXPECT_EQ(store.GetExperiment("b").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(*store.CountExperiments({}), 1) << "nothing was written";

  batch.pop_back();
  ASSERT_TRUE(store.ApplyAll(batch).ok());
  EXPECT_EQ(store.GetExperiment("a")->state, ExperimentState::kSucceeded);
  EXPECT_TRUE(store.GetExperiment("b").ok());
  EXPECT_EQ(*store.CountExperiments({}), 2);
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
  EXPECT_EQ(all->front().experiment.id, "e4");
  q.states = {ExperimentState::kRunning};
  auto running = (*s)->ListExperiments(q);
  ASSERT_EQ(running->size(), 2u);
  EXPECT_EQ(running->front().experiment.id, "e3");
  EXPECT_EQ(*(*s)->CountExperiments(q), 2);
  ListQuery page;
  page.limit = 2;
  page.offset = 2;
  auto p = (*s)->ListExperiments(page);
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ(p->front().experiment.id, "e2");
  EXPECT_EQ((*s)->ListOpenExperiments()->size(), 2u);
}

TEST_F(StoreTest, ListCarriesTheCurrentAttemptAndCountsTheOpenExperimentsTasks) {
  auto s = OpenSqliteStore(path_);
  for (auto [id, state] : {std::pair{"open", ExperimentState::kRunning},
                           std::pair{"done", ExperimentState::kSucceeded}}) {
    Changes c = NewExperiment(id, id == std::string("open") ? 2 : 1, state);
    c.experiment->current_attempt = 2;
    AttemptRecord second = c.attempts[0];
    second.number = 2;
    second.slurm_job_id = 42;
    second.nodes = "node[1-2]";
    second.slurm_state = "RUNNING";
    c.attempts.push_back(second);
    // Attempt 1's task is not counted: only the current attempt's are.
    for (int proc = 0; proc < 3; ++proc) {
      TaskRecord t;
      t.experiment_id = id;
      t.attempt = 2;
      t.task = TaskIndex(proc);
      t.role = proc == 0 ? "ps" : "worker";
      t.state = proc == 2 ? TaskState::kPending : TaskState::kRunning;
      c.tasks.push_back(t);
    }
    ASSERT_TRUE(s.value()->Apply(c).ok());
  }
  auto list = (*s)->ListExperiments({});
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->size(), 2u);
  const ExperimentSummary& open = (*list)[0];
  EXPECT_EQ(open.experiment.id, "open");
  EXPECT_TRUE(open.experiment.spec_json.empty()) << "a list does not read specs";
  EXPECT_TRUE(open.has_attempt);
  EXPECT_EQ(open.slurm_job_id, 42);
  EXPECT_EQ(open.nodes, "node[1-2]");
  EXPECT_EQ(open.slurm_state, "RUNNING");
  std::map<std::pair<std::string, std::string>, int> counts;
  for (const TaskStateCount& c : open.task_counts)
    counts[{c.role, TaskStateName(c.state)}] += c.count;
  EXPECT_EQ(counts,
            (std::map<std::pair<std::string, std::string>, int>{
                {{"ps", "running"}, 1}, {{"worker", "pending"}, 1}, {{"worker", "running"}, 1}}));
  const ExperimentSummary& done = (*list)[1];
  EXPECT_EQ(done.slurm_job_id, 42);
  EXPECT_TRUE(done.task_counts.empty()) << "finished experiments are summarized by their state";
}

// Counts of the current attempt's tasks by role and state, as a list shows
// them for experiment `id` (entries of one role and state added up).
std::map<std::pair<std::string, std::string>, int> ListedCounts(Store& s, const std::string& id) {
  std::map<std::pair<std::string, std::string>, int> counts;
  auto list = s.ListExperiments({});
  EXPECT_TRUE(list.ok()) << list.status().message();
  if (!list.ok()) return counts;
  for (const ExperimentSummary& e : *list) {
    if (e.experiment.id != id) continue;
    for (const TaskStateCount& c : e.task_counts) {
      EXPECT_GT(c.count, 0) << c.role << " " << TaskStateName(c.state);
      counts[{c.role, TaskStateName(c.state)}] += c.count;
    }
  }
  return counts;
}

using Counts = std::map<std::pair<std::string, std::string>, int>;

// An open experiment on its first attempt, with one pending ps task.
Changes OnFirstAttempt(Changes c) {
  c.experiment->current_attempt = 1;
  return c;
}

TEST_F(StoreTest, AListPageCountsTheTasksOfEachNeededOpenExperimentApart) {
  auto s = OpenSqliteStore(path_);
  Store& store = **s;
  // e0..e3 with 1..4 workers (e3 finished), e4 with none.
  for (int i = 0; i < 5; ++i) {
    std::string id = "e" + std::to_string(i);
    Changes c = OnFirstAttempt(
        NewExperiment(id, 10 + i, i == 3 ? ExperimentState::kFailed : ExperimentState::kRunning));
    c.tasks.clear();
    for (int proc = 0; proc < (i == 4 ? 0 : i + 1); ++proc) {
      TaskRecord t;
      t.experiment_id = id;
      t.attempt = 1;
      t.task = TaskIndex(proc);
      t.role = "worker";
      t.state = proc == 0 ? TaskState::kRunning : TaskState::kPending;
      c.tasks.push_back(t);
    }
    ASSERT_TRUE(store.Apply(c).ok());
  }
  auto page = store.ListPage({}, [](const std::string& id) { return id != "e1"; });
  ASSERT_TRUE(page.ok()) << page.status().message();
  std::map<std::string, Counts> counted;
  for (const ListedExperiment& e : *page) {
    ASSERT_EQ(e.summary.has_value(), e.id != "e1") << e.id;
    if (!e.summary) continue;
    for (const TaskStateCount& c : e.summary->task_counts)
      counted[e.id][{c.role, TaskStateName(c.state)}] += c.count;
  }
  EXPECT_EQ(counted["e0"], (Counts{{{"worker", "running"}, 1}}));
  EXPECT_EQ(counted["e2"], (Counts{{{"worker", "running"}, 1}, {{"worker", "pending"}, 2}}));
  EXPECT_EQ(counted["e3"], Counts{}) << "a finished experiment shows no counts";
  EXPECT_EQ(counted["e4"], Counts{}) << "no tasks yet";
}

TEST_F(StoreTest, ListedTaskCountsFollowTaskWritesAndSurviveARestart) {
  TaskRecord task;
  {
    auto s = OpenSqliteStore(path_);
    ASSERT_TRUE(s.ok()) << s.status().message();
    Changes c = OnFirstAttempt(NewExperiment("a", 1, ExperimentState::kRunning));
    for (int proc = 1; proc < 4; ++proc) {
      TaskRecord t = c.tasks[0];
      t.task = TaskIndex(proc);
      t.role = "worker";
      c.tasks.push_back(t);
    }
    task = c.tasks[1];  // worker, proc 1
    ASSERT_TRUE((*s)->Apply(c).ok());
    EXPECT_EQ(ListedCounts(**s, "a"), (Counts{{{"ps", "pending"}, 1}, {{"worker", "pending"}, 3}}));

    // Counted by the database at every list: later writes show.
    Changes registered;
    task.state = TaskState::kRunning;
    registered.tasks.push_back(task);
    ASSERT_TRUE((*s)->Apply(registered).ok());
    EXPECT_EQ(
        ListedCounts(**s, "a"),
        (Counts{{{"ps", "pending"}, 1}, {{"worker", "pending"}, 2}, {{"worker", "running"}, 1}}));

    // A heartbeat rewrites the row without changing its state.
    Changes heartbeat;
    task.last_heartbeat = 99;
    heartbeat.tasks.push_back(task);
    heartbeat.tasks.push_back(task);
    ASSERT_TRUE((*s)->Apply(heartbeat).ok());
    EXPECT_EQ(
        ListedCounts(**s, "a"),
        (Counts{{{"ps", "pending"}, 1}, {{"worker", "pending"}, 2}, {{"worker", "running"}, 1}}));

    // A transaction that fails changes neither the tasks nor the counts.
    Changes failing = NewExperiment("a", 5, ExperimentState::kRunning);  // id taken
    failing.tasks[0].state = TaskState::kFailed;
    ASSERT_EQ((*s)->Apply(failing).code(), StatusCode::kAlreadyExists);
    EXPECT_EQ(
        ListedCounts(**s, "a"),
        (Counts{{{"ps", "pending"}, 1}, {{"worker", "pending"}, 2}, {{"worker", "running"}, 1}}));

    Changes ended;
    task.state = TaskState::kSucceeded;
    ended.tasks.push_back(task);
    ASSERT_TRUE((*s)->Apply(ended).ok());
  }
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(
      ListedCounts(**s, "a"),
      (Counts{{{"ps", "pending"}, 1}, {{"worker", "pending"}, 2}, {{"worker", "succeeded"}, 1}}));
}

TEST_F(StoreTest, ListedTaskCountsAreThoseOfTheCurrentAttempt) {
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE((*s)->Apply(OnFirstAttempt(NewExperiment("a", 1, ExperimentState::kRunning))).ok());
  EXPECT_EQ(ListedCounts(**s, "a"), (Counts{{{"ps", "pending"}, 1}}));

  // Attempt 2 with two workers becomes current, in two transactions.
  ExperimentRecord e = *(*s)->GetExperiment("a");
  Changes attempt2;
  AttemptRecord a = (*s)->ListAttempts("a")->front();
  a.number = 2;
  attempt2.attempts.push_back(a);
  for (int proc = 0; proc < 2; ++proc) {
    TaskRecord t;
    t.experiment_id = "a";
    t.attempt = 2;
    t.task = TaskIndex(proc);
    t.role = "worker";
    t.state = TaskState::kRunning;
    attempt2.tasks.push_back(t);
  }
  ASSERT_TRUE((*s)->Apply(attempt2).ok());
  EXPECT_EQ(ListedCounts(**s, "a"), (Counts{{{"ps", "pending"}, 1}}))
      << "attempt 1 is still current";
  Changes current;
  e.current_attempt = 2;
  current.experiment = e;
  ASSERT_TRUE((*s)->Apply(current).ok());
  EXPECT_EQ(ListedCounts(**s, "a"), (Counts{{{"worker", "running"}, 2}}));

  // Finished: no counts. Resumed (open again): counted again.
  e.state = ExperimentState::kCancelled;
  current.experiment = e;
  ASSERT_TRUE((*s)->Apply(current).ok());
  EXPECT_EQ(ListedCounts(**s, "a"), Counts{});
  e.state = ExperimentState::kRunning;
  current.experiment = e;
  ASSERT_TRUE((*s)->Apply(current).ok());
  EXPECT_EQ(ListedCounts(**s, "a"), (Counts{{{"worker", "running"}, 2}}));

  // Deleted and created again under the same id.
  Changes again = OnFirstAttempt(NewExperiment("a", 7, ExperimentState::kQueued));
  again.delete_experiment = "a";
  ASSERT_TRUE((*s)->Apply(again).ok());
  EXPECT_EQ(ListedCounts(**s, "a"), (Counts{{{"ps", "pending"}, 1}}));
}

TEST_F(StoreTest, CheckpointsTheWalOffTheCommittingThread) {
  SqliteOptions options;
  options.checkpoint_wal_pages = 8;
  options.checkpoint_interval = std::chrono::hours(1);
  auto s = OpenSqliteStore(path_, options);
  ASSERT_TRUE(s.ok()) << s.status().message();
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(
        (*s)->Apply(NewExperiment("e" + std::to_string(i), i, ExperimentState::kRunning)).ok());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (WalCheckpointsForTest(**s) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_GT(WalCheckpointsForTest(**s), 0) << "the WAL passed 8 pages";
}

TEST_F(StoreTest, CheckpointsOnAnIntervalAndRemovesTheWalAtClose) {
  SqliteOptions options;
  options.checkpoint_wal_pages = 1 << 30;
  options.checkpoint_interval = std::chrono::milliseconds(10);
  {
    auto s = OpenSqliteStore(path_, options);
    ASSERT_TRUE(s.ok()) << s.status().message();
    ASSERT_TRUE((*s)->Apply(NewExperiment("a", 1, ExperimentState::kRunning)).ok());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (WalCheckpointsForTest(**s) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(WalCheckpointsForTest(**s), 1);
  }
  EXPECT_FALSE(fs::exists(path_ + "-wal")) << "closing checkpoints everything";
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->GetExperiment("a")->state, ExperimentState::kRunning);
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

// A name the store holds that is not in its enum's table (damage, or a bug)
// is an error naming the row and the name: read as a default, an attempt
// would be acted on as ended, a task as lost.
TEST_F(StoreTest, AStoredNameThatIsNotInItsTableIsAnError) {
  {
    auto s = OpenSqliteStore(path_);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->Apply(NewExperiment("a", 1, ExperimentState::kQueued)).ok());
  }
  sqlite3* db;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "UPDATE attempts SET state='halted'; UPDATE tasks SET state='gone'; "
                         "UPDATE events SET what='noted'; UPDATE experiments SET state='paused'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE(s.ok());
  auto attempts = (*s)->ListAttempts("a");
  ASSERT_FALSE(attempts.ok());
  EXPECT_EQ(attempts.status().code(), StatusCode::kInternal);
  EXPECT_NE(attempts.status().message().find("attempt state 'halted' for attempt 1 of a"),
            std::string::npos)
      << attempts.status().message();
  EXPECT_EQ((*s)->ListTasks("a", 1).status().code(), StatusCode::kInternal);
  EXPECT_EQ((*s)->ListEvents("a", 10).status().code(), StatusCode::kInternal);
  EXPECT_EQ((*s)->GetExperiment("a").status().code(), StatusCode::kInternal);
  EXPECT_FALSE((*s)->ListExperiments({}).ok()) << "the list's summaries are read the same way";
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
  // Undo migrations 15, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3 and 2 (14's
  // table goes with 10's).
  ASSERT_EQ(sqlite3_exec(db,
                         "ALTER TABLE tasks RENAME COLUMN task_index TO proc_id; "
                         "ALTER TABLE attempts DROP COLUMN node_slots; "
                         "ALTER TABLE tasks DROP COLUMN startup_error; "
                         "ALTER TABLE tasks DROP COLUMN restarts; "
                         "DROP TABLE sweep_trials; DROP TABLE sweeps; "
                         "DROP TABLE spec_revisions; ALTER TABLE attempts DROP COLUMN "
                         "spec_revision; ALTER TABLE experiments DROP COLUMN spec_revision; "
                         "ALTER TABLE attempts DROP COLUMN in_place; "
                         "ALTER TABLE tasks DROP COLUMN detail; "
                         "DROP TABLE scalars; DROP TABLE scalar_tags; "
                         "ALTER TABLE experiments DROP COLUMN excluded_nodes; "
                         "ALTER TABLE tasks DROP COLUMN local_rank; "
                         "DROP INDEX tasks_by_role_state; DROP INDEX experiments_by_created; "
                         "CREATE INDEX experiments_by_created ON experiments(created_at DESC, id); "
                         "DROP TABLE tokens; PRAGMA user_version=1",
                         nullptr, nullptr, nullptr),
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
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_master WHERE name='tasks_by_role_state'",
                               -1, &st, nullptr),
            SQLITE_OK);
  EXPECT_EQ(sqlite3_step(st), SQLITE_ROW) << "migration 3 must have created the tasks index";
  sqlite3_finalize(st);
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT local_rank FROM tasks", -1, &st, nullptr), SQLITE_OK)
      << "migration 4 must have added tasks.local_rank";
  sqlite3_finalize(st);
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT excluded_nodes FROM experiments", -1, &st, nullptr),
            SQLITE_OK)
      << "migration 5 must have added experiments.excluded_nodes";
  sqlite3_finalize(st);
  EXPECT_TRUE((*s)->ReadScalars("old", {}).ok()) << "migration 6 must have added the scalars";
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT detail FROM tasks", -1, &st, nullptr), SQLITE_OK)
      << "migration 7 must have added tasks.detail";
  sqlite3_finalize(st);
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT in_place FROM attempts", -1, &st, nullptr), SQLITE_OK)
      << "migration 8 must have added attempts.in_place";
  sqlite3_finalize(st);
  EXPECT_EQ((*s)->GetExperiment("old")->spec_revision, 1);
  auto revisions = (*s)->ListSpecRevisions("old");
  ASSERT_TRUE(revisions.ok()) << revisions.status().message();
  ASSERT_EQ(revisions->size(), 1u) << "migration 9 must keep each spec as its revision 1";
  EXPECT_EQ(revisions->at(0).spec_json, (*s)->GetExperiment("old")->spec_json);
  auto sweeps = (*s)->ListSweeps({});
  ASSERT_TRUE(sweeps.ok()) << "migration 10 must have added the sweeps: "
                           << sweeps.status().message();
  EXPECT_TRUE(sweeps->empty());
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT restarts, startup_error FROM tasks", -1, &st, nullptr),
            SQLITE_OK)
      << "migrations 11 and 12 must have added tasks.restarts and tasks.startup_error";
  sqlite3_finalize(st);
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT node_slots FROM attempts", -1, &st, nullptr), SQLITE_OK)
      << "migration 13 must have added attempts.node_slots";
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST_F(StoreTest, SpecRevisionsRoundTripAndGoWithTheirExperiment) {
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE(s.ok());
  Changes c = NewExperiment("a", 1, ExperimentState::kQueued);
  c.experiment->spec_revision = 2;
  c.attempts.at(0).spec_revision = 2;
  c.spec_revisions = {{"a", 1, "{\"v\":1}", 10, ""}, {"a", 2, "{\"v\":2}", 20, "env.LR"}};
  ASSERT_TRUE((*s)->Apply(c).ok());
  EXPECT_EQ((*s)->GetExperiment("a")->spec_revision, 2);
  EXPECT_EQ((*s)->ListAttempts("a")->at(0).spec_revision, 2);
  auto revisions = (*s)->ListSpecRevisions("a");
  ASSERT_EQ(revisions->size(), 2u);
  EXPECT_EQ(revisions->at(1).spec_json, "{\"v\":2}");
  EXPECT_EQ(revisions->at(1).changes, "env.LR");
  EXPECT_EQ(revisions->at(1).created_at, 20);
  Changes again;
  again.spec_revisions = {{"a", 2, "{}", 30, ""}};
  EXPECT_EQ((*s)->Apply(again).code(), StatusCode::kAlreadyExists)
      << "a revision is never rewritten";
  Changes gone;
  gone.delete_experiment = "a";
  ASSERT_TRUE((*s)->Apply(gone).ok());
  EXPECT_TRUE((*s)->ListSpecRevisions("a")->empty());
}

}  // namespace
}  // namespace tfslurm::store
