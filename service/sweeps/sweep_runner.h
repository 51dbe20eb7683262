// Sweeps at run time (sweeps.h): a sweep checked whole and stored, its
// trials started as ordinary experiments through core's facade, stopped
// early by the sweep's rule (early_stopping.h), and cancelled with the sweep
// or when its node-hours cap is reached.
//
// Everything it knows it reads from the store at each step, so a restarted
// tfslurmd carries on where it was: a trial is started exactly when its row
// exists, and that row is written in the transaction that records its
// experiment's first attempt (SubmitOptions::with_intent), so a crash before
// it leaves the trial to be started again, and one after it leaves an
// experiment that core reconciles with Slurm like any other.
//
// Thread safety: every public method may be called from any thread; mu_
// serializes the sweeps' steps. Core's own locks are taken inside its calls.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/mutex.h"
#include "base/status.h"
#include "service/sweeps/early_stopping.h"
#include "service/sweeps/sweep_spec.h"
#include "service/sweeps/sweeps.h"

namespace tfslurm::sweeps {

class SweepRunner final : public Sweeps {
 public:
  SweepRunner(Experiments& experiments, Store& store, Clock& clock, Randomness& random,
              SweepsConfig config)
      : experiments_(experiments), store_(store), clock_(clock), random_(random), config_(config) {}

  StatusOr<SweepView> Submit(const nlohmann::json& input, const std::string& owner) override
      ABSL_LOCKS_EXCLUDED(mu_);
  StatusOr<SweepView> Get(const std::string& id) override;
  StatusOr<std::vector<SweepRecord>> List(const std::string& owner) override {
    return store_.ListSweeps({owner, false});
  }
  Status Cancel(const std::string& id, const std::string& why) override ABSL_LOCKS_EXCLUDED(mu_);
  StatusOr<SweepDeleteResult> Delete(const std::string& id, bool files) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void Tick() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One step of a sweep, phase after phase (the Step holds what they share).
  struct Step;
  void Advance(SweepRecord sweep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The trials whose experiment is over (core's IsOver) are ended, with
  // their objective; false when the store or Slurm did not answer.
  bool RecordEndedTrials(Step& step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A trial that reports scalars but not the objective's tag is named in
  // the sweep's reason; one that succeeded without it stops the sweep (no
  // trial could be judged or ranked).
  void CheckObjectiveReported(Step& step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The running trials judged at each rung they have reached.
  void JudgeAtRungs(Step& step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The node-hours cap; an ended sweep's running trials are cancelled.
  void ApplyCapAndEnd(Step& step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Trials started while fewer than max_concurrent run.
  void StartNextTrials(Step& step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts trial `t` (its row written with its experiment's intent).
  Status StartTrial(const Step& step, SweepTrialRecord& t, const nlohmann::json& point)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The sweep completed once every trial has ended, else its progress said.
  void CompleteOrReport(Step& step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `c`; a failure is logged and the next step goes on from the store.
  void Write(const Changes& c);
  // Trial `t`'s curve of `tag`, from the store; an ended trial's once.
  Curve CurveOfTrial(const SweepRecord& sweep, const SweepTrialRecord& t, const std::string& tag)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the kept curves of sweeps no longer open.
  void ForgetEndedSweeps(const std::vector<SweepRecord>& open) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Experiments& experiments_;
  Store& store_;
  Clock& clock_;
  Randomness& random_;
  const SweepsConfig config_;
  Mutex mu_;
  int64_t last_tick_ms_ ABSL_GUARDED_BY(mu_) = 0;
  // The curves of ended trials of open sweeps, by (sweep id, trial index):
  // they no longer change. At most a sweep's trials' points per open sweep.
  std::map<std::pair<std::string, int>, Curve> ended_curves_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfslurm::sweeps
