#include "service/api/list_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <vector>

#include "service/api/experiments_json.h"
#include "service/store/sqlite_store.h"
#include "tests/unit/test_dir.h"

namespace tfslurm::api {
namespace {

namespace fs = std::filesystem;

Changes NewExperiment(const std::string& id, int64_t created, ExperimentState state,
                      const std::string& owner = "alice") {
  Changes c;
  c.create_experiment = true;
  ExperimentRecord e;
  e.id = id;
  e.owner = owner;
  e.spec_json = "{}";
  e.state = state;
  e.current_attempt = 1;
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

// A real SQLite store in a new directory, and a cache over it that is told
// of every commit as core tells its observers (Experiments::Apply).
class ExperimentListCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("list-cache-test");
    auto opened = store::OpenSqliteStore((dir_ / "t.db").string());
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    store_ = std::move(opened).value();
    cache_ = std::make_unique<ExperimentListCache>(CountingSource());
  }
  void TearDown() override {
    cache_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }

  // The store as a ListSource that counts pages read and remembers whose
  // summaries were read.
  ListSource CountingSource() {
    return {[this](const ListQuery& q, const NeedSummary& need) {
              ++pages_;
              return store_->ListPage(q, [&](const std::string& id) {
                bool needed = need(id);
                if (needed) summaries_.push_back(id);
                return needed;
              });
            },
            [this](const ListQuery& q) { return store_->CountExperiments(q); }};
  }

  Status ApplyAll(const std::vector<Changes>& batch) {
    Status s = store_->ApplyAll(batch);
    // As core: a taken id is refused before anything is written.
    if (s.code() != StatusCode::kAlreadyExists) cache_->Committed(batch, s.ok());
    return s;
  }
  Status Apply(const Changes& c) { return ApplyAll({c}); }

  std::string Body(const ListQuery& q = {}) {
    auto body = cache_->Body(q);
    EXPECT_TRUE(body.ok()) << body.status().message();
    return body.ok() ? *body : "";
  }
  // The body made from the store alone, without any cache.
  std::string Uncached(const ListQuery& q = {}) {
    auto page = store_->ListExperiments(q);
    auto total = store_->CountExperiments(q);
    EXPECT_TRUE(page.ok() && total.ok());
    if (!page.ok() || !total.ok()) return "";
    std::vector<std::shared_ptr<const std::string>> items;
    for (const ExperimentSummary& s : *page)
      items.push_back(std::make_shared<const std::string>(ExperimentSummaryJson(s)));
    return ExperimentListJson(items, *total, q.limit, q.offset);
  }
  TaskRecord Task(const std::string& id) { return (*store_->ListTasks(id, 1))[0]; }
  // Pages read and summaries read since the last call.
  std::pair<int, std::vector<std::string>> Reads() {
    std::pair<int, std::vector<std::string>> reads{pages_, summaries_};
    pages_ = 0;
    summaries_.clear();
    return reads;
  }

  fs::path dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ExperimentListCache> cache_;
  int pages_ = 0;
  std::vector<std::string> summaries_;
};

using PagesAndSummaries = std::pair<int, std::vector<std::string>>;

TEST_F(ExperimentListCacheTest, ListVersionGrowsWithEveryWriteAListShowsAndOnlyThen) {
  ExperimentListCache& cache = *cache_;
  uint64_t v = cache.ListVersion();
  auto grew = [&](const char* what) {
    uint64_t now = cache.ListVersion();
    EXPECT_GT(now, v) << what << " must change the version: lists cached by it would go stale";
    v = now;
  };
  auto stayed = [&](const char* what) {
    EXPECT_EQ(cache.ListVersion(), v) << what << " changes nothing a list shows";
  };
  ASSERT_TRUE(Apply(NewExperiment("a", 1, ExperimentState::kRunning)).ok());
  grew("creating an experiment");

  Body();
  ASSERT_TRUE(store_->GetExperiment("a").ok());
  stayed("reading");

  TaskRecord t = Task("a");
  Changes heartbeat;
  t.last_heartbeat = 5;
  heartbeat.tasks.push_back(t);
  ASSERT_TRUE(Apply(heartbeat).ok());
  stayed("a heartbeat (same role and state)");

  Changes event;
  event.events.push_back({0, "a", 1, 2, EventCode::kHeartbeat, "why"});
  ASSERT_TRUE(Apply(event).ok());
  stayed("an event");

  Changes running;
  t.state = TaskState::kRunning;
  running.tasks.push_back(t);
  ASSERT_TRUE(Apply(running).ok());
  grew("a task's state");
  ASSERT_TRUE(Apply(running).ok());
  stayed("the same state written again");

  Changes other_role;
  t.role = "worker";
  other_role.tasks.push_back(t);
  ASSERT_TRUE(Apply(other_role).ok());
  grew("a task's role");

  Changes new_task;
  TaskRecord second = t;
  second.task = TaskIndex(1);
  new_task.tasks.push_back(second);
  ASSERT_TRUE(Apply(new_task).ok());
  grew("a task not seen before");

  Changes attempt;
  AttemptRecord a = (*store_->ListAttempts("a"))[0];
  a.slurm_state = "RUNNING";
  attempt.attempts.push_back(a);
  ASSERT_TRUE(Apply(attempt).ok());
  grew("an attempt's Slurm state");

  Changes experiment;
  experiment.experiment = *store_->GetExperiment("a");
  experiment.experiment->reason = "training";
  ASSERT_TRUE(Apply(experiment).ok());
  grew("the experiment's row");

  ASSERT_EQ(Apply(NewExperiment("a", 3, ExperimentState::kQueued)).code(),
            StatusCode::kAlreadyExists);
  stayed("a write refused before anything was written");

  Changes gone;
  gone.delete_experiment = "a";
  ASSERT_TRUE(Apply(gone).ok());
  grew("deleting an experiment");
}

TEST_F(ExperimentListCacheTest, TasksOfAnotherAttemptOrAFinishedExperimentCountAsChanges) {
  ASSERT_TRUE(Apply(NewExperiment("a", 1, ExperimentState::kRunning)).ok());
  uint64_t v = cache_->ListVersion();
  TaskRecord t = Task("a");
  t.attempt = 2;
  Changes attempt2;
  AttemptRecord a = (*store_->ListAttempts("a"))[0];
  a.number = 2;
  attempt2.attempts.push_back(a);
  attempt2.tasks.push_back(t);
  ASSERT_TRUE(Apply(attempt2).ok());
  EXPECT_GT(cache_->ListVersion(), v);
  v = cache_->ListVersion();
  Changes heartbeat;
  heartbeat.tasks.push_back(t);
  ASSERT_TRUE(Apply(heartbeat).ok());
  EXPECT_EQ(cache_->ListVersion(), v) << "attempt 2's task was seen as it is";
  heartbeat.tasks[0] = Task("a");  // attempt 1's, an earlier attempt than seen
  ASSERT_TRUE(Apply(heartbeat).ok());
  EXPECT_GT(cache_->ListVersion(), v) << "not seen: judged changed";

  Changes finished;
  finished.experiment = *store_->GetExperiment("a");
  finished.experiment->state = ExperimentState::kSucceeded;
  ASSERT_TRUE(Apply(finished).ok());
  v = cache_->ListVersion();
  heartbeat.tasks[0] = t;
  ASSERT_TRUE(Apply(heartbeat).ok());
  EXPECT_GT(cache_->ListVersion(), v) << "a finished experiment's tasks are forgotten";
}

TEST_F(ExperimentListCacheTest, ABatchIsJudgedSetBySet) {
  ASSERT_TRUE(Apply(NewExperiment("a", 1, ExperimentState::kRunning)).ok());
  uint64_t v = cache_->ListVersion();
  uint64_t a_version = cache_->ItemVersion("a");
  TaskRecord t = Task("a");
  std::vector<Changes> batch(3);
  t.last_heartbeat = 1;
  batch[0].tasks.push_back(t);  // a heartbeat
  t.state = TaskState::kRunning;
  batch[1].tasks.push_back(t);  // a change
  t.last_heartbeat = 2;
  batch[2].tasks.push_back(t);  // a heartbeat of the state set just before
  ASSERT_TRUE(ApplyAll(batch).ok());
  EXPECT_EQ(cache_->ListVersion(), v + 1) << "one set of three changed a list";
  EXPECT_EQ(cache_->ItemVersion("a"), v + 1);
  EXPECT_GT(cache_->ItemVersion("a"), a_version);
  EXPECT_EQ(Body(), Uncached());
}

TEST_F(ExperimentListCacheTest, ItemVersionsChangeWithTheirOwnExperimentsWritesOnly) {
  for (const char* id : {"a", "b"})
    ASSERT_TRUE(Apply(NewExperiment(id, id[0], ExperimentState::kRunning)).ok());
  std::map<std::string, uint64_t> before{{"a", cache_->ItemVersion("a")},
                                         {"b", cache_->ItemVersion("b")}};
  EXPECT_NE(before["a"], before["b"]);
  auto versions = [&] {
    return std::map<std::string, uint64_t>{{"a", cache_->ItemVersion("a")},
                                           {"b", cache_->ItemVersion("b")}};
  };

  TaskRecord t = Task("a");
  t.last_heartbeat = 9;
  Changes heartbeat;
  heartbeat.tasks.push_back(t);
  heartbeat.events.push_back({0, "a", 1, 9, EventCode::kHeartbeat, "why"});
  ASSERT_TRUE(Apply(heartbeat).ok());
  EXPECT_EQ(versions(), before) << "a heartbeat and an event change no item";

  using Change = std::function<void(Changes&)>;
  for (const Change& change : {Change([&](Changes& c) {
                                 t.state = TaskState::kRunning;
                                 c.tasks.push_back(t);
                               }),
                               Change([&](Changes& c) {
                                 AttemptRecord a = (*store_->ListAttempts("a"))[0];
                                 a.nodes = "node1";
                                 c.attempts.push_back(a);
                               }),
                               Change([&](Changes& c) {
                                 c.experiment = *store_->GetExperiment("a");
                                 c.experiment->reason = "training";
                               })}) {
    Changes c;
    change(c);
    ASSERT_TRUE(Apply(c).ok());
    auto after = versions();
    EXPECT_GT(after["a"], before["a"]) << "a's item changed: an item kept at its version is stale";
    EXPECT_EQ(after["b"], before["b"]) << "b's item did not change";
    before = after;
  }
  ASSERT_EQ(Apply(NewExperiment("b", 5, ExperimentState::kQueued)).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(versions(), before) << "a write refused before anything was written";

  // Deleted, then created again under the same id: a version of its own.
  Changes gone;
  gone.delete_experiment = "b";
  ASSERT_TRUE(Apply(gone).ok());
  EXPECT_GT(cache_->ItemVersion("b"), before["b"]) << "versions never go back";
  uint64_t deleted = cache_->ItemVersion("b");
  ASSERT_TRUE(Apply(NewExperiment("b", 'b', ExperimentState::kQueued)).ok());
  auto again = versions();
  EXPECT_GT(again["b"], deleted);
  EXPECT_EQ(again["a"], before["a"]);
}

TEST_F(ExperimentListCacheTest, ACommitThatMayHaveFailedCountsAsAChangeAndForgets) {
  ASSERT_TRUE(Apply(NewExperiment("a", 1, ExperimentState::kRunning)).ok());
  ASSERT_TRUE(Apply(NewExperiment("b", 2, ExperimentState::kRunning)).ok());
  TaskRecord t = Task("a");
  Changes heartbeat;
  heartbeat.tasks.push_back(t);
  ASSERT_TRUE(Apply(heartbeat).ok());
  uint64_t v = cache_->ListVersion();
  uint64_t b_version = cache_->ItemVersion("b");
  ASSERT_EQ(Body(), Uncached());

  // A COMMIT that failed: the store may or may not hold it.
  cache_->Committed({&heartbeat, 1}, false);
  EXPECT_GT(cache_->ListVersion(), v) << "counted as a change";
  EXPECT_GT(cache_->ItemVersion("a"), v);
  EXPECT_EQ(cache_->ItemVersion("b"), b_version) << "only the experiments it names";
  v = cache_->ListVersion();
  ASSERT_TRUE(Apply(heartbeat).ok());
  EXPECT_GT(cache_->ListVersion(), v) << "what was known of a's tasks is forgotten";
  v = cache_->ListVersion();
  ASSERT_TRUE(Apply(heartbeat).ok());
  EXPECT_EQ(cache_->ListVersion(), v) << "and learnt again from the next commit";
  EXPECT_EQ(Body(), Uncached());
}

TEST_F(ExperimentListCacheTest, ACacheMadeAfterTheWritesLearnsTheTasksFromTheNextOnes) {
  ASSERT_TRUE(Apply(NewExperiment("a", 1, ExperimentState::kRunning)).ok());
  // As after a restart of tfslurmd: the store holds tasks the cache never saw.
  cache_ = std::make_unique<ExperimentListCache>(CountingSource());
  EXPECT_EQ(Body(), Uncached());
  uint64_t v = cache_->ListVersion();
  Changes heartbeat;
  heartbeat.tasks.push_back(Task("a"));
  ASSERT_TRUE(Apply(heartbeat).ok());
  EXPECT_GT(cache_->ListVersion(), v) << "a task not seen yet counts as a change";
  v = cache_->ListVersion();
  ASSERT_TRUE(Apply(heartbeat).ok());
  EXPECT_EQ(cache_->ListVersion(), v);
}

TEST_F(ExperimentListCacheTest, BodiesAreReusedWhileTheVersionStaysAndItemsWhileTheirsDo) {
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(
        Apply(NewExperiment("e" + std::to_string(i), 10 + i, ExperimentState::kRunning)).ok());
  std::string body = Body();
  EXPECT_EQ(body, Uncached()) << "byte for byte what the store's summaries make";
  EXPECT_EQ(Reads(), (PagesAndSummaries{1, {"e3", "e2", "e1", "e0"}}));
  EXPECT_EQ(cache_->ItemsKept(), 4u);

  EXPECT_EQ(Body(), body);
  EXPECT_EQ(Reads(), (PagesAndSummaries{0, {}})) << "the same version: the body is kept";

  Changes heartbeat;
  TaskRecord t = Task("e1");
  t.last_heartbeat = 7;
  heartbeat.tasks.push_back(t);
  heartbeat.events.push_back({0, "e1", 1, 7, EventCode::kHeartbeat, "why"});
  ASSERT_TRUE(Apply(heartbeat).ok());
  EXPECT_EQ(Body(), body);
  EXPECT_EQ(Reads(), (PagesAndSummaries{0, {}})) << "a heartbeat changes no list";

  Changes running;
  t.state = TaskState::kRunning;
  running.tasks.push_back(t);
  ASSERT_TRUE(Apply(running).ok());
  std::string after = Body();
  EXPECT_NE(after, body);
  EXPECT_EQ(after, Uncached());
  EXPECT_EQ(Reads(), (PagesAndSummaries{1, {"e1"}}))
      << "only the changed experiment's summary is read";

  Changes reason;
  reason.experiment = *store_->GetExperiment("e3");
  reason.experiment->reason = "training";
  reason.experiment->state = ExperimentState::kSucceeded;
  ASSERT_TRUE(Apply(reason).ok());
  EXPECT_EQ(Body(), Uncached());
  EXPECT_EQ(Reads(), (PagesAndSummaries{1, {"e3"}}));

  Changes gone;
  gone.delete_experiment = "e2";
  ASSERT_TRUE(Apply(gone).ok());
  EXPECT_EQ(Body(), Uncached());
  EXPECT_EQ(Reads(), (PagesAndSummaries{1, {}})) << "the others' items are kept";
  EXPECT_EQ(cache_->ItemsKept(), 3u) << "the deleted one's item goes";

  ASSERT_TRUE(Apply(NewExperiment("e2", 12, ExperimentState::kQueued)).ok());
  EXPECT_EQ(Body(), Uncached());
  EXPECT_EQ(Reads(), (PagesAndSummaries{1, {"e2"}}));

  // A cache with nothing kept makes the same body.
  ExperimentListCache fresh(ListSourceOf(*store_));
  EXPECT_EQ(*fresh.Body({}), Body());
}

TEST_F(ExperimentListCacheTest, EachQueryHasABodyOfItsOwn) {
  ASSERT_TRUE(Apply(NewExperiment("a", 1, ExperimentState::kRunning, "alice")).ok());
  ASSERT_TRUE(Apply(NewExperiment("b", 2, ExperimentState::kQueued, "bob")).ok());
  ASSERT_TRUE(Apply(NewExperiment("c", 3, ExperimentState::kFailed, "alice")).ok());
  ListQuery alice;
  alice.owner = "alice";
  ListQuery running;
  running.states = {ExperimentState::kRunning, ExperimentState::kQueued};
  ListQuery second;
  second.limit = 1;
  second.offset = 1;
  for (int round = 0; round < 2; ++round) {
    for (const ListQuery& q : {ListQuery{}, alice, running, second})
      EXPECT_EQ(Body(q), Uncached(q)) << "round " << round;
  }
  EXPECT_EQ(Reads().first, 4) << "one page each, kept for the second round";
}

TEST_F(ExperimentListCacheTest, BodiesStayBoundedWhateverTheNumberOfQueries) {
  ASSERT_TRUE(Apply(NewExperiment("a", 1, ExperimentState::kRunning)).ok());
  auto query = [](size_t i) {
    ListQuery q;
    q.offset = static_cast<int>(i);
    return q;
  };
  const size_t n = 10 * ExperimentListCache::kMaxBodies;
  for (size_t i = 0; i < n; ++i) Body(query(i));
  Reads();
  for (size_t i = n; i-- > 0;) Body(query(i));  // the newest first
  size_t kept = n - static_cast<size_t>(Reads().first);
  EXPECT_LE(kept, ExperimentListCache::kMaxBodies);
  EXPECT_GE(kept, 1u) << "the newest body is kept";
}

// A list source without a store: experiments e000.. with made-up summaries,
// newest (highest number) first, and a hook run once the page's ids are
// read, before `need` is asked.
struct FakeSource {
  int experiments = 0;
  std::function<void()> after_ids;
  int summaries = 0;
  Status fail = Status::Ok();

  ListSource Source() {
    return {[this](const ListQuery& q,
                   const NeedSummary& need) -> StatusOr<std::vector<ListedExperiment>> {
              if (!fail.ok()) return fail;
              if (after_ids) after_ids();
              std::vector<ListedExperiment> page;
              for (int i = experiments - 1 - q.offset; i >= 0 && page.size() < size_t(q.limit);
                   --i) {
                char id[16];
                snprintf(id, sizeof id, "e%03d", i);
                ListedExperiment listed;
                listed.id = id;
                if (need(listed.id)) {
                  ++summaries;
                  ExperimentSummary s;
                  s.experiment.id = id;
                  s.experiment.reason = "summary " + std::to_string(summaries);
                  listed.summary = s;
                }
                page.push_back(std::move(listed));
              }
              return page;
            },
            [this](const ListQuery&) -> StatusOr<int64_t> { return experiments; }};
  }
};

Changes ReasonOf(const std::string& id) {
  Changes c;
  c.experiment = ExperimentRecord{};
  c.experiment->id = id;
  return c;
}

TEST(ExperimentListCacheFakeTest, ACommitCountedWhileAListIsReadKeepsNeitherItsBodyNorItsItem) {
  FakeSource fake;
  fake.experiments = 2;
  ExperimentListCache cache(fake.Source());
  ASSERT_TRUE(cache.Body({}).ok());
  EXPECT_EQ(fake.summaries, 2);

  // e001 changed and the list is read again; meanwhile e001 changes once
  // more and its commit is counted before the list asks about e001: the
  // summary may be from before that commit.
  Changes change = ReasonOf("e001");
  cache.Committed({&change, 1}, true);
  bool once = true;
  fake.after_ids = [&] {
    if (once) cache.Committed({&change, 1}, true);
    once = false;
  };
  ASSERT_TRUE(cache.Body({}).ok());
  EXPECT_EQ(fake.summaries, 3) << "e001's summary read";

  ASSERT_TRUE(cache.Body({}).ok());
  EXPECT_EQ(fake.summaries, 4) << "neither the body nor e001's item was kept";
  ASSERT_TRUE(cache.Body({}).ok());
  EXPECT_EQ(fake.summaries, 4) << "now both are";
}

TEST(ExperimentListCacheFakeTest, ItemsStayBoundedWhateverTheNumberOfExperiments) {
  FakeSource fake;
  fake.experiments = 3 * ExperimentListCache::kMaxItems;
  ExperimentListCache cache(fake.Source());
  ListQuery q;
  q.limit = 1000;
  for (q.offset = 0; q.offset < fake.experiments; q.offset += q.limit) {
    ASSERT_TRUE(cache.Body(q).ok());
    EXPECT_LE(cache.ItemsKept(), ExperimentListCache::kMaxItems);
  }
  EXPECT_GE(cache.ItemsKept(), 1000u) << "the newest page's items are kept";
  int read = fake.summaries;
  q.offset -= q.limit;
  Changes other = ReasonOf("elsewhere");
  cache.Committed({&other, 1}, true);  // a new list version: the body is stale
  ASSERT_TRUE(cache.Body(q).ok());
  EXPECT_EQ(fake.summaries, read) << "the last page's items were kept";
}

TEST(ExperimentListCacheFakeTest, AFailedReadIsAnsweredAndNothingKept) {
  FakeSource fake;
  fake.experiments = 1;
  fake.fail = Unavailable("database is locked");
  ExperimentListCache cache(fake.Source());
  auto body = cache.Body({});
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.status().code(), StatusCode::kUnavailable);
  fake.fail = Status::Ok();
  ASSERT_TRUE(cache.Body({}).ok());
  EXPECT_EQ(fake.summaries, 1);
  EXPECT_EQ(cache.ItemsKept(), 1u);
}

}  // namespace
}  // namespace tfslurm::api
