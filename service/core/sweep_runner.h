// Sweeps at run time: a sweep checked whole and stored, its trials started
// as ordinary experiments <sweep>-<n> owned by the sweep's owner, at most
// max_concurrent of them in Slurm at once, the next started as one ends,
// stopped early by the sweep's rule (core/early_stopping.h), and cancelled
// with the sweep or when its node-hours cap is reached.
//
// Everything it knows it reads from the store at each step, so a restarted
// tfslurmd carries on where it was: a trial is started exactly when its row
// exists, and that row is written in the transaction that records its
// experiment's first attempt (Submission::Submit with the trial), so a crash
// before it leaves the trial to be started again, and one after it leaves an
// experiment that Recover reconciles with Slurm like any other.
//
// Thread safety: every public method may be called from any thread; mu_
// serializes the sweeps' steps. It is taken before core's lock, never under it.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/mutex.h"
#include "base/status.h"
#include "service/core/core_state.h"
#include "service/core/early_stopping.h"
#include "service/core/experiments.h"
#include "service/core/submission.h"
#include "service/core/sweep_spec.h"

namespace tfslurm {

class SweepRunner {
 public:
  // Cancels experiment `id` (Experiments::Cancel) with `reason` as its
  // attempt's end reason, if `owner` owns it (NotFound otherwise: a trial
  // acts only on its own sweep's owner's experiment).
  using CancelFn = std::function<Status(const std::string& id, const std::string& owner,
                                        const std::string& why, EndReason reason)>;

  // Deletes experiment `id` (Experiments::Delete).
  using DeleteFn = std::function<StatusOr<DeleteResult>(const std::string& id, bool files)>;

  SweepRunner(CoreState& core, Submission& submission, CancelFn cancel, DeleteFn remove)
      : core_(core),
        submission_(submission),
        cancel_(std::move(cancel)),
        delete_(std::move(remove)) {}

  // Checks the sweep and every trial (as a dry run of its submission), then
  // stores it and starts its first trials. Nothing is stored when anything
  // is refused.
  StatusOr<SweepView> Submit(const nlohmann::json& input, const std::string& owner)
      ABSL_LOCKS_EXCLUDED(mu_);
  StatusOr<SweepView> Get(const std::string& id);
  // Cancels the sweep and its running trials. FailedPrecondition once it has ended.
  Status Cancel(const std::string& id, const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);
  // Deletes an ended sweep: its trials' experiments, then its rows
  // (Experiments::DeleteSweep).
  StatusOr<SweepDeleteResult> Delete(const std::string& id, bool files) ABSL_LOCKS_EXCLUDED(mu_);
  // Every poll interval: each open sweep's step (Advance).
  void Tick() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One step of a sweep: trials that ended are recorded, running ones
  // judged at their rungs, the cap checked, the next trials started, and
  // the sweep completed when its last trial has ended.
  void Advance(SweepRecord sweep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether experiment `e` is over and its Slurm job gone. Core watches an
  // ended experiment until its job has left Slurm, but only while it runs:
  // after a restart, one whose job was still ending is asked of Slurm
  // (`jobs`, read once per step), and its attempt then recorded as ended.
  bool JobGone(const ExperimentRecord& e, std::vector<AttemptRecord>& attempts,
               std::optional<std::vector<JobInfo>>& jobs, Changes& c);

  // Trial `t`'s curve of `tag`, from the store; an ended trial's once.
  Curve CurveOfTrial(const SweepRecord& sweep, const SweepTrialRecord& t, const std::string& tag)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the kept curves of sweeps no longer open.
  void ForgetEndedSweeps(const std::vector<SweepRecord>& open) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  CoreState& core_;
  Submission& submission_;
  const CancelFn cancel_;
  const DeleteFn delete_;
  Mutex mu_;
  int64_t last_tick_ms_ ABSL_GUARDED_BY(mu_) = 0;
  // The curves of ended trials of open sweeps, by (sweep id, trial index):
  // they no longer change. At most a sweep's trials' points per open sweep.
  std::map<std::pair<std::string, int>, Curve> ended_curves_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfslurm
