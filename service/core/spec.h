// The experiment spec: what a user asks for, validated. ParseSpec is the only
// way to get an ExperimentSpec, so every spec in the service has passed every
// check in spec.cc. The documented shape is schema/experiment-spec.md.
//
// Thread safety: plain values; the functions are pure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "service/core/container_mount.h"
#include "service/core/records.h"

namespace tfslurm {

// TensorFlow's roles, in the order components, TF_CONFIG and tables list them.
inline constexpr const char* kRoleOrder[] = {"chief", "ps", "worker", "evaluator"};

struct ClusterShape {
  int chief = 0;
  int ps = 0;
  int worker = 0;
  int evaluator = 0;
  int Total() const { return chief + ps + worker + evaluator; }
  // The tasks of `role`, one of kRoleOrder.
  int Count(std::string_view role) const {
    if (role == "chief") return chief;
    if (role == "ps") return ps;
    if (role == "worker") return worker;
    return evaluator;
  }
};

enum class PlacementKind { kSpread, kPack, kExplicit };

struct Placement {
  PlacementKind kind = PlacementKind::kSpread;
  std::vector<std::string> roles;  // kExplicit only: role of task i
};

struct Resources {
  std::string partition;  // empty: the cluster's default partition
  int nodes = 1;
  int tasks_per_node = 1;
  int cpus_per_task = 1;
  int gpus_per_node = 0;
  // Slurm's --gpus-per-task: each task gets GPUs of its own, bound by Slurm.
  // At most one of gpus_per_node and gpus_per_task is > 0 (ParseSpec).
  int gpus_per_task = 0;
  std::optional<int64_t> mem_per_task_mb;  // nullopt: auto
  int time_limit_minutes = 60;
  // The site's sbatch options. Per component, as sbatch resets them for
  // each component of a heterogeneous job (reset_each_pass in
  // src/common/slurm_opt.c, slurm-22-05-8-1), so a role block does not
  // inherit them from `resources`:
  std::string constraint;  // --constraint, a feature expression; empty: none
  std::string nodelist;    // --nodelist, a Slurm hostlist; empty: any nodes
  bool exclusive = false;  // --exclusive: no other job on the nodes
  // Job-wide, only `resources` has them: sbatch keeps them from the first
  // component for every later one (no reset_each_pass), and Submit puts
  // them in every component's job description the same way.
  std::string account;      // --account; empty: the user's default account
  std::string qos;          // --qos; empty: the association's default QOS
  std::string reservation;  // --reservation, names joined by ','; empty: none
  std::string exclude;      // --exclude, a Slurm hostlist; merged with bad nodes
  // More nodes than `nodes`, whose agents wait with no program, to take a
  // failed or excluded node's place in a restart in place (node_slots.h,
  // docs/restarts.md). `resources` only, and only with in_allocation.
  int spare_nodes = 0;
  int Tasks() const { return nodes * tasks_per_node; }
};

// A role's own resources (`roles.<role>` in the spec, TensorFlow only): the
// role's tasks run in a component of one heterogeneous Slurm job instead of
// sharing `resources`. ParseSpec fills what the block leaves out: partition,
// cpus_per_task, gpus_per_node, gpus_per_task (unless the block names
// either GPU field) and mem_per_task_mb from `resources`; nodes is
// 1 and tasks_per_node cluster.<role> / nodes; constraint, nodelist and
// exclusive are the block's own (empty, false when left out). The job-wide
// account, qos, reservation and exclude are `resources`' alone.
// The role's tasks are exactly nodes x tasks_per_node, so cluster.<role>
// must equal that. Its time_limit_minutes is the job's (`resources.time_limit`).
struct RoleResources : Resources {
  // Everything but nodes: roles that agree on it share one component.
  bool SameShape(const RoleResources& o) const {
    return partition == o.partition && tasks_per_node == o.tasks_per_node &&
           cpus_per_task == o.cpus_per_task && gpus_per_node == o.gpus_per_node &&
           gpus_per_task == o.gpus_per_task && mem_per_task_mb == o.mem_per_task_mb &&
           constraint == o.constraint && nodelist == o.nodelist && exclusive == o.exclusive;
  }
};

enum class SuccessPolicy { kAuto, kChief, kWorker0, kAllWorkers };

inline constexpr EnumName<SuccessPolicy> kSuccessPolicyNames[] = {
    {SuccessPolicy::kAuto, "auto"},
    {SuccessPolicy::kChief, "chief"},
    {SuccessPolicy::kWorker0, "worker0"},
    {SuccessPolicy::kAllWorkers, "all_workers"}};

// What the tasks run, and so what their environment says: TensorFlow gets
// roles and TF_CONFIG; PyTorch gets a rank per task and torch.distributed's
// env:// variables (RANK, WORLD_SIZE, MASTER_ADDR, ...), with no roles; JAX
// gets a process per task and jax.distributed.initialize's arguments
// (JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID; docs/jax.md).
enum class Framework { kTensorflow, kPytorch, kJax };

inline constexpr EnumName<Framework> kFrameworkNames[] = {{Framework::kTensorflow, "tensorflow"},
                                                          {Framework::kPytorch, "pytorch"},
                                                          {Framework::kJax, "jax"}};

// PyTorch and JAX: no roles, task i is rank (process) i, every rank must exit
// 0, and rank 0 checkpoints. TensorFlow's tasks have roles.
inline bool HasRanks(Framework framework) { return framework != Framework::kTensorflow; }

// Options that apply to PyTorch experiments only.
struct PytorchOptions {
  // OMP_NUM_THREADS of every rank; nullopt: resources.cpus_per_task, so the
  // ranks sharing a node do not oversubscribe it (torchrun sets 1).
  std::optional<int> omp_num_threads;
};

// Which ends of an attempt (EndReason, records.h) start another.
struct RestartPolicy {
  int max_restarts = 3;
  std::set<EndReason> on = {EndReason::kPreempted, EndReason::kTimeout, EndReason::kNodeFail,
                            EndReason::kRetryableExit, EndReason::kStalled};
  int backoff_s = 10;  // first delay; doubles per restart, capped at 10 min
  // Restart inside the running Slurm job when the job and every agent are
  // still there (docs/restarts.md); otherwise, and when false, a restart is
  // a new Slurm job.
  bool in_allocation = true;
  // TensorFlow with parameter servers: how many times in one attempt a
  // worker's or evaluator's program that dies (killed by a signal other
  // than SIGTERM, or 137) is started again alone, on its node and port,
  // while the chief trains on (docs/restarts.md). 0: such a death fails
  // the attempt, as any other.
  int max_task_restarts = 3;
};

// How the tasks' programs run in a container image (docs/containers.md):
// pyxis and Slurm's OCI support put each task, its agent included, in the
// container (srun --container-image, srun --container); enroot and
// Apptainer leave the agent on the host and start the program through the
// runtime. kAuto is what the site configured (tfslurmd --container-runtime).
enum class ContainerRuntime { kAuto, kPyxis, kEnroot, kOci, kApptainer };

// The spec's `container` section. An empty image: no container, the
// program runs with the node's own file system, as always.
struct ContainerSpec {
  // A path on the nodes (a squashfs file, an OCI bundle, a SIF file; absolute)
  // or a registry reference given to the runtime as it is.
  std::string image;
  ContainerRuntime runtime = ContainerRuntime::kAuto;
  std::vector<ContainerMount> mounts;  // besides the model dir and workdir, always mounted
  std::map<std::string, std::string> role_images;  // TF role -> its own image
  bool enabled() const { return !image.empty(); }
  const std::string& ImageFor(const std::string& role) const {
    auto it = role_images.find(role);
    return it == role_images.end() ? image : it->second;
  }
};

struct ExperimentSpec {
  std::string id;
  Framework framework = Framework::kTensorflow;
  PytorchOptions pytorch;  // kPytorch only
  std::vector<std::string> command;
  std::string workdir;  // empty: MODEL_DIR
  std::map<std::string, std::string> env;
  ClusterShape cluster;  // kTensorflow only; all zero for kPytorch and kJax
  Placement placement;   // kTensorflow only
  Resources resources;
  // Per-role resources by role name (TensorFlow only). Empty: every task uses
  // `resources` and the job is a plain one; see core/components.h.
  std::map<std::string, RoleResources> roles;
  std::string network_address = "hostname";      // hostname | fqdn | interface:NAME
  SuccessPolicy success = SuccessPolicy::kAuto;  // kTensorflow; else every rank exits 0
  RestartPolicy restart;
  int signal_grace_s = 120;
  // An attempt whose training makes no new step (a checkpoint the agent
  // reports) for this long is ended as stalled; 0: never.
  int stall_timeout_s = 0;
  std::string model_dir;  // empty: auto (<output_root>/<id>)
  ContainerSpec container;

  // The canonical JSON form, with every default spelled out. ParseSpec of
  // ToJson() gives the same spec back.
  nlohmann::json ToJson() const;
};

// Whether restart.max_task_restarts applies to the spec: TensorFlow with
// parameter servers, whose chief survives a worker's loss.
bool HasLoneRestarts(const ExperimentSpec& spec);

// The largest experiment a site accepts by default, in tasks (ranks): a
// site setting, tfslurmd --max-tasks-per-experiment (docs/site-deployment.md,
// "How large an experiment may be", gives what each task costs).
inline constexpr int kDefaultMaxTasks = 16384;
// Where SpecLimits::max_tasks is set, as a spec error names it.
inline constexpr char kMaxTasksSetting[] = "tfslurmd --max-tasks-per-experiment";

// Limits that keep one spec from exhausting the service or Slurm.
struct SpecLimits {
  int max_tasks = kDefaultMaxTasks;
  int max_command_args = 1024;
  size_t max_command_bytes = 64 * 1024;
  int max_env_entries = 256;
  size_t max_env_bytes = 64 * 1024;
};

// At most this many FieldErrors are listed for one spec.
constexpr size_t kMaxSpecFieldErrors = 100;

// Validates `input` and, when it is valid, returns the spec. Every problem is
// reported at once as a FieldError, so a user fixes a spec in one round trip;
// past kMaxSpecFieldErrors, one last FieldError with an empty field says
// "and N more errors", and the message counts them all. A value nested more
// than 8 levels is reported as such, never rendered. An absent id stays
// empty; the caller generates one.
StatusOr<ExperimentSpec> ParseSpec(const nlohmann::json& input, const SpecLimits& limits = {});

// "chief" | "ps" | "worker" | "evaluator".
bool IsRole(const std::string& role);
inline const char* SuccessPolicyName(SuccessPolicy policy) {
  return NameIn(kSuccessPolicyNames, policy);
}
inline const char* FrameworkName(Framework framework) { return NameIn(kFrameworkNames, framework); }
const char* ContainerRuntimeName(ContainerRuntime runtime);
// The runtime `spec`'s tasks use: its own, or for kAuto the site's (which
// may be kAuto itself: none configured).
ContainerRuntime ResolveContainerRuntime(const ContainerSpec& spec, ContainerRuntime site);
// Whether the runtime puts the agent itself in the container (pyxis, OCI).
inline bool AgentRunsInside(ContainerRuntime runtime) {
  return runtime == ContainerRuntime::kPyxis || runtime == ContainerRuntime::kOci;
}
// The spec's container section checked against the runtime it resolves to
// with the site's `site` runtime: refused (a FieldError per problem) when
// kAuto resolves to nothing, when an image form cannot run on the runtime,
// when per-role images need components the job does not have, or when
// runtime oci meets an `oci_unable_slurm_release` (AgentLaunch's: the
// cluster's release, "22.05.8", when its OCI support cannot run the
// attempt's bundle; empty when it can).
// Used by the submission, where the site is known (ParseSpec checks what
// needs no site).
Status CheckContainerForSite(const ExperimentSpec& spec, ContainerRuntime site,
                             const std::string& oci_unable_slurm_release);
// The longest time limit Slurm reads: time_str2secs (src/common/parse_time.c)
// counts the seconds in an int, so 2^31 - 1 s, in whole minutes
// (24855-03:14:00).
inline constexpr int kMaxTimeLimitMinutes = 2147483647 / 60;
// Slurm's time formats: "MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM",
// "D-HH:MM:SS". Seconds round up to whole minutes, as Slurm does; nullopt
// past kMaxTimeLimitMinutes.
std::optional<int> ParseSlurmTimeMinutes(const std::string& text);
std::string FormatSlurmTime(int minutes);
bool IsValidExperimentId(const std::string& id);
// The variables tfslurm sets for every rank of a PyTorch experiment, which
// its env cannot override: torch.distributed's env:// set, the ones torchrun
// adds (GROUP_WORLD_SIZE, ROLE_*, TORCHELASTIC_RUN_ID/RESTART_COUNT/
// MAX_RESTARTS) and OMP_NUM_THREADS.
bool IsTorchVariable(const std::string& name);
// The variables tfslurm sets for every process of a JAX experiment, which its
// env cannot override: JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES,
// JAX_PROCESS_ID, and JAX_LOCAL_DEVICE_IDS (the agent's, from the GPUs Slurm
// bound to the task).
bool IsJaxVariable(const std::string& name);

}  // namespace tfslurm
