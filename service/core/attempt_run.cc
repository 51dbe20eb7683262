#include "service/core/attempt_run.h"

#include <csignal>

#include "service/core/tf_config.h"
#include "service/core/wording.h"

namespace tfslurm {

bool IsRetryableExit(std::optional<int> exit_code, std::optional<int> signal) {
  if (signal && *signal != 0) return true;
  return exit_code && (*exit_code == 137 || *exit_code == 143);
}

AttemptRun::AttemptRun(const ExperimentSpec& spec, int attempt)
    : spec_(spec), components_(JobComponents(spec)), attempt_(attempt) {
  for (const TaskRole& r : AssignRoles(spec)) {
    TaskSlot slot;
    slot.role = r;
    slot.component = ComponentOfTask(components_, TaskIndex(size()));
    tasks_.push_back(slot);
  }
  checkpointing_task_ = FindCheckpointingTask();
}

bool AttemptRun::Register(TaskIndex task, const std::string& node, const std::string& address,
                          int node_id, int local_id) {
  TaskSlot& t = tasks_[task.value()];
  t.node = node;
  t.address = address;
  t.node_id = node_id;
  t.local_id = local_id;
  // A stream again: the agent is back.
  if (t.vanished()) t.agent = TaskSlot::AgentLink::kNormal;
  if (t.Register() && t.state == TaskState::kPending) t.state = TaskState::kRegistered;
  return !assignments_sent_ && AllRegistered();
}

bool AttemptRun::AllRegistered() const {
  // A registration is never undone, so the scan goes on from the first task
  // missing last time: a storm of N registrations costs O(N), not O(N^2).
  while (first_unregistered_ < tasks_.size() && tasks_[first_unregistered_].registered())
    ++first_unregistered_;
  return first_unregistered_ == tasks_.size();
}

void AttemptRun::MarkAssigned() {
  assignments_sent_ = true;
  for (TaskSlot& t : tasks_) {
    if (t.state == TaskState::kRegistered) t.state = TaskState::kRunning;
  }
}

std::string AttemptRun::ClusterSpec() const {
  std::vector<TaskRole> roles;
  std::vector<std::string> addresses;
  for (const TaskSlot& t : tasks_) {
    roles.push_back(t.role);
    addresses.push_back(t.address);
  }
  return BuildClusterSpec(roles, addresses);
}

std::optional<TaskIndex> AttemptRun::FindCheckpointingTask() const {
  if (HasRanks(spec_.framework)) return TaskIndex(0);
  std::optional<TaskIndex> worker0;
  for (TaskIndex i : indices()) {
    if (task(i).role.role == "chief") return i;
    if (task(i).role.role == "worker" && task(i).role.index == 0) worker0 = i;
  }
  return worker0;
}

std::vector<std::pair<std::string, std::string>> AttemptRun::TaskEnv(
    TaskIndex index, const std::string& model_dir) const {
  const TaskSlot& t = task(index);
  std::vector<std::pair<std::string, std::string>> env(spec_.env.begin(), spec_.env.end());
  env.emplace_back("EXPERIMENT_ID", spec_.id);
  env.emplace_back("MODEL_DIR", model_dir);
  if (spec_.framework == Framework::kPytorch) {
    AddTorchEnv(index, env);
  } else if (spec_.framework == Framework::kJax) {
    AddJaxEnv(index, env);
  } else {
    env.emplace_back("TFSLURM_ROLE", t.role.role);
    env.emplace_back("TFSLURM_INDEX", std::to_string(t.role.index));
    // A heterogeneous job's tasks know their component; SLURM_HET_JOB_OFFSET
    // is not set in the tasks of an srun --het-group step (Slurm 22.05).
    if (components_.size() > 1) env.emplace_back("TFSLURM_COMPONENT", std::to_string(t.component));
  }
  env.emplace_back("TFSLURM_ATTEMPT", std::to_string(attempt_));
  // Where a program that writes no TensorBoard event files logs scalars
  // itself, as JSON lines its agent follows (docs/scalars.md); only the
  // reporting task's agent reads it.
  if (index == CheckpointingTask())
    env.emplace_back("TFSLURM_SCALARS_FILE", model_dir + "/" + kScalarsFileName);
  auto colon = t.address.rfind(':');
  if (colon != std::string::npos) env.emplace_back("TFSLURM_PORT", t.address.substr(colon + 1));
  // No CUDA_VISIBLE_DEVICES: slurmstepd sets it for each task from the GPUs
  // Slurm gave the step or the task (gres_p_step_set_env, gres_p_task_set_env
  // in src/plugins/gres/gpu/gres_gpu.c through gres_common_gpu_set_env in
  // src/plugins/gres/common/gres_common.c, slurm-22-05-8-1), renumbered from
  // 0 under ConstrainDevices, and the agent passes it on. A mapping of ours
  // on top would name GPUs by an index Slurm does not use.
  return env;
}

void AttemptRun::AddTorchEnv(TaskIndex index,
                             std::vector<std::pair<std::string, std::string>>& env) const {
  // What torchrun gives each worker process (torch/distributed/elastic/
  // agent/server/local_elastic_agent.py), from the registrations: RANK is
  // the task's index (its SLURM_PROCID but where a spare node runs it, whose
  // agents' SLURM_PROCIDs are the spare's: the ranks stay 0..N-1), LOCAL_RANK SLURM_LOCALID,
  // GROUP_RANK SLURM_NODEID, and the store's address is rank 0's, on the port its agent holds bound
  // for it (agent/port_reservation.h: TCPStore's listener sets SO_REUSEADDR, so it binds that port
  // and nobody else can meanwhile).
  const TaskSlot& t = task(index);
  const Resources& r = spec_.resources;
  std::string master = tasks_[0].address, master_port;
  if (auto colon = master.rfind(':'); colon != std::string::npos) {
    master_port = master.substr(colon + 1);
    master.resize(colon);
  }
  if (master.size() > 1 && master.front() == '[' && master.back() == ']')
    master = master.substr(1, master.size() - 2);  // an IPv6 literal
  auto add = [&](const char* name, std::string value) { env.emplace_back(name, std::move(value)); };
  add("RANK", std::to_string(index.value()));
  add("WORLD_SIZE", std::to_string(size()));
  add("LOCAL_RANK", std::to_string(t.local_id));
  add("LOCAL_WORLD_SIZE", std::to_string(r.tasks_per_node));
  add("GROUP_RANK", std::to_string(t.node_id));
  add("NODE_RANK", std::to_string(t.node_id));
  add("GROUP_WORLD_SIZE", std::to_string(r.nodes));
  add("ROLE_NAME", "default");
  add("ROLE_RANK", std::to_string(index.value()));
  add("ROLE_WORLD_SIZE", std::to_string(size()));
  add("MASTER_ADDR", master);
  add("MASTER_PORT", master_port);
  add("OMP_NUM_THREADS", std::to_string(spec_.pytorch.omp_num_threads.value_or(r.cpus_per_task)));
  add("TORCHELASTIC_RUN_ID", spec_.id);
  add("TORCHELASTIC_RESTART_COUNT", std::to_string(attempt_ - 1));
  add("TORCHELASTIC_MAX_RESTARTS", std::to_string(spec_.restart.max_restarts));
}

void AttemptRun::AddJaxEnv(TaskIndex index,
                           std::vector<std::pair<std::string, std::string>>& env) const {
  // jax.distributed.initialize's arguments (docs/jax.md cites JAX 0.10.2).
  // JAX reads JAX_COORDINATOR_ADDRESS itself (jax/_src/distributed.py:76-77)
  // as "host:port"; its process 0 serves there, binding [::]:port (:117), the
  // port that process 0's agent holds bound for it, so the address is free
  // and known to all before any program starts, instead of JAX's Slurm guess
  // (61440 + job id % 4096, clusters/slurm_cluster.py:42), which two jobs on
  // a node can share. JAX reads no variable for the count and the id (only
  // its Slurm detection fills them, from SLURM_NTASKS and SLURM_PROCID): the
  // program passes JAX_NUM_PROCESSES and JAX_PROCESS_ID, so a partial Slurm
  // environment cannot derail it. JAX_LOCAL_DEVICE_IDS is the agent's: only
  // it sees the GPUs Slurm bound to its task (agent/child_env.cc).
  auto add = [&](const char* name, std::string value) { env.emplace_back(name, std::move(value)); };
  add("JAX_COORDINATOR_ADDRESS", tasks_[0].address);
  add("JAX_NUM_PROCESSES", std::to_string(size()));
  add("JAX_PROCESS_ID", std::to_string(index.value()));
}

bool AttemptRun::IsTracked(TaskIndex index) const {
  if (HasRanks(spec_.framework)) return true;  // every rank must exit 0
  const TaskRole& r = task(index).role;
  switch (spec_.success) {
    case SuccessPolicy::kAuto:
      return spec_.cluster.chief > 0 ? r.role == "chief" : r.role == "worker";
    case SuccessPolicy::kChief:
      return r.role == "chief";
    case SuccessPolicy::kWorker0:
      return r.role == "worker" && r.index == 0;
    case SuccessPolicy::kAllWorkers:
      return r.role == "worker";
  }
  return false;
}

bool AttemptRun::MayRestartAlone(TaskIndex index) const {
  const TaskRole& r = task(index).role;
  return HasLoneRestarts(spec_) && spec_.restart.max_task_restarts > 0 &&
         (r.role == "worker" || r.role == "evaluator") && index != CheckpointingTask();
}

bool AttemptRun::RestartsAloneNow(TaskIndex index, std::optional<int> exit_code,
                                  std::optional<int> signal) const {
  const TaskSlot& t = task(index);
  // SIGTERM (143) is what Slurm sends every task at a time limit, a
  // preemption or a cancel: the job's end decides those, not a restart.
  // The time-limit warning's death is the limit's too (Evaluate).
  const bool died = (signal.value_or(0) != 0 && *signal != SIGTERM &&
                     !KilledByTimeLimitWarning(signal, spec_.signal_grace_s)) ||
                    (!signal.value_or(0) && exit_code == 137);
  if (!died || !MayRestartAlone(index) || outcome_.kind != Outcome::kUndecided ||
      t.phase() != TaskPhase::kRegistered || !assignments_sent_)
    return false;
  for (TaskIndex i : indices()) {
    const TaskSlot& other = task(i);
    if (i != CheckpointingTask() && other.role.role != "ps") continue;
    if (!other.registered() || other.exited() || other.vanished()) return false;
  }
  return true;
}

Outcome AttemptRun::OnExit(TaskIndex index, std::optional<int> exit_code, std::optional<int> signal,
                           bool reaped, const std::string& detail, bool at_startup) {
  TaskSlot& t = mutable_task(index);
  if (!t.MarkExited(at_startup && !step_trained_)) return outcome_;
  t.exit_code = exit_code;
  t.signal = signal;
  t.detail = detail;
  bool ok = !signal.value_or(0) && exit_code.value_or(-1) == 0;
  t.state = reaped ? TaskState::kReaped : ok ? TaskState::kSucceeded : TaskState::kFailed;
  if (outcome_.kind == Outcome::kUndecided) outcome_ = Evaluate(index);
  return outcome_;
}

void AttemptRun::Decide(Outcome outcome) {
  if (outcome_.kind == Outcome::kUndecided) outcome_ = std::move(outcome);
}

Outcome AttemptRun::Evaluate(TaskIndex index) {
  const TaskSlot& t = task(index);
  std::string who = TaskName(t, index);
  if (t.state == TaskState::kFailed &&
      (IsTracked(index) || t.role.role == "chief" || t.role.role == "ps")) {
    Outcome failed{Outcome::kFailed,
                   who + " " + HowItEnded(t.exit_code, t.signal, t.detail, spec_.signal_grace_s)};
    // A program killed by the warning before the time limit ends where the
    // limit would have ended it, a little earlier: a timeout.
    failed.failure = KilledByTimeLimitWarning(t.signal, spec_.signal_grace_s) ? EndReason::kTimeout
                     : IsRetryableExit(t.exit_code, t.signal) ? EndReason::kRetryableExit
                     : t.failed_at_startup()                  ? EndReason::kStartupError
                                                              : EndReason::kPermanentExit;
    failed.by_sigterm = t.signal.value_or(0) == SIGTERM || (!t.signal && t.exit_code == 143);
    if (failed.failure == EndReason::kPermanentExit || failed.failure == EndReason::kStartupError) {
      for (TaskIndex i : indices()) {
        const TaskSlot& other = task(i);
        if (i == index || !other.vanished() || other.exited()) continue;
        failed.failure = EndReason::kRetryableExit;
        failed.reason += ", after the agent of " + TaskName(other, i) +
                         " had vanished without reporting an exit (counted as retryable: its "
                         "program may have gone with it, and this failure may follow from that)";
        break;
      }
    }
    return failed;
  }
  // Success: every tracked task exited 0.
  for (TaskIndex i : indices())
    if (IsTracked(i) && task(i).state != TaskState::kSucceeded) return {};
  if (HasRanks(spec_.framework))
    return {Outcome::kSucceeded, "every rank exited 0 (" + std::to_string(size()) + " ranks)"};
  std::string what;
  switch (spec_.success) {
    case SuccessPolicy::kAuto:
      what = spec_.cluster.chief > 0 ? "the chief exited 0" : "every worker exited 0";
      break;
    case SuccessPolicy::kChief:
      what = "the chief exited 0";
      break;
    case SuccessPolicy::kWorker0:
      what = "worker 0 exited 0";
      break;
    case SuccessPolicy::kAllWorkers:
      what = "every worker exited 0";
      break;
  }
  return {Outcome::kSucceeded,
          what + std::string(" (success: ") + SuccessPolicyName(spec_.success) + ")"};
}

std::vector<TaskIndex> AttemptRun::TasksToReap() const {
  std::vector<TaskIndex> out;
  for (TaskIndex i : indices()) {
    const TaskSlot& t = task(i);
    if (t.phase() == TaskPhase::kRegistered || t.phase() == TaskPhase::kRestartingAlone)
      out.push_back(i);
  }
  return out;
}

std::vector<TaskIndex> AttemptRun::UnconfirmedShutdowns() const {
  std::vector<TaskIndex> out;
  for (TaskIndex i : indices()) {
    const TaskSlot& t = task(i);
    if (t.shutdown_sent()) out.push_back(i);
  }
  return out;
}

bool AttemptRun::AnyUnconfirmedShutdown() const {
  // An exit is never undone, and a task becomes unconfirmed only through
  // MarkShutdownSent, which moves the cursor back to it: a scan of every task
  // at each of 16,384 exit reports was seconds of a restart in place.
  while (first_unconfirmed_ < tasks_.size() && !tasks_[first_unconfirmed_].shutdown_sent())
    ++first_unconfirmed_;
  return first_unconfirmed_ < tasks_.size();
}

std::vector<TaskIndex> AttemptRun::MissingRegistrations() const {
  std::vector<TaskIndex> out;
  for (TaskIndex i : indices()) {
    const TaskSlot& t = task(i);
    if (!t.registered()) out.push_back(i);
  }
  return out;
}

}  // namespace tfslurm
