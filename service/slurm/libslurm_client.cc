// SlurmClient over libslurm: the only file that includes slurm.h. Every call
// is one RPC to slurmctld (partition shape is two: partitions and nodes, plus
// the configuration when the partition has no default memory of its own).
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>

#include "service/slurm/default_memory.h"
#include "service/slurm/libslurm_client.h"
#include "service/slurm/slurm_releases.h"

namespace tfslurm::slurm {
namespace {

static_assert(kMemPerCpuFlag == MEM_PER_CPU && kNoVal64 == NO_VAL64,
              "default_memory.h decodes with other constants than this slurm.h");

std::string SlurmError(const std::string& what) {
  int err = releases::LastError();
  return what + ": " + slurm_strerror(err) + " (errno " + std::to_string(err) + ")";
}

JobState FromSlurm(uint32_t state) {
  switch (state & JOB_STATE_BASE) {
    case JOB_PENDING:
      return JobState::kPending;
    case JOB_RUNNING:
      return JobState::kRunning;
    case JOB_SUSPENDED:
      return JobState::kSuspended;
    case JOB_COMPLETE:
      return JobState::kCompleted;
    case JOB_CANCELLED:
      return JobState::kCancelled;
    case JOB_FAILED:
      return JobState::kFailed;
    case JOB_TIMEOUT:
      return JobState::kTimeout;
    case JOB_NODE_FAIL:
      return JobState::kNodeFail;
    case JOB_PREEMPTED:
      return JobState::kPreempted;
    case JOB_BOOT_FAIL:
      return JobState::kBootFail;
    case JOB_DEADLINE:
      return JobState::kDeadline;
    case JOB_OOM:
      return JobState::kOutOfMemory;
    default:
      return JobState::kUnknown;
  }
}

// The spec field a refusal about the site's options is about (account,
// QOS, reservation, node lists, accounting limits); nullopt for any other
// error. slurmctld refuses an account the user has no association with
// with ESLURM_INVALID_ACCOUNT (_job_create), a QOS the association may not
// use with ESLURM_INVALID_QOS (_determine_and_validate_qos), and a job past
// an association or QOS limit, under AccountingStorageEnforce=limits, with
// ESLURM_ACCOUNTING_POLICY (_job_create, after acct_policy_validate), all in
// src/slurmctld/job_mgr.c at slurm-22-05-8-1; ESLURM_QOS_THRES is a QOS
// threshold (slurm_errno.h). Required and excluded nodes that overlap or
// that the cluster does not have are ESLURM_INVALID_NODE_NAME (_job_create).
std::optional<std::string> SiteOptionField(int err, const SubmitRequest& r) {
  switch (err) {
    case ESLURM_INVALID_ACCOUNT:
      return std::string("resources.account");
    case ESLURM_INVALID_QOS:
    case ESLURM_QOS_THRES:
      return std::string("resources.qos");
    case ESLURM_RESERVATION_ACCESS:
    case ESLURM_RESERVATION_INVALID:
    case ESLURM_RESERVATION_NOT_USABLE:
    case ESLURM_RESERVATION_BUSY:
    case ESLURM_RESERVATION_MAINT:
    case ESLURM_RESERVATION_USER_GROUP:
      return std::string("resources.reservation");
    case ESLURM_ACCOUNTING_POLICY:
      // Any limit of the association or the QOS: the job's size, time or
      // count. The QOS is the likelier knob when one was asked for.
      return std::string(r.qos.empty() ? "resources" : "resources.qos");
    case ESLURM_INVALID_NODE_NAME:
      return std::string(r.nodelist.empty() ? "resources.exclude" : "resources.nodelist");
    default:
      return std::nullopt;
  }
}

// "; resources.account was 'x'" for the field a refusal names.
std::string SiteOptionValue(const std::string& field, const SubmitRequest& r) {
  const std::string* value = nullptr;
  if (field == "resources.account") value = &r.account;
  if (field == "resources.qos") value = &r.qos;
  if (field == "resources.reservation") value = &r.reservation;
  if (field == "resources.nodelist") value = &r.nodelist;
  if (field == "resources.exclude") value = &r.exclude_nodes;
  if (!value) return "";
  return value->empty() ? "; " + field + " was not given (Slurm's default)"
                        : "; " + field + " was '" + *value + "'";
}

// After ESLURM_INVALID_NODE_NAME: the names in the job's node lists that
// slurmctld does not know, in "; unknown nodes: a, b" form, or "" (one more
// RPC, on this error path only).
std::string UnknownNodes(const SubmitRequest& r) {
  node_info_msg_t* nodes = nullptr;
  if (slurm_load_node(0, &nodes, SHOW_ALL) != SLURM_SUCCESS) return "";
  std::vector<std::string> known;
  for (uint32_t i = 0; i < nodes->record_count; ++i)
    if (nodes->node_array[i].name) known.emplace_back(nodes->node_array[i].name);
  slurm_free_node_info_msg(nodes);
  std::vector<std::string> unknown;
  std::string lists = r.nodelist + "," + r.exclude_nodes;
  for (const SubmitRequest::Component& c : r.more_components) lists += "," + c.nodelist;
  for (const std::string& node : ExpandHostlist(lists))
    if (std::find(known.begin(), known.end(), node) == known.end() &&
        std::find(unknown.begin(), unknown.end(), node) == unknown.end())
      unknown.push_back(node);
  std::string out;
  for (const std::string& node : unknown) out += (out.empty() ? "" : ", ") + node;
  return out.empty() ? "" : "; nodes this cluster does not have: " + out;
}

// slurmctld refuses required nodes that are also excluded with a bare
// "Invalid node name specified" (_job_create, src/slurmctld/job_mgr.c,
// slurm-22-05-8-1); say which node and why here instead. The excluded
// list holds the spec's exclude and the experiment's bad-node memory.
Status CheckRequiredNodesNotExcluded(const SubmitRequest& r,
                                     const std::vector<SubmitRequest::Component>& parts) {
  for (size_t k = 0; k < parts.size(); ++k) {
    if (parts[k].nodelist.empty() || r.exclude_nodes.empty()) continue;
    std::vector<std::string> excluded = ExpandHostlist(r.exclude_nodes);
    for (const std::string& node : ExpandHostlist(parts[k].nodelist)) {
      if (std::find(excluded.begin(), excluded.end(), node) == excluded.end()) continue;
      // Components 1.. come from roles.<role> blocks, which this request
      // does not name.
      const std::string field = k == 0 ? "resources.nodelist" : "roles";
      std::string msg = "nodelist '" + parts[k].nodelist + "' requires node " + node +
                        ", which this job excludes ('" + r.exclude_nodes +
                        "'): resources.exclude, or a node an earlier attempt of this experiment "
                        "failed on (tfslurm's bad-node memory); remove " +
                        node + " from nodelist";
      return InvalidArgument("job " + r.job_name + ": " + msg, {{field, msg}});
    }
  }
  return Status::Ok();
}

// The job_desc_msg_t of component `c` of `r` (`leader`: component 0), its
// strings kept in `strings` and its environment `env`, which outlive it.
void FillJobDesc(const SubmitRequest& r, const SubmitRequest::Component& c, bool leader,
                 std::vector<char*>& env, std::deque<std::string>& strings, job_desc_msg_t& desc) {
  auto keep = [&](const std::string& s) { return strings.emplace_back(s).data(); };
  slurm_init_job_desc_msg(&desc);
  desc.name = keep(r.job_name);
  if (!c.partition.empty()) desc.partition = keep(c.partition);
  // slurmctld keeps the leader's script and ignores the others'
  // (proc_req.c, _slurm_rpc_submit_batch_het_job); every component needs
  // an environment (job_mgr.c, _copy_job_desc_to_file), as sbatch gives.
  if (leader) desc.script = keep(r.script);
  desc.work_dir = keep(r.work_dir);
  desc.std_out = keep(r.batch_output);
  desc.environment = env.data();
  desc.env_size = static_cast<uint32_t>(env.size());
  desc.min_nodes = desc.max_nodes = static_cast<uint32_t>(c.nodes);
  desc.ntasks_per_node = static_cast<uint16_t>(c.tasks_per_node);
  desc.num_tasks = static_cast<uint32_t>(c.nodes * c.tasks_per_node);
  desc.cpus_per_task = static_cast<uint16_t>(c.cpus_per_task);
  desc.pn_min_memory = static_cast<uint64_t>(c.mem_per_cpu_mb) | MEM_PER_CPU;
  desc.time_limit = static_cast<uint32_t>(r.time_limit_minutes);
  if (!r.exclude_nodes.empty()) desc.exc_nodes = keep(r.exclude_nodes);
  if (!c.constraint.empty()) desc.features = keep(c.constraint);
  if (!c.nodelist.empty()) desc.req_nodes = keep(c.nodelist);
  // sbatch --exclusive sets shared = JOB_SHARED_NONE (arg_set_exclusive
  // in src/common/slurm_opt.c), copied into the job description by
  // slurm_opt_create_job_desc; slurm_init_job_desc_msg leaves NO_VAL16,
  // the partition's OverSubscribe.
  if (c.exclusive) desc.shared = JOB_SHARED_NONE;
  // Job-wide: sbatch keeps these from the first component for every
  // later one (they are not reset_each_pass in slurm_opt.c), and
  // slurmctld validates each component's own (job_allocate per
  // component in _slurm_rpc_submit_batch_het_job, proc_req.c).
  if (!r.account.empty()) desc.account = keep(r.account);
  if (!r.qos.empty()) desc.qos = keep(r.qos);
  if (!r.reservation.empty()) desc.reservation = keep(r.reservation);
  if (c.gpus_per_node > 0) desc.tres_per_node = keep("gres:gpu:" + std::to_string(c.gpus_per_node));
  // What sbatch --gpus-per-task=N sends: xfmt_tres(&tres_per_task,
  // "gres:gpu", "N") in slurm_opt_create_job_desc (src/common/slurm_opt.c,
  // formatted by src/common/proc_args.c; slurm-22-05-8-1).
  if (c.gpus_per_task > 0) desc.tres_per_task = keep("gres:gpu:" + std::to_string(c.gpus_per_task));
  if (r.warn_signal) {
    desc.warn_signal = static_cast<uint16_t>(r.warn_signal);
    desc.warn_time = static_cast<uint16_t>(r.warn_time_s);
  }
  // tfslurm restarts a preempted or failed job itself, as a new attempt
  // with a new secret; Slurm requeueing the same job would run the old
  // attempt a second time next to it.
  desc.requeue = 0;
  // sbatch --no-kill: slurmctld then takes a failed node out of the job
  // (excise_node_from_job) instead of ending it NODE_FAIL
  // (kill_running_job_by_node_name, src/slurmctld/job_mgr.c,
  // slurm-22-05-8-1; _foreach_kill_running_job_by_node in 26.05).
  if (r.no_kill) desc.kill_on_node_fail = 0;
  // Root or SlurmUser may submit for any user (slurmctld's _valid_id,
  // src/slurmctld/proc_req.c at slurm-22-05-8-1); anyone else only for
  // themselves. There is no field for supplementary groups: slurmctld
  // puts the user's own into the job's credential (_fill_cred_gids,
  // src/common/slurm_cred.c, unless LaunchParameters=disable_send_gids).
  desc.user_id = r.user_id;
  desc.group_id = r.group_id;
}

// slurmctld refused `r` with Slurm errno `err`: the field of the spec it
// points at when it is the user's to fix, else Unavailable (retried).
Status SubmitRefusal(const SubmitRequest& r, int err) {
  std::string msg = SlurmError("slurmctld refused job " + r.job_name);
  if (auto field = SiteOptionField(err, r)) {
    // Slurm's own reason (slurm_strerror), then what the spec said.
    std::string reason = std::string(slurm_strerror(err)) + " (Slurm errno " + std::to_string(err) +
                         ")" + SiteOptionValue(*field, r);
    if (err == ESLURM_INVALID_NODE_NAME) reason += UnknownNodes(r);
    return InvalidArgument(msg, {{*field, reason}});
  }
  // Errors about the request itself are the user's to fix; the rest
  // (slurmctld down, timeouts) are worth retrying.
  if (err == ESLURM_INVALID_PARTITION_NAME || err == ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE ||
      err == ESLURM_INVALID_TIME_LIMIT || err == ESLURM_TOO_MANY_REQUESTED_CPUS ||
      err == ESLURM_INVALID_NODE_COUNT || err == ESLURM_INVALID_TASK_MEMORY ||
      err == ESLURM_PARTITION_NOT_AVAIL || err == ESLURM_INVALID_GRES ||
      err == ESLURM_INVALID_FEATURE || err == ESLURM_NOT_SUPPORTED)
    return InvalidArgument(msg, {{"resources", msg}});
  return Unavailable(msg);
}

// libslurm keeps process-wide state (the config, the auth plugin), set up once
// per process. The API calls themselves are safe to make from several threads
// (slurmrestd serves every request from a pool of threads through them), so
// a submission never waits behind a poll's slurm_load_jobs.
std::once_flag g_init_once;

class LibslurmClient final : public SlurmClient {
 public:
  LibslurmClient() {
    std::call_once(g_init_once, [] { slurm_init(nullptr); });
  }

  StatusOr<PartitionShape> GetPartition(const std::string& name) override {
    partition_info_msg_t* parts = nullptr;
    if (slurm_load_partitions(0, &parts, SHOW_ALL) != SLURM_SUCCESS)
      return Unavailable(SlurmError("loading partitions from slurmctld"));
    PartitionShape shape;
    std::string node_list;
    uint64_t partition_def_mem = 0;
    bool found = false;
    std::string known;
    for (uint32_t i = 0; i < parts->record_count; ++i) {
      partition_info_t& p = parts->partition_array[i];
      std::string pname = p.name ? p.name : "";
      known += (known.empty() ? "" : ", ") + pname;
      bool match = name.empty() ? (p.flags & PART_FLAG_DEFAULT) : pname == name;
      if (!match || found) continue;
      found = true;
      shape.name = pname;
      partition_def_mem = p.def_mem_per_cpu;
      if (p.max_time != INFINITE && p.max_time != NO_VAL)
        shape.max_time_minutes = static_cast<int>(p.max_time);
      node_list = p.nodes ? p.nodes : "";
    }
    slurm_free_partition_info_msg(parts);
    if (!found) {
      std::string what =
          name.empty() ? "no default partition is set" : "no partition named '" + name + "'";
      return InvalidArgument(what + " in this cluster",
                             {{"resources.partition", what + "; partitions: " + known}});
    }

    // A partition without its own default takes the cluster's DefMemPerCPU
    // (top of slurm.conf) at job time; only slurm_load_ctl_conf shows it.
    uint64_t cluster_def_mem = 0;
    if (partition_def_mem == 0 || partition_def_mem == NO_VAL64) {
      slurm_conf_t* conf = nullptr;
      if (slurm_load_ctl_conf(0, &conf) != SLURM_SUCCESS)
        return Unavailable(SlurmError("loading the configuration from slurmctld"));
      cluster_def_mem = conf->def_mem_per_cpu;
      releases::FreeConf(conf);
    }
    if (auto def = EffectiveDefMemPerCpu(partition_def_mem, cluster_def_mem)) {
      shape.def_mem_per_cpu_mb = def->mb;
      shape.def_mem_per_cpu_cluster_wide = def->cluster_wide;
    }

    node_info_msg_t* nodes = nullptr;
    if (slurm_load_node(0, &nodes, SHOW_ALL) != SLURM_SUCCESS)
      return Unavailable(SlurmError("loading nodes from slurmctld"));
    std::vector<std::string> members = ExpandHostlist(node_list);
    for (uint32_t i = 0; i < nodes->record_count; ++i) {
      node_info_t& n = nodes->node_array[i];
      if (!n.name) continue;
      for (const std::string& m : members) {
        if (m == n.name) {
          // slurm.h's node_states and flags (slurm_protocol_defs.h's
          // IS_NODE_* macros say the same, but are not installed).
          bool unavailable =
              (n.node_state & NODE_STATE_BASE) == NODE_STATE_DOWN ||
              (n.node_state & (NODE_STATE_DRAIN | NODE_STATE_FAIL | NODE_STATE_NO_RESPOND)) != 0;
          shape.nodes.push_back({n.name, n.cpus, static_cast<int64_t>(n.real_memory), unavailable});
          break;
        }
      }
    }
    slurm_free_node_info_msg(nodes);
    return shape;
  }

  StatusOr<int64_t> Submit(const SubmitRequest& r) override {
    // Component 0 is the request's own fields; a heterogeneous job adds one
    // job_desc_msg_t per further component.
    std::vector<SubmitRequest::Component> parts = {
        {r.partition, r.nodes, r.tasks_per_node, r.cpus_per_task, r.gpus_per_node, r.mem_per_cpu_mb,
         r.constraint, r.gpus_per_task, r.nodelist, r.exclusive}};
    parts.insert(parts.end(), r.more_components.begin(), r.more_components.end());
    if (Status s = CheckRequiredNodesNotExcluded(r, parts); !s.ok()) return s;
    // libslurm takes char*: every string below outlives the call (a deque:
    // its elements never move).
    std::deque<std::string> strings;
    std::vector<char*> env;
    for (const std::string& e : r.environment) env.push_back(const_cast<char*>(e.c_str()));
    std::vector<job_desc_msg_t> descs(parts.size());
    for (size_t k = 0; k < parts.size(); ++k)
      FillJobDesc(r, parts[k], k == 0, env, strings, descs[k]);

    submit_response_msg_t* resp = nullptr;
    int rc;
    if (descs.size() == 1) {
      rc = slurm_submit_batch_job(&descs[0], &resp);
    } else {
      // A list of job_desc_msg_t, the leader first; the answer is the
      // leader's id.
      rc = releases::SubmitHetJob(descs, &resp);
    }
    if (rc != SLURM_SUCCESS) return SubmitRefusal(r, releases::LastError());
    int64_t id = releases::SubmittedJobId(*resp);
    slurm_free_submit_response_response_msg(resp);
    return id;
  }

  StatusOr<std::vector<JobInfo>> LoadJobs() override {
    job_info_msg_t* msg = nullptr;
    if (slurm_load_jobs(0, &msg, SHOW_ALL) != SLURM_SUCCESS)
      return Unavailable(SlurmError("loading jobs from slurmctld"));
    std::vector<JobInfo> jobs;
    jobs.reserve(msg->record_count);
    for (uint32_t i = 0; i < msg->record_count; ++i) {
      slurm_job_info_t& j = msg->job_array[i];
      JobInfo info;
      info.job_id = j.job_id;
      info.name = j.name ? j.name : "";
      info.state = FromSlurm(j.job_state);
      info.completing = j.job_state & JOB_COMPLETING;
      if (j.state_desc && *j.state_desc)
        info.reason = j.state_desc;
      else
        info.reason = releases::JobReason(j.state_reason);
      info.nodes = j.nodes ? j.nodes : "";
      info.node_names = ExpandHostlist(info.nodes);
      // exit_code is a wait() status.
      if (WIFEXITED(j.exit_code)) info.exit_code = WEXITSTATUS(j.exit_code);
      if (WIFSIGNALED(j.exit_code)) info.exit_signal = WTERMSIG(j.exit_code);
      info.restart_count = j.restart_cnt;
      info.start_time = j.start_time;
      info.end_time = j.end_time;
      // A heterogeneous job's components are records of their own
      // (het_job_id the leader's, 0 for a plain job); core folds them
      // together (GroupHetJobs, core/job_state.cc).
      if (j.het_job_id != 0 && j.het_job_id != NO_VAL) {
        info.het_job_id = j.het_job_id;
        info.het_job_offset = static_cast<int>(j.het_job_offset);
      }
      if (j.pn_min_memory & MEM_PER_CPU)
        info.mem_per_cpu_mb = static_cast<int64_t>(j.pn_min_memory & ~MEM_PER_CPU);
      jobs.push_back(std::move(info));
    }
    slurm_free_job_info_msg(msg);
    return jobs;
  }

  Status CancelJob(int64_t job_id, int signal) override {
    if (releases::KillJob(static_cast<uint32_t>(job_id), static_cast<uint16_t>(signal)) !=
        SLURM_SUCCESS) {
      int err = releases::LastError();
      // Already gone is what we wanted.
      if (err == ESLURM_ALREADY_DONE || err == ESLURM_INVALID_JOB_ID) return Status::Ok();
      return Unavailable(SlurmError("cancelling job " + std::to_string(job_id)));
    }
    return Status::Ok();
  }

  Status SignalStep(int64_t job_id, int step_id, int signal) override {
    if (releases::KillStep(static_cast<uint32_t>(job_id), static_cast<uint32_t>(step_id),
                           static_cast<uint16_t>(signal)) != SLURM_SUCCESS) {
      int err = releases::LastError();
      if (err == ESLURM_ALREADY_DONE || err == ESLURM_INVALID_JOB_ID) return Status::Ok();
      return Unavailable(
          SlurmError("signalling step " + std::to_string(job_id) + "." + std::to_string(step_id)));
    }
    return Status::Ok();
  }

  Status ShrinkJob(int64_t job_id, const std::string& keep) override {
    // slurmctld's _update_job (src/slurmctld/job_mgr.c): req_nodes on a
    // running job is its new node list; the nodes left out get
    // abort_job_on_nodes and kill_step_on_node, then excise_node_from_job.
    job_desc_msg_t desc;
    slurm_init_job_desc_msg(&desc);
    releases::SetDescJobId(desc, static_cast<uint32_t>(job_id));
    std::string nodes = keep;
    desc.req_nodes = nodes.data();
    if (slurm_update_job(&desc) != SLURM_SUCCESS) {
      int err = releases::LastError();
      if (err == ESLURM_ALREADY_DONE || err == ESLURM_INVALID_JOB_ID) return Status::Ok();
      return Unavailable(
          SlurmError("shrinking job " + std::to_string(job_id) + " to nodes " + keep));
    }
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<SlurmClient> NewLibslurmClient() { return std::make_unique<LibslurmClient>(); }

std::vector<std::string> ExpandHostlist(const std::string& hostlist) {
  return releases::ExpandHostlist(hostlist);
}

std::string LibslurmRelease() { return releases::BuiltWith(); }

StatusOr<std::string> LoadControllerRelease() {
  std::call_once(g_init_once, [] { slurm_init(nullptr); });
  slurm_conf_t* conf = nullptr;
  if (slurm_load_ctl_conf(0, &conf) != SLURM_SUCCESS)
    return Unavailable(SlurmError("asking slurmctld for its configuration"));
  std::string version = conf->version ? conf->version : "";
  releases::FreeConf(conf);
  return version;
}

StatusOr<bool> JobsArePrivate() {
  std::call_once(g_init_once, [] { slurm_init(nullptr); });
  slurm_conf_t* conf = nullptr;
  if (slurm_load_ctl_conf(0, &conf) != SLURM_SUCCESS)
    return Unavailable(SlurmError("asking slurmctld for its configuration"));
  const bool hidden = (conf->private_data & PRIVATE_DATA_JOBS) != 0;
  releases::FreeConf(conf);
  return hidden;
}

}  // namespace tfslurm::slurm
