// Experiments (service/core) driven from many threads at once, as the REST
// handlers, the agent endpoint and the ticker drive it: hundreds of tasks
// registering, heartbeating and exiting, Tick() polling, readers, cancels,
// bad agents. Real SQLite store; Slurm, clock and randomness are fakes. The
// end state is checked exactly; tests/run.sh also runs this under TSan.
#include <algorithm>
#include <latch>
#include <map>
#include <set>

#include "service/store/sqlite_store.h"
#include "tests/concurrency/harness.h"

namespace tfslurm::concurrency {
namespace {

using nlohmann::json;
using testing::RecordingChannel;

constexpr int kChief = 1, kPs = 4, kWorkers = 59, kTasks = kChief + kPs + kWorkers;  // 16 nodes x 4

json LoadSpec(const std::string& id, bool spread) {
  return {{"id", id},
          {"command", {"python3", "train.py"}},
          {"cluster", {{"chief", kChief}, {"ps", kPs}, {"worker", kWorkers}}},
          {"resources", {{"nodes", 16}, {"tasks_per_node", 4}}},
          {"placement", spread ? "spread" : "pack"},
          {"success", "all_workers"}};
}

class ExperimentsConcurrencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(store::OpenSqliteStore((dir_.path() / "db").string())).value();
    CoreConfig config;
    config.output_root = (dir_.path() / "out").string();
    config.launch = {"/opt/tfslurm-agent", "svc:1"};
    config.poll_interval_ms = 10;
    // Fake time runs fast (the ticker advances it); nothing here should
    // time out or go lost.
    config.barrier_timeout_ms = 24 * 3600 * 1000;
    config.heartbeat_interval_ms = 3600 * 1000;
    config.shutdown_grace_ms = 3600 * 1000;
    experiments_ = NewCore({*store_, slurm_, clock_, random_, files_, accounts_}, config);
  }
  void TearDown() override {
    StopBackground();
    experiments_.reset();
  }

  // The ticker, as tfslurmd runs it (one thread), with fake time moving: it
  // polls Slurm while submissions are under way.
  void StartTicker() {
    background_.emplace_back([this] {
      while (!stop_) {
        clock_.Advance(5);
        experiments_->Tick();
        std::this_thread::yield();
      }
    });
  }
  void StopBackground() {
    stop_ = true;
    for (auto& t : background_) t.join();
    background_.clear();
  }

  // Every experiment final and its last job seen ended: nothing left in memory.
  bool AllEnded(const std::vector<std::string>& ids) {
    for (const auto& id : ids) {
      auto v = experiments_->Get(id);
      if (!v.ok() || !IsTerminal(v->experiment.state) || v->attempts.empty() ||
          v->attempts.back().state != AttemptState::kEnded)
        return false;
    }
    return true;
  }

  // Slurm runs the job on the 16 nodes its tasks name (node1 to node16): a
  // task's node missing from the job's would be a node that left the job.
  void SetJobState(int64_t job, JobState state) {
    slurm_.With([&](testing::FakeSlurm& f) {
      f.SetState(job, state);
      f.jobs[job].nodes = "node[1-16]";
      f.jobs[job].node_names.clear();
      for (int n = 1; n <= 16; ++n) f.jobs[job].node_names.push_back("node" + std::to_string(n));
    });
  }
  // Experiment `id`'s events, a line each, for a failure's message.
  std::string EventsOf(const std::string& id) {
    std::string events;
    if (auto view = experiments_->Get(id); view.ok())
      for (const auto& e : view->events)
        events += "\n  " + std::string(EventCodeName(e.what)) + ": " + e.why;
    return events;
  }

  TaskRef Ref(const std::string& id, int proc, int attempt = 1) {
    std::string secret;
    slurm_.JobOf(JobName(id, attempt), &secret);
    return {id, attempt, secret, ProcId(proc)};
  }

  TempDir dir_;
  AtomicClock clock_;
  LockedRandomness random_;
  testing::FakeFiles files_;
  testing::FakeAccounts accounts_;
  LockedSlurm slurm_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Core> experiments_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> background_;
};

// What one simulated task holds.
struct SimTask {
  std::string id;
  int proc = 0;
  bool cancelled_experiment = false;
  std::vector<std::shared_ptr<RecordingChannel>> channels;  // in order of (re)connection
  bool refused = false;
};

TEST_F(ExperimentsConcurrencyTest, HundredsOfTasksRendezvousRunAndEndWhileEverythingRunsAtOnce) {
  constexpr int kExperiments = 8, kAgentThreads = 16;  // load-6 and load-7 are cancelled
  std::vector<std::string> ids;
  for (int e = 0; e < kExperiments; ++e) ids.push_back("load-" + std::to_string(e));
  auto cancelled = [&](const std::string& id) { return id == "load-6" || id == "load-7"; };
  std::map<std::string, std::atomic<bool>> submitted;
  std::map<std::string, std::atomic<int>> registered;
  for (const auto& id : ids) submitted[id] = false, registered[id] = 0;
  std::atomic<int> violations{0};
  auto violation = [&](const std::string& what) {
    ++violations;
    ADD_FAILURE() << what;
  };

  StartTicker();
  // Readers: the REST API's GETs.
  for (int r = 0; r < 3; ++r) {
    background_.emplace_back([&, r] {
      for (int i = 0; !stop_; ++i) {
        const std::string& id = ids[(i + r) % ids.size()];
        auto v = experiments_->Get(id);
        if (v.ok() && v->tasks.size() != static_cast<size_t>(kTasks))
          violation(id + ": view with " + std::to_string(v->tasks.size()) + " tasks");
        if (!v.ok() && v.status().code() != StatusCode::kNotFound)
          violation("Get: " + v.status().message());
        ListQuery q;
        q.limit = 5;
        if (!store_->ListExperiments(q).ok() || !store_->CountExperiments(q).ok())
          violation("listing failed");
      }
    });
  }
  // A bad agent: wrong secret, wrong attempt, out-of-range task, all refused.
  background_.emplace_back([&] {
    for (int i = 0; !stop_; ++i) {
      const std::string& id = ids[i % ids.size()];
      TaskRef ref = Ref(id, i % kTasks);
      if (ref.secret.empty()) continue;
      TaskRef wrong = ref;
      wrong.secret = "guessed";
      // Without the secret, whatever the experiment's state: the answer of
      // a missing experiment.
      Status s = experiments_->OnHeartbeat(wrong);
      if (s.code() != StatusCode::kNotFound) violation("wrong secret: " + s.message());
      wrong = ref;
      wrong.attempt = 2;
      if (experiments_->OnExited(wrong, 0, std::nullopt, false).ok())
        violation("attempt 2 accepted");
      wrong = ref;
      wrong.proc_id = ProcId(kTasks + i % 3);
      if (experiments_->OnProgress(wrong, 1, "/x").ok()) violation("task out of range accepted");
      auto ch = std::make_shared<RecordingChannel>();
      wrong = ref;
      wrong.secret = "guessed";
      experiments_->OnRegister(wrong, {}, ch);
      auto refused = ch->All<RefusedMsg>();
      if (refused.size() != 1 || !ch->All<AssignmentMsg>().empty() ||
          refused[0].permanent !=
              (refused[0].reason.find("still being set up") == std::string::npos))
        violation("registration with a wrong secret: not refused, or not permanently");
    }
  });
  // Slurm: starts each job once its submission has returned.
  background_.emplace_back([&] {
    std::set<std::string> running;
    while (!stop_ && running.size() < ids.size()) {
      for (const auto& id : ids) {
        if (running.count(id) || !submitted[id]) continue;
        if (int64_t job = slurm_.JobOf(JobName(id, 1)); job) {
          SetJobState(job, JobState::kRunning);
          running.insert(id);
        }
      }
      std::this_thread::yield();
    }
  });

  // Every experiment is submitted at once.
  std::latch start(kExperiments);
  std::vector<std::thread> submitters;
  for (int e = 0; e < kExperiments; ++e) {
    submitters.emplace_back([&, e] {
      start.arrive_and_wait();
      auto r = experiments_->Submit(LoadSpec(ids[e], e % 2), e % 2 ? "alice" : "bob", false);
      if (!r.ok()) violation("submit " + ids[e] + ": " + r.status().message());
      submitted[ids[e]] = true;
    });
  }
  // Cancels: load-6 right after its submission, load-7 in mid-registration.
  std::thread canceller([&] {
    for (const auto& [id, after] :
         {std::pair<std::string, int>{"load-6", 0}, {"load-7", kTasks / 2}}) {
      // Named copies: clang 14 cannot capture a structured binding (C++20
      // allows it; clang from 16).
      const std::string& which = id;
      const int enough = after;
      if (!WaitFor([&] { return submitted[which] && registered[which] >= enough; }))
        return violation("cancel: " + id + " never reached " + std::to_string(after) +
                         " registrations");
      if (Status s = experiments_->Cancel(id, "cancelled by the test"); !s.ok())
        violation("cancel: " + s.message());
    }
  });

  // The agents: thread k plays every task with (experiment * kTasks + proc) % kAgentThreads == k.
  std::vector<SimTask> tasks;
  for (const auto& id : ids)
    for (int p = 0; p < kTasks; ++p) tasks.push_back({id, p, cancelled(id), {}, false});
  std::vector<std::thread> agents;
  for (int k = 0; k < kAgentThreads; ++k) {
    agents.emplace_back([&, k] {
      std::vector<SimTask*> mine;
      for (size_t i = k; i < tasks.size(); i += kAgentThreads) mine.push_back(&tasks[i]);
      auto job_of = [&](const SimTask& t) { return slurm_.JobOf(JobName(t.id, 1)); };
      // An agent starts when its job runs, and registers.
      for (SimTask* t : mine) {
        if (!WaitFor([&] {
              int64_t job = job_of(*t);
              return job && slurm_.StateOf(job) != JobState::kPending;
            }))
          return violation(t->id + ": job never started");
        RegisterInfo info;
        info.slurm_job_id = job_of(*t);
        info.node_name = "node" + std::to_string(t->proc / 4 + 1);
        info.address = "10.0.0." + std::to_string(t->proc / 4 + 1);
        info.port = 20000 + t->proc;
        info.local_id = t->proc % 4;
        t->channels.push_back(std::make_shared<RecordingChannel>());
        experiments_->OnRegister(Ref(t->id, t->proc), info, t->channels.back());
        ++registered[t->id];
      }
      // The barrier: every task of a running experiment gets its assignment;
      // a cancelled one's tasks are refused or killed with the job.
      for (SimTask* t : mine) {
        auto& ch = *t->channels.back();
        bool ok = WaitFor([&] {
          if (!ch.All<AssignmentMsg>().empty()) return true;
          if (!ch.All<RefusedMsg>().empty()) return t->refused = true;
          return t->cancelled_experiment && slurm_.StateOf(job_of(*t)) == JobState::kCancelled;
        });
        if (!ok) return violation(t->id + " task " + std::to_string(t->proc) + ": no assignment");
        if (t->refused && !t->cancelled_experiment)
          violation(t->id + ": refused " + ch.All<RefusedMsg>()[0].reason);
      }
      for (SimTask* t : mine) {
        if (t->cancelled_experiment) continue;
        TaskRef ref = Ref(t->id, t->proc);
        for (int i = 0; i < 3; ++i)
          if (Status s = experiments_->OnHeartbeat(ref); !s.ok())
            violation("heartbeat: " + s.message());
        if (t->proc % 8 == 3) {
          // A network blink: the agent reconnects on a new stream, then the
          // old stream's end is noticed. The new stream must stay attached.
          RegisterInfo info;
          info.reconnect = true;
          info.node_name = "node" + std::to_string(t->proc / 4 + 1);
          info.address = "10.0.0." + std::to_string(t->proc / 4 + 1);
          info.port = 20000 + t->proc;
          auto old = t->channels.back();
          t->channels.push_back(std::make_shared<RecordingChannel>());
          experiments_->OnRegister(ref, info, t->channels.back());
          experiments_->OnDisconnect(ref, old.get());
        }
        if (auto a = t->channels.front()->All<AssignmentMsg>();
            !a.empty() && a[0].report_checkpoints)
          if (Status s =
                  experiments_->OnProgress(ref, 1000 + k, "/ckpt/model-" + std::to_string(k));
              !s.ok())
            violation("progress: " + s.message());
      }
      // Workers finish; the others wait for their Shutdown and confirm it.
      for (SimTask* t : mine) {
        if (t->cancelled_experiment) continue;
        auto a = t->channels.front()->All<AssignmentMsg>();
        if (a.empty() || a[0].role != "worker") continue;
        if (Status s = experiments_->OnExited(Ref(t->id, t->proc), 0, std::nullopt, false); !s.ok())
          violation("exit: " + s.message());
      }
      for (SimTask* t : mine) {
        if (t->cancelled_experiment) continue;
        auto a = t->channels.front()->All<AssignmentMsg>();
        if (a.empty() || a[0].role == "worker") continue;
        auto& ch = *t->channels.back();
        if (!WaitFor([&] { return !ch.All<ShutdownMsg>().empty(); }))
          return violation(t->id + " task " + std::to_string(t->proc) + " (" + a[0].role +
                           "): no shutdown" + EventsOf(t->id));
        if (Status s = experiments_->OnExited(Ref(t->id, t->proc), std::nullopt, SIGTERM, true);
            !s.ok()) {
          violation("reaped exit: " + s.message() + EventsOf(t->id));
        }
      }
    });
  }
  for (auto& t : submitters) t.join();
  for (auto& t : agents) t.join();
  canceller.join();
  ASSERT_EQ(violations, 0);

  // The batch scripts end; Tick closes every experiment.
  for (const auto& id : ids)
    if (!cancelled(id)) SetJobState(slurm_.JobOf(JobName(id, 1)), JobState::kCompleted);
  EXPECT_TRUE(WaitFor([&] { return AllEnded(ids); })) << "experiments or their jobs still open";
  StopBackground();
  ASSERT_EQ(violations, 0);

  // The end state, exactly.
  EXPECT_EQ(slurm_.With([](auto& f) { return f.submitted.size(); }), ids.size())
      << "a job was submitted twice";
  for (const auto& id : ids) {
    SCOPED_TRACE(id);
    ExperimentView v = experiments_->Get(id).value();
    ASSERT_EQ(v.tasks.size(), static_cast<size_t>(kTasks));
    int assigned_events = 0;
    for (const auto& e : v.events) assigned_events += e.what == EventCode::kAssigned;
    if (cancelled(id)) {
      EXPECT_EQ(v.experiment.state, ExperimentState::kCancelled) << v.experiment.reason;
      int64_t job = slurm_.JobOf(JobName(id, 1));
      EXPECT_TRUE(slurm_.With(
          [&](auto& f) { return std::count(f.cancelled.begin(), f.cancelled.end(), job) >= 1; }));
      EXPECT_LE(assigned_events, 1);
      continue;
    }
    EXPECT_EQ(v.experiment.state, ExperimentState::kSucceeded) << v.experiment.reason;
    EXPECT_EQ(assigned_events, 1);
    EXPECT_TRUE(v.experiment.checkpoint_step.has_value());
    std::map<std::string, std::set<int>> roles;
    for (const SimTask& t : tasks) {
      if (t.id != id) continue;
      int assignments = 0, shutdowns = 0;
      for (const auto& ch : t.channels) {
        assignments += static_cast<int>(ch->All<AssignmentMsg>().size());
        shutdowns += static_cast<int>(ch->All<ShutdownMsg>().size());
      }
      EXPECT_EQ(assignments, 1) << "task " << t.proc << " assigned " << assignments << " times";
      auto a = t.channels.front()->All<AssignmentMsg>().at(0);
      EXPECT_TRUE(roles[a.role].insert(a.index).second)
          << a.role << ":" << a.index << " assigned twice";
      const TaskRecord& rec = v.tasks[t.proc];
      EXPECT_EQ(rec.state, a.role == "worker" ? TaskState::kSucceeded : TaskState::kReaped)
          << "task " << t.proc;
      EXPECT_EQ(shutdowns, a.role == "worker" ? 0 : 1) << "task " << t.proc;
      if (t.channels.size() > 1) {
        EXPECT_EQ(t.channels.back()->All<ShutdownMsg>().size(), a.role == "worker" ? 0u : 1u)
            << "task " << t.proc << ": the Shutdown missed the reconnected stream";
      }
    }
    EXPECT_EQ(roles["chief"].size(), size_t{kChief});
    EXPECT_EQ(roles["ps"].size(), size_t{kPs});
    EXPECT_EQ(roles["worker"].size(), size_t{kWorkers});
    EXPECT_EQ(*roles["worker"].rbegin(), kWorkers - 1);
  }
}

TEST_F(ExperimentsConcurrencyTest, ConcurrentSubmitsOfOneIdCreateOneExperiment) {
  constexpr int kThreads = 12;
  std::latch start(kThreads);
  std::atomic<int> created{0}, conflicts{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      auto r = experiments_->Submit(LoadSpec("same", true), "alice", false);
      if (r.ok())
        ++created;
      else if (r.status().code() == StatusCode::kAlreadyExists)
        ++conflicts;
      else
        ADD_FAILURE() << r.status().message();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(created, 1);
  EXPECT_EQ(conflicts, kThreads - 1);
  EXPECT_EQ(slurm_.With([](auto& f) { return f.submitted.size(); }), 1u);
  EXPECT_EQ(experiments_->Get("same").value().attempts.size(), 1u);
}

TEST_F(ExperimentsConcurrencyTest, ConcurrentResumesStartOneAttempt) {
  ASSERT_TRUE(experiments_->Submit(LoadSpec("r", true), "alice", false).ok());
  ASSERT_TRUE(experiments_->Cancel("r", "test").ok());
  StartTicker();
  ASSERT_TRUE(WaitFor([&] { return AllEnded({"r"}); }));
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::atomic<int> resumed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      auto r = experiments_->Resume("r");
      if (r.ok()) {
        ++resumed;
      } else if (r.status().code() != StatusCode::kFailedPrecondition &&
                 r.status().code() != StatusCode::kUnavailable) {
        ADD_FAILURE() << r.status().message();
      }
    });
  }
  for (auto& t : threads) t.join();
  StopBackground();
  EXPECT_EQ(resumed, 1);
  EXPECT_EQ(slurm_.With([](auto& f) { return f.submitted.size(); }), 2u);
  EXPECT_EQ(experiments_->Get("r").value().attempts.size(), 2u);
}

// Slurm whose LoadJobs answers with the jobs as they were when the call
// started, and returns only when the test says: a slow squeue.
class SlowPollSlurm final : public SlurmClient {
 public:
  explicit SlowPollSlurm(LockedSlurm& slurm) : slurm_(slurm) {}
  StatusOr<PartitionShape> GetPartition(const std::string& name) override {
    return slurm_.GetPartition(name);
  }
  StatusOr<int64_t> Submit(const SubmitRequest& r) override { return slurm_.Submit(r); }
  StatusOr<std::vector<JobInfo>> LoadJobs() override {
    auto jobs = slurm_.LoadJobs();
    if (hold) {
      snapshot_taken.count_down();
      release.wait();
    }
    return jobs;
  }
  Status CancelJob(int64_t job_id, int signal) override { return slurm_.CancelJob(job_id, signal); }
  Status ShrinkJob(int64_t job_id, const std::string& keep) override {
    return slurm_.ShrinkJob(job_id, keep);
  }
  Status SignalStep(int64_t job_id, int step_id, int signal) override {
    return slurm_.SignalStep(job_id, step_id, signal);
  }
  std::atomic<bool> hold{false};
  std::latch snapshot_taken{1}, release{1};

 private:
  LockedSlurm& slurm_;
};

// An experiment submitted while the poller's LoadJobs is in flight is not in
// that poll's answer. Tick must not take its job for one that vanished from
// Slurm (node_fail, restart: a second job while the first one runs).
TEST_F(ExperimentsConcurrencyTest, JobSubmittedDuringAPollIsNotTakenForVanished) {
  SlowPollSlurm slow(slurm_);
  CoreConfig config;
  config.output_root = (dir_.path() / "out").string();
  config.launch = {"/opt/tfslurm-agent", "svc:1"};
  config.poll_interval_ms = 10;
  std::unique_ptr<Core> core = NewCore({*store_, slow, clock_, random_, files_, accounts_}, config);
  Core& experiments = *core;
  ASSERT_TRUE(
      experiments.Submit(LoadSpec("first", true), "alice", false).ok());  // something to poll for

  slow.hold = true;
  std::thread ticker([&] { experiments.Tick(); });
  slow.snapshot_taken.wait();
  ASSERT_TRUE(experiments.Submit(LoadSpec("second", true), "alice", false).ok());
  slow.hold = false;
  slow.release.count_down();
  ticker.join();

  ExperimentView v = experiments.Get("second").value();
  EXPECT_STREQ(ExperimentStateName(v.experiment.state), "queued") << v.experiment.reason;
  ASSERT_EQ(v.attempts.size(), 1u);
  EXPECT_EQ(v.attempts[0].state, AttemptState::kPending) << v.attempts[0].reason;
  // The next poll, which does see the job, changes nothing either.
  clock_.Advance(config.poll_interval_ms);
  experiments.Tick();
  EXPECT_STREQ(ExperimentStateName(experiments.Get("second").value().experiment.state), "queued");
}

// tfslurmd ticks from one thread, but Tick is safe from several at once:
// they share one Slurm poll per interval (TSan checks they share nothing
// else unlocked).
TEST_F(ExperimentsConcurrencyTest, ConcurrentTicksPollOncePerInterval) {
  ASSERT_TRUE(experiments_->Submit(LoadSpec("polled", true), "alice", false).ok());
  auto polls = [&] { return slurm_.With([](auto& f) { return f.load_jobs_calls; }); };
  int before = polls();
  constexpr int kThreads = 4, kRounds = 100;
  for (int round = 1; round <= kRounds; ++round) {
    clock_.Advance(10);  // poll_interval_ms
    std::latch start(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&] {
        start.arrive_and_wait();
        experiments_->Tick();
      });
    for (auto& t : threads) t.join();
    ASSERT_EQ(polls() - before, round) << "round " << round;
  }
}

}  // namespace
}  // namespace tfslurm::concurrency
