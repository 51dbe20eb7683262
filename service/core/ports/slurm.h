// The Slurm port: what core asks of Slurm. slurm/libslurm_client.cc
// implements it with libslurm (the only code including slurm.h); unit tests
// use a fake. JobStateName and IsFinished are plain logic (core/job_state.cc).
//
// Thread safety: implementations are thread-safe; every method may be called
// from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/enum_names.h"
#include "base/status.h"
#include "service/core/memory.h"

namespace tfslurm {

enum class JobState {
  kPending,
  kRunning,
  kSuspended,
  kCompleted,
  kCancelled,
  kFailed,
  kTimeout,
  kNodeFail,
  kPreempted,
  kBootFail,
  kDeadline,
  kOutOfMemory,
  kUnknown,
};

// Slurm's own names (job_state_string).
inline constexpr EnumName<JobState> kJobStateNames[] = {
    {JobState::kPending, "PENDING"},     {JobState::kRunning, "RUNNING"},
    {JobState::kSuspended, "SUSPENDED"}, {JobState::kCompleted, "COMPLETED"},
    {JobState::kCancelled, "CANCELLED"}, {JobState::kFailed, "FAILED"},
    {JobState::kTimeout, "TIMEOUT"},     {JobState::kNodeFail, "NODE_FAIL"},
    {JobState::kPreempted, "PREEMPTED"}, {JobState::kBootFail, "BOOT_FAIL"},
    {JobState::kDeadline, "DEADLINE"},   {JobState::kOutOfMemory, "OUT_OF_MEMORY"},
    {JobState::kUnknown, "UNKNOWN"}};

inline const char* JobStateName(JobState state) { return NameIn(kJobStateNames, state, "UNKNOWN"); }
bool IsFinished(JobState state);

// One component of a heterogeneous job, as slurm_load_jobs shows it: a job
// record of its own (job id = the leader's + offset, normally), sharing the
// leader's name.
struct JobComponentInfo {
  int64_t job_id = 0;
  JobState state = JobState::kUnknown;
  std::string nodes;
  std::vector<std::string> node_names;
  bool completing = false;
};

struct JobInfo {
  int64_t job_id = 0;
  std::string name;
  JobState state = JobState::kUnknown;
  std::string reason;                   // Slurm's state reason / description
  std::string nodes;                    // compressed node list, e.g. node[1-3]
  std::vector<std::string> node_names;  // expanded, in allocation order
  int exit_code = 0;                    // of the batch script, when it exited
  int exit_signal = 0;                  // when a signal ended it
  int restart_count = 0;                // bumped by each requeue (preemption, node failure)
  int64_t start_time = 0;               // Unix seconds
  int64_t end_time = 0;
  int64_t mem_per_cpu_mb = 0;  // as Slurm recorded the request
  bool completing = false;
  // A heterogeneous job's component records: het_job_id is the leader's id
  // (0 for a plain job) and het_job_offset the component's index. Once
  // GroupHetJobs has run, the leader stands for the whole job and
  // `components` lists every component in offset order.
  int64_t het_job_id = 0;
  int het_job_offset = 0;
  std::vector<JobComponentInfo> components;
};

// Folds each heterogeneous job's component records into its leader's, so
// that core sees one job per attempt, as with a plain job: node_names are
// every component's in component order (as srun --het-group numbers
// SLURM_NODEID), nodes the components' lists joined by ','. The job is
// finished only when every component is, and completing while any is; its
// state is the leader's (slurmctld completes and signals every component
// with the leader: job_mgr.c's job_complete and het_job_signal), unless a
// component ended abnormally (NODE_FAIL, PREEMPTED, ...) first: that state
// is the job's then. Records of plain jobs pass unchanged.
std::vector<JobInfo> GroupHetJobs(std::vector<JobInfo> jobs);

// Everything Slurm needs for one batch job. The sbatch script's #SBATCH
// header is rendered from the same request, so what a user inspects is what
// was submitted.
struct SubmitRequest {
  std::string job_name;
  std::string partition;  // empty: Slurm's default partition
  int nodes = 1;
  int tasks_per_node = 1;
  int cpus_per_task = 1;
  int gpus_per_node = 0;
  int gpus_per_task = 0;  // --gpus-per-task; at most one of the two is > 0
  // Node names the job must not run on (--exclude), comma-separated: the
  // spec's resources.exclude, then the experiment's bad-node memory.
  std::string exclude_nodes;
  int64_t mem_per_cpu_mb = 0;
  int time_limit_minutes = 60;
  int warn_signal = 0;  // e.g. SIGUSR1, sent to every step warn_time_s before the end
  int warn_time_s = 0;
  std::string work_dir;
  std::string batch_output;  // the batch script's own stdout/stderr file
  std::string script;
  // KEY=VALUE; the job's environment. Carries the attempt secret, which must
  // never be written into the script.
  std::vector<std::string> environment;
  std::string constraint;  // --constraint of the (first) component; empty: none
  // --nodelist and --exclusive of the (first) component; empty, false: none.
  std::string nodelist;
  bool exclusive = false;
  // --no-kill (kill_on_node_fail 0): a node failure takes the node out of
  // the job, which runs on (a job with spare nodes).
  bool no_kill = false;
  // Job-wide: every component's job description carries them, as sbatch
  // gives them (spec.h). Empty: Slurm's default.
  std::string account;
  std::string qos;
  std::string reservation;
  // Components 1.. of a heterogeneous job (the fields above are component
  // 0's, and the job-wide ones); empty: a plain job.
  struct Component {
    std::string partition;
    int nodes = 1;
    int tasks_per_node = 1;
    int cpus_per_task = 1;
    int gpus_per_node = 0;
    int64_t mem_per_cpu_mb = 0;
    std::string constraint;
    int gpus_per_task = 0;
    std::string nodelist;    // --nodelist
    bool exclusive = false;  // --exclusive; brace-initialized in this order
  };
  std::vector<Component> more_components;
  // The account the job runs as (core/ports/accounts.h): tfslurmd's own in
  // personal mode, the experiment owner's in site mode, which slurmctld
  // accepts from root or SlurmUser only.
  uint32_t user_id = 0;
  uint32_t group_id = 0;
};

class SlurmClient {
 public:
  virtual ~SlurmClient() = default;
  // `name` empty: the default partition.
  virtual StatusOr<PartitionShape> GetPartition(const std::string& name) = 0;
  virtual StatusOr<int64_t> Submit(const SubmitRequest& request) = 0;
  // Every job slurmctld knows, in one RPC: a poll cycle costs one call
  // whatever the number of experiments.
  virtual StatusOr<std::vector<JobInfo>> LoadJobs() = 0;
  // Signals every step and the batch script; SIGKILL cancels the job.
  virtual Status CancelJob(int64_t job_id, int signal) = 0;
  // A heterogeneous job's step has a part in every component's job record:
  // signal each component's job id (JobInfo::components).
  virtual Status SignalStep(int64_t job_id, int step_id, int signal) = 0;
  // Shrinks a running job to `keep` (comma-separated node names, a subset
  // of its nodes, the batch host among them): slurmctld has the other nodes'
  // slurmd kill every process of the job there and takes them out of it
  // (`scontrol update JobId=N NodeList=...`). How tfslurmd stops the
  // programs of a node cut off from the service only (docs/restarts.md,
  // "Network faults").
  virtual Status ShrinkJob(int64_t job_id, const std::string& keep) = 0;
};

}  // namespace tfslurm
