// Submission: a new experiment, a resume, and the automatic submissions of
// later attempts (restarts, and submissions a crash or Slurm interrupted).
// Each records the attempt's intent in the store, then submits it to Slurm;
// a failure before the intent leaves everything as it was.
//
// Thread safety: Submit and Resume may be called from any thread and take
// the lifecycle's lock themselves; SubmitAutomatically needs it held. The
// partition cache has its own lock.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/mutex.h"
#include "base/status.h"
#include "service/core/core_state.h"
#include "service/core/experiments.h"
#include "service/core/job_plan.h"
#include "service/core/memory.h"

namespace tfslurm {

class Submission {
 public:
  explicit Submission(CoreState& lifecycle) : core_(lifecycle) {}

  // Validates, stores the intent, submits (experiments.h, SubmitOptions:
  // a dry run, and what is written with the intent or instead of it when
  // Slurm refuses the first submission and the experiment goes).
  StatusOr<SubmitResult> Submit(const nlohmann::json& spec, const std::string& owner,
                                const SubmitOptions& options) ABSL_LOCKS_EXCLUDED(core_.mu());
  // Starts a new attempt of a finished experiment with the same MODEL_DIR.
  // The restart budget starts over. FailedPrecondition while it still runs.
  // `changes` (null: none) is a merge patch on the spec (spec_changes.h);
  // a spec it changes becomes the experiment's next spec revision, stored
  // with the attempt's intent.
  StatusOr<AttemptRecord> Resume(const std::string& id, const nlohmann::json& changes)
      ABSL_LOCKS_EXCLUDED(core_.mu());
  // A restart or a resubmission: prepares attempt `number` and submits it;
  // a failure to prepare it is retried later when transient, else fails the
  // experiment. With `queued_why`, the experiment moves to queued.
  // Adds the nodes the last attempt's end points at (OpenExperiment::
  // suspect_nodes) to the experiment's excluded nodes, unless the job would
  // then not fit its partition; an event says which, or why not.
  void ExcludeSuspects(OpenExperiment& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());
  void SubmitAutomatically(OpenExperiment& e, int number, const std::string& queued_why = "")
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_.mu());

 private:
  struct PreparedAttempt;  // a submission checked and rendered, not yet recorded

  // The partition's shape, from Slurm at most every partition_cache_ms.
  StatusOr<PartitionShape> Partition(const std::string& name) ABSL_LOCKS_EXCLUDED(partition_mu_);
  // The plan of `spec`'s job as `account` (job_plan.h), each component on
  // its partition's shape.
  StatusOr<JobPlan> PlanFor(const ExperimentSpec& spec, RunAs account)
      ABSL_LOCKS_EXCLUDED(partition_mu_);
  // The plan of the next attempt of `e`: its owner's account, then PlanFor.
  StatusOr<JobPlan> PlanAttempt(const OpenExperiment& e) ABSL_LOCKS_EXCLUDED(partition_mu_);
  // Makes attempt `number`'s directories and renders it as `plan` says,
  // without changing `e` or the store: its failure leaves everything as it
  // was (but for directories, which the next attempt reuses).
  StatusOr<PreparedAttempt> PrepareAttempt(const OpenExperiment& e, int number,
                                           const JobPlan& plan);
  // A workdir (none: the model dir) must be one `account` may enter.
  Status CheckWorkdir(const std::string& workdir, const RunAs& account);
  // The checks of a new experiment before anything is stored or made: its
  // id free, its model_dir allowed.
  Status CheckNewExperiment(const ExperimentSpec& spec, const std::string& owner,
                            const RunAs& account);
  // The experiment of `spec` as its first attempt's intent records it.
  std::unique_ptr<OpenExperiment> NewExperiment(const ExperimentSpec& spec,
                                                const std::string& owner, const MemoryPlan& memory);
  // Where attempt `number` of experiment `id` logs (the job's working directory).
  std::string LogDir(const std::string& id, int number) const;
  // Records the intent, then submits. With `queued_why`, the experiment
  // moves to queued in the intent's own transaction.
  StatusOr<AttemptRecord> SubmitAttempt(OpenExperiment& e, PreparedAttempt prepared, bool create,
                                        const std::string& queued_why = "");
  // The intent's transaction for `p`, with `record` (the experiment's row,
  // changed as the intent records it) and `next`'s tasks.
  Changes IntentOf(const OpenExperiment& e, const PreparedAttempt& p, const LiveAttempt& next,
                   ExperimentRecord& record, bool create, const std::string& queued_why);
  // Slurm did not take the recorded attempt `p` (`refusal`). Ok when the
  // attempt waits to be submitted again.
  Status OnNotSubmitted(OpenExperiment& e, const PreparedAttempt& p, bool create,
                        const Status& refusal);
  // An automatic submission could not be prepared: retried later when the
  // cause is transient, else the experiment fails with the reason.
  void OnSubmissionNotPrepared(OpenExperiment& e, int number, const Status& why, Changes& c);
  int64_t NextSubmitRetryMs(OpenExperiment& e);
  // A workdir a resume changes must be one the owner's account may enter.
  Status CheckChangedWorkdir(const OpenExperiment& e, const ExperimentSpec& changed);

  CoreState& core_;
  Mutex partition_mu_;
  // By partition name: when it was read, and its shape.
  std::map<std::string, std::pair<int64_t, PartitionShape>> partition_cache_
      ABSL_GUARDED_BY(partition_mu_);
};

}  // namespace tfslurm
