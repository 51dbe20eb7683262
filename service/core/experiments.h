// Experiments: the facade of core. The REST routes (api/) and the agent
// endpoint (agentrpc/) call it and nothing else of core's state; it hands
// each call to the part that owns it:
//   submission.h      submit, resume, automatic resubmission
//   agent_protocol.h  registration, barrier, heartbeats, progress, exits
//   slurm_watch.h     polling Slurm, timers, restarts, recovery
//   restart_policy.h  what an ended attempt means (pure)
//   lifecycle.h       the shared state of open experiments
// Core does no I/O of its own: the store, Slurm, the clock, randomness and
// the file system are ports (core/ports/), so tests drive it with fakes and
// no sleeps.
//
// Thread safety: every public method may be called from any thread, except
// SetLaunch and ObserveCommits, which are called once before serving.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "schema/status.h"
#include "service/core/agent_messages.h"
#include "service/core/agent_protocol.h"
#include "service/core/lifecycle.h"
#include "service/core/ports/clock.h"
#include "service/core/ports/files.h"
#include "service/core/ports/slurm.h"
#include "service/core/ports/store.h"
#include "service/core/records.h"
#include "service/core/slurm_watch.h"
#include "service/core/submission.h"

namespace tfslurm {

// What GET /experiments/{id} shows.
struct ExperimentView {
  ExperimentRecord experiment;
  std::vector<AttemptRecord> attempts;
  std::vector<TaskRecord> tasks;  // of the current attempt
  std::vector<EventRecord> events;
};

class Experiments {
 public:
  Experiments(store::Store& store, slurm::SlurmClient& slurm, Clock& clock, Randomness& random,
              Files& files, Accounts& accounts, LifecycleConfig config);

  // Where agents reach the service; set once the agent endpoint listens,
  // before the first submission.
  void SetLaunch(const slurm::AgentLaunch& launch);
  // `observer` is told of every write from now on. Call before serving.
  void ObserveCommits(std::shared_ptr<store::CommitObserver> observer);
  // Where core reports what it counts (ports/metrics.h); it must outlive
  // this object. Call before serving.
  void SetMetrics(Metrics& metrics) { lifecycle_.metrics = &metrics; }

  // Loads open experiments from the store and reconciles them with Slurm:
  // an attempt whose submission was interrupted is matched by job name, or
  // submitted now. Call once before serving. When slurmctld does not answer
  // or the submission fails, Tick goes on reconciling at every poll.
  Status Recover() { return watch_.Recover(); }

  // Validates, stores the intent, submits. `dry_run` validates and renders
  // only: nothing is stored or submitted.
  StatusOr<SubmitResult> Submit(const nlohmann::json& spec, const std::string& owner,
                                bool dry_run) {
    return submission_.Submit(spec, owner, dry_run);
  }
  Status Cancel(const std::string& id, const std::string& why);
  // Starts a new attempt of a finished experiment with the same MODEL_DIR, so
  // the program restores its latest checkpoint. The restart budget starts
  // over. FailedPrecondition while the experiment still runs.
  StatusOr<AttemptRecord> Resume(const std::string& id) { return submission_.Resume(id); }

  // Reads, as the store has them.
  StatusOr<ExperimentView> Get(const std::string& id);
  StatusOr<ExperimentRecord> GetExperiment(const std::string& id);
  StatusOr<std::vector<AttemptRecord>> ListAttempts(const std::string& id);
  StatusOr<std::vector<TaskRecord>> ListTasks(const std::string& id, int attempt);
  // See store::Store::ListPage.
  StatusOr<std::vector<store::ListedExperiment>> ListPage(const store::ListQuery& query,
                                                          const store::NeedSummary& need);
  StatusOr<int64_t> CountExperiments(const store::ListQuery& query);
  // The experiment's training scalars, as the store keeps them (only `tags`
  // when not empty); the caller has checked the experiment exists.
  StatusOr<std::vector<ScalarSeries>> ReadScalars(const std::string& id,
                                                  const std::vector<std::string>& tags) {
    return lifecycle_.ports.store.ReadScalars(id, tags);
  }
  // What a metrics scrape shows as gauges: experiments per state (from the
  // store), and the agents connected now.
  struct Gauges {
    std::vector<std::pair<ExperimentState, int64_t>> experiments_by_state;
    int64_t agents_connected = 0;
  };
  StatusOr<Gauges> ReadGauges();

  // Agent protocol (agent_protocol.h).
  void OnRegister(const TaskRef& ref, const RegisterInfo& info,
                  std::shared_ptr<TaskChannel> channel) {
    agents_.OnRegister(ref, info, std::move(channel));
  }
  Status OnHeartbeat(const TaskRef& ref) { return agents_.OnHeartbeat(ref); }
  Status OnProgress(const TaskRef& ref, int64_t step, const std::string& path) {
    return agents_.OnProgress(ref, step, path);
  }
  Status OnScalars(const TaskRef& ref, std::vector<ScalarPoint> points) {
    return agents_.OnScalars(ref, std::move(points));
  }
  Status OnExited(const TaskRef& ref, std::optional<int> exit_code, std::optional<int> signal,
                  bool reaped) {
    return agents_.OnExited(ref, exit_code, signal, reaped);
  }
  void OnDisconnect(const TaskRef& ref, const TaskChannel* channel) {
    agents_.OnDisconnect(ref, channel);
  }

  // Periodic work (slurm_watch.h): polls Slurm every poll_interval_ms (one
  // RPC), times out barriers, marks lost tasks, ends unconfirmed reaps,
  // submits restarts. Safe to call from several threads at once.
  void Tick() { watch_.Tick(); }

 private:
  Lifecycle lifecycle_;
  Submission submission_;
  AgentProtocol agents_;
  SlurmWatch watch_;
};

}  // namespace tfslurm
