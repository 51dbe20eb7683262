#include "service/core/sbatch_script.h"

#include <algorithm>
#include <csignal>

#include <nlohmann/json.hpp>

#include "service/core/components.h"

namespace tfslurm {
namespace {

// When srun starts the step, in milliseconds since the epoch, for the agents
// (schema/agent.proto, Register.started_after_launch_ms): under pyxis and
// Slurm's OCI support what passes before an agent starts is the image's
// import and the container's setup, which /metrics shows
// (tfslurm_task_start_seconds). GNU date's %N. The agents on other nodes
// read their own clocks: the figure is as good as the site's time sync.
constexpr char kLaunchStamp[] = "export TFSLURM_STEP_LAUNCHED_AT_MS=\"$(date +%s%3N)\"\n";

// One line with no control character, whatever `s` holds: JSON escapes them.
std::string CommentSafe(const nlohmann::json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
}

// The #SBATCH lines of components 1.. of a heterogeneous job, each after a
// `#SBATCH hetjob` separator, as a user writes them for sbatch. --time,
// --signal and --no-requeue are per component for sbatch, so each repeats them.
std::string RenderMoreComponents(const SubmitRequest& r) {
  std::string s;
  for (const SubmitRequest::Component& c : r.more_components) {
    s += "#SBATCH hetjob\n";
    if (!c.partition.empty()) s += "#SBATCH --partition=" + c.partition + "\n";
    s += "#SBATCH --nodes=" + std::to_string(c.nodes) + "\n";
    s += "#SBATCH --ntasks-per-node=" + std::to_string(c.tasks_per_node) + "\n";
    s += "#SBATCH --cpus-per-task=" + std::to_string(c.cpus_per_task) + "\n";
    s += "#SBATCH --mem-per-cpu=" + std::to_string(c.mem_per_cpu_mb) + "\n";
    if (c.gpus_per_node > 0)
      s += "#SBATCH --gpus-per-node=" + std::to_string(c.gpus_per_node) + "\n";
    if (c.gpus_per_task > 0)
      s += "#SBATCH --gpus-per-task=" + std::to_string(c.gpus_per_task) + "\n";
    if (!c.constraint.empty()) s += "#SBATCH --constraint=" + c.constraint + "\n";
    if (!c.nodelist.empty()) s += "#SBATCH --nodelist=" + c.nodelist + "\n";
    if (c.exclusive) s += "#SBATCH --exclusive\n";
    if (!r.exclude_nodes.empty()) s += "#SBATCH --exclude=" + r.exclude_nodes + "\n";
    s += "#SBATCH --time=" + FormatSlurmTime(r.time_limit_minutes) + "\n";
    if (r.warn_signal) s += "#SBATCH --signal=USR1@" + std::to_string(r.warn_time_s) + "\n";
    s += "#SBATCH --no-requeue\n";
  }
  return s;
}

bool UsesGpusPerTask(const SubmitRequest& r) {
  if (r.gpus_per_task > 0) return true;
  for (const SubmitRequest::Component& c : r.more_components)
    if (c.gpus_per_task > 0) return true;
  return false;
}

// What each component of a heterogeneous job holds, for the script's comment.
std::string DescribeComponents(const JobPlan& plan) {
  const std::vector<JobComponent>& components = plan.components;
  const std::vector<MemoryPlan>& memory = plan.memory;
  std::string s = "# A heterogeneous job of " + std::to_string(components.size()) +
                  " components (one per distinct resource group), and one step over all of\n"
                  "# them: SLURM_PROCID and SLURM_NODEID count across the components in order.\n";
  for (size_t k = 0; k < components.size(); ++k) {
    const JobComponent& c = components[k];
    const int last = c.first_task + c.Tasks() - 1;
    s += "#   component " + std::to_string(k) + ": " + ComponentRoles(c) + " (" + c.field + "), " +
         (last == c.first_task
              ? "task " + std::to_string(last)
              : "tasks " + std::to_string(c.first_task) + "-" + std::to_string(last)) +
         "; memory per task: " + (k < memory.size() ? memory[k].explanation : std::string("?")) +
         "\n";
  }
  return s;
}

// The agent's arguments after its path, as every task's are.
std::string AgentArguments(const ExperimentSpec& spec, int attempt, const AgentLaunch& launch) {
  return "  --service " + ShellQuote(launch.service_address) + " \\\n" + "  --experiment " +
         ShellQuote(spec.id) + " \\\n" + "  --attempt " + std::to_string(attempt) + " \\\n" +
         "  --address " + ShellQuote(spec.network_address);
}

std::string Words(const std::vector<std::string>& words, bool quote) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : " ") + (quote ? ShellQuote(w) : w);
  return s;
}

// The step of a job whose tasks srun starts in the container (pyxis): each
// component's srun options name its image, and the command is the
// self-contained agent mounted from the host. A heterogeneous job's
// components are srun's ':'-separated parts, each with its own image.
std::string RenderContainerStep(const ExperimentSpec& spec, const JobPlan& plan, int attempt,
                                const AttemptPaths& paths, const AgentLaunch& launch,
                                const SubmitRequest& r, ContainerRuntime runtime) {
  const bool het = !r.more_components.empty();
  ContainerPaths container_paths = ContainerPathsFor(spec, paths, launch);
  container_paths.munge_socket_dir = MungeSocketDir(r.environment);  // site mode
  const std::vector<ContainerMount> mounts =
      ContainerMounts(spec.container, runtime, container_paths);
  const std::string workdir = spec.workdir.empty() ? paths.model_dir : spec.workdir;
  std::vector<std::string> images;
  for (const JobComponent& c : plan.components)
    images.push_back(spec.container.ImageFor(c.roles.empty() ? "" : c.roles.front()));
  std::string s = "# The tasks run in the container image (" +
                  std::string(ContainerRuntimeName(runtime)) +
                  "): srun puts each task, the agent with it, in the\n"
                  "# container; the agent comes from the host, with its own loader and libraries,\n"
                  "# mounted read-only. The experiment's directory, MODEL_DIR and the workdir are\n"
                  "# mounted at their own paths.\n";
  // Per component: the shell lines srun needs first, and srun's options.
  std::vector<std::string> prologues;
  std::vector<std::vector<std::string>> options;
  for (size_t k = 0; k < images.size(); ++k) {
    std::string p;
    if (runtime == ContainerRuntime::kOci) {
      const std::string bundle =
          paths.log_dir + "/oci-bundle" + (het ? "-" + std::to_string(k) : std::string());
      const bool gpus = TaskHasGpus(
          spec, plan.components[k].roles.empty() ? "" : plan.components[k].roles.front());
      p = OciPrologue(bundle, OciConfig(images[k], mounts, workdir, r.user_id, r.group_id, gpus));
      options.push_back({ShellQuote("--container=" + bundle)});
    } else {
      p = PyxisPrologue(images[k]);
      options.push_back(PyxisSrunOptions(images[k], mounts, workdir));
    }
    if (std::find(prologues.begin(), prologues.end(), p) == prologues.end()) prologues.push_back(p);
  }
  for (const std::string& p : prologues) s += p;
  if (runtime == ContainerRuntime::kPyxis) s += kPyxisShell;
  const std::string agent = "  " + Words(AgentInContainer(launch.container_agent_dir), true);
  const std::string log_dir = het ? " \\\n  --log-dir " + ShellQuote(paths.log_dir) : "";
  s += kLaunchStamp;
  s += std::string("exec srun --kill-on-bad-exit=0 ") + (r.no_kill ? "--no-kill " : "") +
       (het ? "" : "--output=" + ShellQuote(paths.log_dir + "/task-%t.out") + " ") + "\\\n";
  for (size_t k = 0; k < images.size(); ++k) {
    if (k > 0) s += " : \\\n";
    if (het) s += "  --het-group=" + std::to_string(k) + " \\\n";
    for (const std::string& option : options[k]) s += "  " + option + " \\\n";
    s += agent + log_dir + " \\\n" + AgentArguments(spec, attempt, launch);
  }
  return s + "\n";
}

// The #SBATCH lines, from the request.
std::string RenderDirectives(const SubmitRequest& r) {
  std::string s;
  s += "#!/bin/bash\n";
  s += "#SBATCH --job-name=" + r.job_name + "\n";
  if (!r.partition.empty()) s += "#SBATCH --partition=" + r.partition + "\n";
  s += "#SBATCH --nodes=" + std::to_string(r.nodes) + "\n";
  s += "#SBATCH --ntasks-per-node=" + std::to_string(r.tasks_per_node) + "\n";
  s += "#SBATCH --cpus-per-task=" + std::to_string(r.cpus_per_task) + "\n";
  s += "#SBATCH --mem-per-cpu=" + std::to_string(r.mem_per_cpu_mb) + "\n";
  if (r.gpus_per_node > 0) s += "#SBATCH --gpus-per-node=" + std::to_string(r.gpus_per_node) + "\n";
  if (r.gpus_per_task > 0) s += "#SBATCH --gpus-per-task=" + std::to_string(r.gpus_per_task) + "\n";
  if (!r.constraint.empty()) s += "#SBATCH --constraint=" + r.constraint + "\n";
  if (!r.nodelist.empty()) s += "#SBATCH --nodelist=" + r.nodelist + "\n";
  if (r.exclusive) s += "#SBATCH --exclusive\n";
  if (!r.exclude_nodes.empty()) s += "#SBATCH --exclude=" + r.exclude_nodes + "\n";
  // Job-wide: sbatch carries them from the first component into every later
  // one (they are not reset_each_pass in src/common/slurm_opt.c,
  // slurm-22-05-8-1), so the first block names them once. The spec allows
  // no space, quote, '#' or '$' in them (spec.cc), so each stays one word.
  if (!r.account.empty()) s += "#SBATCH --account=" + r.account + "\n";
  if (!r.qos.empty()) s += "#SBATCH --qos=" + r.qos + "\n";
  if (!r.reservation.empty()) s += "#SBATCH --reservation=" + r.reservation + "\n";
  s += "#SBATCH --time=" + FormatSlurmTime(r.time_limit_minutes) + "\n";
  if (r.warn_signal) s += "#SBATCH --signal=USR1@" + std::to_string(r.warn_time_s) + "\n";
  s += "#SBATCH --no-requeue\n";
  if (r.no_kill) s += "#SBATCH --no-kill\n";
  s += "#SBATCH --chdir=" + r.work_dir + "\n";
  s += "#SBATCH --output=" + r.batch_output + "\n";
  s += RenderMoreComponents(r);
  return s;
}

// What the script does, for whoever inspects it.
std::string RenderComments(const ExperimentSpec& spec, const JobPlan& plan, int attempt,
                           const SubmitRequest& r) {
  const MemoryPlan& memory = plan.memory.front();
  const bool het = !r.more_components.empty();
  std::string s;
  s += "#\n";
  s += "# Generated by tfslurmd for experiment " + spec.id + ", attempt " +
       std::to_string(attempt) + ".\n";
  if (het)
    s += DescribeComponents(plan);
  else
    s += "# Memory per task: " + memory.explanation + ".\n";
  s += "# Each task runs tfslurm-agent, which registers with the service, receives its\n";
  switch (spec.framework) {
    case Framework::kPytorch:
      s += "# rank and torch.distributed's variables (RANK, MASTER_ADDR, ...), and runs the\n"
           "# command below (argv, no shell):\n";
      break;
    case Framework::kJax:
      s += "# process id and jax.distributed's variables (JAX_COORDINATOR_ADDRESS, ...), and\n"
           "# runs the command below (argv, no shell):\n";
      break;
    case Framework::kTensorflow:
      s += "# role, index and TF_CONFIG, and runs the command below (argv, no shell):\n";
      break;
  }
  s += "#   command: " + CommentSafe(spec.command) + "\n";
  if (!spec.workdir.empty()) s += "#   workdir: " + CommentSafe(spec.workdir) + "\n";
  if (!spec.env.empty()) s += "#   env: " + CommentSafe(spec.env) + "\n";
  s += "# The attempt secret reaches the agents in a file only the job's user reads\n";
  s += "# (TFSLURM_SECRET_FILE), never through this file. --no-requeue: after a preemption or\n";
  s += "# a node failure tfslurm starts a new attempt itself (see restart in the spec).\n";
  if (UsesGpusPerTask(r))
    s += "# GPUs per task: SLURM_GPUS_PER_TASK in the job's environment, as sbatch sets it, has\n"
         "# srun bind each task to GPUs of its own; CUDA_VISIBLE_DEVICES is Slurm's alone.\n";
  if (r.no_kill)
    s += "# Spare nodes: " + std::to_string(spec.resources.spare_nodes) + " of the " +
         std::to_string(r.nodes) +
         " nodes run agents that wait with no program, to take a failed node's place\n"
         "# in a restart in place. --no-kill on the job and on srun: Slurm takes a failed node\n"
         "# out of the job and kills only that node's tasks (kill_step_on_node, without\n"
         "# SSF_NO_KILL it kills the whole step).\n";
  if (r.warn_signal)
    s += "# Slurm sends SIGUSR1 to every task " + std::to_string(r.warn_time_s) +
         " s before the time limit; the agent forwards it so the program can checkpoint.\n";
  s += "\n";
  return s;
}

// The one srun step that starts an agent per task.
std::string RenderStep(const ExperimentSpec& spec, int attempt, const AttemptPaths& paths,
                       const AgentLaunch& launch, const SubmitRequest& r) {
  const bool het = !r.more_components.empty();
  std::string s;
  if (het) {
    // One step over every component. Each agent writes its own
    // task-<SLURM_PROCID>.out (--log-dir): srun's --output=task-%t.out would
    // name the files of component k with SLURM_PROCID + k (Slurm 22.05's
    // slurmstepd_job.c, _job_init_task_info, adds the component's offset to
    // the task id it expands %t with, as Slurm's master still does).
    std::string groups;
    for (size_t k = 0; k <= r.more_components.size(); ++k)
      groups += (k ? "," : "") + std::to_string(k);
    s += "# Each agent writes its task's output to task-<SLURM_PROCID>.out itself (--log-dir):\n";
    s += "# srun's %t names component k's files SLURM_PROCID + k in a heterogeneous step.\n";
    s += kLaunchStamp;
    s += "exec srun --het-group=" + groups + " --kill-on-bad-exit=0 \\\n";
    s += "  " + ShellQuote(launch.agent_path) + " \\\n";
    s += "  --log-dir " + ShellQuote(paths.log_dir) + " \\\n";
  } else {
    s += kLaunchStamp;
    s += std::string("exec srun --kill-on-bad-exit=0 ") + (r.no_kill ? "--no-kill " : "") +
         "--output=" + ShellQuote(paths.log_dir + "/task-%t.out") + " \\\n";
    s += "  " + ShellQuote(launch.agent_path) + " \\\n";
  }
  s += "  --service " + ShellQuote(launch.service_address) + " \\\n";
  s += "  --experiment " + ShellQuote(spec.id) + " \\\n";
  s += "  --attempt " + std::to_string(attempt) + " \\\n";
  s += "  --address " + ShellQuote(spec.network_address) + "\n";
  return s;
}

std::string RenderScript(const ExperimentSpec& spec, const JobPlan& plan, int attempt,
                         const AttemptPaths& paths, const AgentLaunch& launch,
                         const SubmitRequest& r) {
  const ContainerRuntime runtime =
      ResolveContainerRuntime(spec.container, launch.container_runtime);
  const bool inside = spec.container.enabled() && AgentRunsInside(runtime);
  return RenderDirectives(r) + RenderComments(spec, plan, attempt, r) +
         (inside ? RenderContainerStep(spec, plan, attempt, paths, launch, r, runtime)
                 : RenderStep(spec, attempt, paths, launch, r));
}

// The job's environment: tfslurmd's `base`, the account's identity over
// it, where the attempt's secret is, and what sbatch would have set for srun.
std::vector<std::string> JobEnvironment(const JobPlan& plan, const AttemptJob& attempt,
                                        const std::vector<std::string>& base) {
  const std::vector<JobComponent>& components = plan.components;
  std::vector<std::string> env = base;
  // The account's own HOME, USER and LOGNAME (site mode), over tfslurmd's.
  for (const std::string& kv : plan.account.identity_env) {
    const std::string key = kv.substr(0, kv.find('=') + 1);
    std::erase_if(env, [&](const std::string& e) { return e.starts_with(key); });
    env.push_back(kv);
  }
  // The secret's file, not the secret: the job's environment travels in
  // Slurm's submit and launch RPCs, which Slurm does not encrypt.
  env.push_back("TFSLURM_SECRET_FILE=" + attempt.secret_file);
  // The job's --gpus-per-task alone does not reach the step: srun in the
  // script learns it from SLURM_GPUS_PER_TASK (SLURM_GPUS_PER_TASK_HET_GROUP_k
  // per component; _opt_env in src/srun/libsrun/opt.c), which sbatch puts in
  // the job's environment (sbatch.c calls set_env_from_opts in
  // src/common/env.c; slurm-22-05-8-1) and libslurm does not. With it srun
  // binds each task to GPUs of its own (an implicit tres_bind
  // "gpu:per_task:N", _create_job_step_create_request in
  // src/srun/libsrun/launch.c); without it every task of a node sees all of
  // the node's GPUs of the job (checked on the local cluster).
  for (size_t k = 0; k < components.size(); ++k) {
    const int gpus = components[k].resources.gpus_per_task;
    if (gpus == 0) continue;
    const std::string group =
        components.size() > 1 ? "_HET_GROUP_" + std::to_string(k) + "=" : std::string("=");
    env.push_back("SLURM_GPUS_PER_TASK" + group + std::to_string(gpus));
  }
  if (components.size() > 1) {
    // What sbatch puts in a heterogeneous job's environment for each
    // component k (sbatch.c calls opt.c's set_envs on the first job
    // description with each component's offset): srun --het-group sizes
    // each component's part of the step from these. Without them, srun in
    // the batch script fails "More processors requested than permitted".
    for (size_t k = 0; k < components.size(); ++k) {
      const Resources& c = components[k].resources;
      const std::string group = "_HET_GROUP_" + std::to_string(k) + "=";
      env.push_back("SLURM_CPUS_PER_TASK" + group + std::to_string(c.cpus_per_task));
      env.push_back("SLURM_NPROCS" + group + std::to_string(c.Tasks()));
      env.push_back("SLURM_NTASKS" + group + std::to_string(c.Tasks()));
      env.push_back("SLURM_NTASKS_PER_NODE" + group + std::to_string(c.tasks_per_node));
    }
  }
  return env;
}

}  // namespace

ContainerPaths ContainerPathsFor(const ExperimentSpec& spec, const AttemptPaths& paths,
                                 const AgentLaunch& launch) {
  return {paths.experiment_dir, paths.model_dir,
          spec.workdir.empty() ? paths.model_dir : spec.workdir, launch.container_agent_dir};
}

std::string JobName(const std::string& experiment_id, int attempt) {
  return "tfx-" + experiment_id + "-a" + std::to_string(attempt);
}

SubmitRequest BuildSubmitRequest(const ExperimentSpec& spec, const JobPlan& plan,
                                 const AttemptJob& attempt, const AgentLaunch& launch,
                                 const std::vector<std::string>& base_environment) {
  SubmitRequest r;
  const std::vector<JobComponent>& components = plan.components;
  const Resources& first = components.front().resources;
  r.job_name = JobName(spec.id, attempt.number);
  r.partition = first.partition;
  // The spares' nodes come after the slots' (node_slots.h).
  r.nodes = first.nodes + spec.resources.spare_nodes;
  r.no_kill = spec.resources.spare_nodes > 0;
  r.tasks_per_node = first.tasks_per_node;
  r.cpus_per_task = first.cpus_per_task;
  r.gpus_per_node = first.gpus_per_node;
  r.gpus_per_task = first.gpus_per_task;
  r.constraint = components.front().constraint;
  r.nodelist = first.nodelist;
  r.exclusive = first.exclusive;
  r.account = spec.resources.account;
  r.qos = spec.resources.qos;
  r.reservation = spec.resources.reservation;
  r.mem_per_cpu_mb = plan.memory.front().mem_per_cpu_mb;
  for (size_t k = 1; k < components.size(); ++k) {
    const JobComponent& c = components[k];
    r.more_components.push_back(
        {c.resources.partition, c.resources.nodes, c.resources.tasks_per_node,
         c.resources.cpus_per_task, c.resources.gpus_per_node, plan.memory[k].mem_per_cpu_mb,
         c.constraint, c.resources.gpus_per_task, c.resources.nodelist, c.resources.exclusive});
  }
  r.user_id = plan.account.uid;
  r.group_id = plan.account.gid;
  r.time_limit_minutes = spec.resources.time_limit_minutes;
  // The user's own exclusions, then the bad-node memory's: slurmctld takes
  // a node named twice (node_name2bitmap sets its bit again,
  // src/common/node_conf.c).
  r.exclude_nodes = spec.resources.exclude;
  for (const std::string& node : attempt.excluded_nodes)
    r.exclude_nodes += (r.exclude_nodes.empty() ? "" : ",") + node;
  if (spec.signal_grace_s > 0) {
    r.warn_signal = SIGUSR1;
    r.warn_time_s = spec.signal_grace_s;
  }
  r.work_dir = attempt.paths.log_dir;
  r.batch_output = attempt.paths.log_dir + "/batch.out";
  r.environment = JobEnvironment(plan, attempt, base_environment);
  r.script = RenderScript(spec, plan, attempt.number, attempt.paths, launch, r);
  return r;
}

}  // namespace tfslurm
