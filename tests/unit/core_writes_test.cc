// How core writes to the store: in the order it decided, and the barrier's
// commit (every task's row) without holding core's lock (core_state.h,
// CommitAfterUnlock). Built from core's parts rather than through
// NewCore, so that a commit observer can look at the lock.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "service/core/agent_protocol.h"
#include "service/core/core_state.h"
#include "service/core/submission.h"
#include "service/store/sqlite_store.h"
#include "tests/unit/core_test.h"

namespace tfslurm {
namespace {

using testing::FakeSlurm;
using testing::RecordingChannel;

// Whether some thread holds `mu`. Asked from another thread: try_lock by
// the holder itself is undefined.
bool HeldByAnyone(Mutex& mu) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  bool held = true;
  std::thread([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (mu.try_lock()) {
      held = false;
      mu.unlock();
    }
  }).join();
  return held;
}

// Every batch core writes, in order, with whether core's lock was held
// while it was written (observers are told right after the transaction,
// by the thread that wrote it).
class WriteWatcher final : public CommitObserver {
 public:
  struct Write {
    std::vector<Changes> batch;
    bool under_core_lock = false;
    int running_task_rows = 0;
    std::vector<std::string> events;  // their `why`s
  };
  void Committed(std::span<const Changes> batch, bool applied) override {
    EXPECT_TRUE(applied);
    Write w;
    w.batch.assign(batch.begin(), batch.end());
    w.under_core_lock = HeldByAnyone(*core_mu);
    for (const Changes& c : batch) {
      for (const TaskRecord& t : c.tasks) w.running_task_rows += t.state == TaskState::kRunning;
      for (const EventRecord& e : c.events) w.events.push_back(e.why);
    }
    writes.push_back(std::move(w));
  }
  Mutex* core_mu = nullptr;
  std::vector<Write> writes;
};

class CoreWritesTest : public testing::CoreTest {
 protected:
  CoreWritesTest() : CoreTest("core-writes-test") {}
  void SetUp() override {
    CoreTest::SetUp();
    watcher_ = std::make_shared<WriteWatcher>();
    core_ = std::make_unique<CoreState>(Ports(), config_, metrics_,
                                        std::vector<std::shared_ptr<CommitObserver>>{watcher_});
    watcher_->core_mu = &core_->mu();
    submission_ = std::make_unique<Submission>(*core_);
    agents_ = std::make_unique<AgentProtocol>(*core_);
    nlohmann::json spec = {
        {"id", "a"},
        {"command", {"python3", "train.py"}},
        {"cluster", {{"ps", 2}, {"worker", 4}}},
        {"resources", {{"partition", "debug"}, {"nodes", 3}, {"tasks_per_node", 2}}}};
    ASSERT_TRUE(submission_->Submit(spec, "alice", SubmitOptions{}).ok());
    watcher_->writes.clear();
  }
  void TearDown() override {
    agents_.reset();
    submission_.reset();
    core_.reset();
    CoreTest::TearDown();
  }

  void Register(int proc) {
    RegisterInfo info;
    info.node_name = "node" + std::to_string(proc / 2 + 1);
    info.address = "host" + std::to_string(proc / 2 + 1);
    info.port = 5000 + proc;
    info.local_id = proc % 2;
    channels_.push_back(std::make_shared<RecordingChannel>());
    agents_->OnRegister({"a", 1, FakeSlurm::SecretOf(slurm_.submitted.at(0)), ProcId(proc)}, info,
                        channels_.back());
  }

  // An event of experiment "a" in a set of changes of its own.
  Changes EventChanges(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_->mu()) {
    Changes c;
    core_->Event(c, *core_->Find("a"), EventCode::kHeartbeat, why);
    return c;
  }

  NoMetrics metrics_;
  std::shared_ptr<WriteWatcher> watcher_;
  std::unique_ptr<CoreState> core_;
  std::unique_ptr<Submission> submission_;
  std::unique_ptr<AgentProtocol> agents_;
  std::vector<std::shared_ptr<RecordingChannel>> channels_;
};

TEST_F(CoreWritesTest, TheBarriersCommitIsWrittenWithoutCoresLockBeforeTheLastRegisterReturns) {
  for (int p = 0; p < 6; ++p) Register(p);
  for (int p = 0; p < 6; ++p) ASSERT_EQ(channels_[p]->All<AssignmentMsg>().size(), 1u) << p;
  std::vector<const WriteWatcher::Write*> barrier;
  for (const auto& w : watcher_->writes)
    if (w.running_task_rows > 0) barrier.push_back(&w);
  ASSERT_EQ(barrier.size(), 1u) << "one commit writes every task's row at the barrier";
  EXPECT_EQ(barrier[0]->running_task_rows, 6);
  EXPECT_FALSE(barrier[0]->under_core_lock)
      << "other agents' messages need not wait for the barrier's rows";
  // Written by the time the last registration returns, as before.
  auto tasks = store_->ListTasks("a", 1);
  ASSERT_TRUE(tasks.ok());
  for (const TaskRecord& t : *tasks) EXPECT_EQ(t.state, TaskState::kRunning) << t.task.value();
  EXPECT_EQ(store_->GetExperiment("a")->state, ExperimentState::kRunning);
}

TEST_F(CoreWritesTest, QueuedChangesWaitForTheLockToBeReleased) {
  {
    MutexLock lock(core_->mu());
    Changes c = EventChanges("queued");
    core_->CommitAfterUnlock(c);
    EXPECT_TRUE(c.empty()) << "taken over by the queue";
  }
  EXPECT_TRUE(watcher_->writes.empty()) << "nothing written before WriteQueued";
  core_->WriteQueued();
  ASSERT_EQ(watcher_->writes.size(), 1u);
  EXPECT_FALSE(watcher_->writes[0].under_core_lock);
  EXPECT_EQ(watcher_->writes[0].events, std::vector<std::string>{"queued"});
  core_->WriteQueued();
  EXPECT_EQ(watcher_->writes.size(), 1u) << "written once";
}

TEST_F(CoreWritesTest, ACommitAfterQueuedChangesWritesThemFirst) {
  {
    MutexLock lock(core_->mu());
    Changes first = EventChanges("first");
    core_->CommitAfterUnlock(first);
    Changes second = EventChanges("second");
    core_->Commit(second);
  }
  core_->WriteQueued();
  std::vector<std::string> order;
  for (const auto& w : watcher_->writes)
    order.insert(order.end(), w.events.begin(), w.events.end());
  EXPECT_EQ(order, (std::vector<std::string>{"first", "second"}))
      << "the store sees changes in the order core decided them";
  auto events = store_->ListEvents("a", 10);
  ASSERT_TRUE(events.ok());
  std::vector<std::string> stored;
  for (const EventRecord& e : *events)
    if (e.what == EventCode::kHeartbeat) stored.push_back(e.why);
  EXPECT_EQ(stored, (std::vector<std::string>{"first", "second"}));
}

TEST_F(CoreWritesTest, ExitReportsHeldByTheirCarrierGoToTheStoreInOneTransaction) {
  for (int p = 0; p < 6; ++p) Register(p);
  watcher_->writes.clear();
  const std::string secret = FakeSlurm::SecretOf(slurm_.submitted.at(0));
  // Worker 0 (task 2) fails; the others are shut down and report reaped,
  // all in one carrier's batch (a node stream's NodeUp).
  HeldWrites held;
  ASSERT_TRUE(
      agents_->OnExited({"a", 1, secret, ProcId(2)}, {1, std::nullopt, false, ""}, &held).ok());
  for (int p : {0, 1, 3})
    ASSERT_TRUE(
        agents_->OnExited({"a", 1, secret, ProcId(p)}, {std::nullopt, 15, true, ""}, &held).ok());
  EXPECT_TRUE(held.pending);
  EXPECT_TRUE(watcher_->writes.empty()) << "nothing written before WriteHeld";
  agents_->WriteHeld(held);
  EXPECT_FALSE(held.pending);
  ASSERT_EQ(watcher_->writes.size(), 1u) << "the four reports in one transaction";
  EXPECT_FALSE(watcher_->writes[0].under_core_lock);
  int exits = 0;
  for (const Changes& c : watcher_->writes[0].batch)
    for (const TaskRecord& t : c.tasks) exits += HasExited(t.state);
  EXPECT_EQ(exits, 4);
  auto tasks = store_->ListTasks("a", 1);
  ASSERT_TRUE(tasks.ok());
  int ended = 0;
  for (const TaskRecord& t : *tasks) ended += HasExited(t.state);
  EXPECT_EQ(ended, 4) << "in the store when WriteHeld returns";
  agents_->WriteHeld(held);
  EXPECT_EQ(watcher_->writes.size(), 1u) << "nothing more to write";

  // Without a carrier's hold, a report is in the store when OnExited returns.
  ASSERT_TRUE(
      agents_->OnExited({"a", 1, secret, ProcId(4)}, {std::nullopt, 15, true, ""}, nullptr).ok());
  EXPECT_EQ(watcher_->writes.size(), 2u);
}

}  // namespace
}  // namespace tfslurm
