#include "service/core/spec.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include "service/core/spec_checker.h"

namespace tfslurm {
namespace {

using nlohmann::json;
using namespace spec_internal;  // NOLINT: the checker is this file's own, split for size

// The fields of the spec's objects: each object's parser refuses any other,
// and one of them at the top level is said to belong to its object.
const std::initializer_list<const char*> kClusterFields = {"chief", "ps", "worker", "evaluator"};
const std::initializer_list<const char*> kResourcesFields = {
    "partition",     "nodes",         "tasks_per_node",  "cpus_per_task",
    "gpus_per_node", "gpus_per_task", "mem_per_task_mb", "time_limit",
    "constraint",    "nodelist",      "exclusive",       "account",
    "qos",           "reservation",   "exclude",         "spare_nodes"};
const std::initializer_list<const char*> kRestartFields = {"max_restarts", "on", "backoff_s",
                                                           "in_allocation", "max_task_restarts"};
const std::initializer_list<const char*> kCheckpointFields = {"signal_grace_s"};
const std::initializer_list<const char*> kProgressFields = {"stall_timeout_s"};
const std::pair<const char*, const std::initializer_list<const char*>*> kObjectFields[] = {
    {"resources", &kResourcesFields},
    {"restart", &kRestartFields},
    {"cluster", &kClusterFields},
    {"checkpoint", &kCheckpointFields},
    {"progress", &kProgressFields}};

// The object of the spec that `key` is a field of, or "".
std::string ObjectOwning(const std::string& key) {
  for (const auto& [object, fields] : kObjectFields)
    for (const char* f : *fields)
      if (key == f) return object;
  return "";
}

// "at most N allowed (the site's cap, tfslurmd --max-tasks-per-experiment)".
std::string AtMostTasks(const SpecLimits& limits) {
  return "at most " + std::to_string(limits.max_tasks) + " allowed (the site's cap on tasks, " +
         kMaxTasksSetting + ")";
}

void ParseCluster(Checker& c, const json& v, const SpecLimits& limits, ClusterShape& out) {
  if (!c.IsObject(v, "cluster")) return;
  c.OnlyKeys(v, "cluster", kClusterFields);
  auto field = [&](const char* name, int max, int& target) {
    if (!v.contains(name)) return;
    const std::string path = std::string("cluster.") + name;
    // Past the site's cap: the cap and where it is set, not a bare range.
    if (max == limits.max_tasks && v[name].is_number_integer() && v[name].get<int64_t>() > max)
      return c.Fail(path, "is " + v[name].dump() + "; " + AtMostTasks(limits));
    if (auto n = c.Int(v[name], path, 0, max)) target = static_cast<int>(*n);
  };
  out = ClusterShape{};
  field("chief", 1, out.chief);
  field("ps", limits.max_tasks, out.ps);
  field("worker", limits.max_tasks, out.worker);
  field("evaluator", 1, out.evaluator);
}

// Account, QOS and reservation names. Slurm itself checks little (sacctmgr
// splits its arguments at ',' and slurmctld lowercases the job's account:
// xstrtolower in _validate_job_desc, src/slurmctld/job_mgr.c,
// slurm-22-05-8-1); the accounting database keeps them in tinytext columns
// (255 bytes). Letters, digits and _ . - + @ cover the names sites use and
// keep the rendered #SBATCH line one plain word: no space, quote, '$',
// '#', ',' or control character.
const std::regex kSlurmNamePattern("[A-Za-z0-9_.@+-]{1,255}");

// A string field naming one Slurm `what` (account, QOS), or with `list`
// several joined by ',' (--reservation takes a list, tried in order:
// sbatch(1) of slurm-22-05-8-1).
std::optional<std::string> SlurmName(Checker& c, const json& v, const std::string& path,
                                     const std::string& what, bool list = false) {
  auto s = c.String(v, path, 1024);
  if (!s) return std::nullopt;
  const std::string allowed = "letters, digits and _ . - + @, 1 to 255 characters, no spaces" +
                              std::string(list ? "; several joined by ','" : " or commas");
  if (s->empty()) {
    c.Fail(path, "must be a Slurm " + what + " name (" + allowed +
                     "), got an empty string; leave the field out for Slurm's default");
    return std::nullopt;
  }
  bool ok = true;
  size_t start = 0;
  while (ok) {
    size_t comma = list ? s->find(',', start) : std::string::npos;
    ok = std::regex_match(s->substr(start, comma - start), kSlurmNamePattern);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (!ok) {
    c.Fail(path, "must be a Slurm " + what + " name (" + allowed + "), got " + Show(v));
    return std::nullopt;
  }
  return s;
}

void ParseResources(Checker& c, const json& v, Resources& out) {
  if (!c.IsObject(v, "resources")) return;
  c.OnlyKeys(v, "resources", kResourcesFields);
  ParseNodeShape(c, v, "resources", out);
  if (v.contains("spare_nodes"))
    if (auto n = c.Int(v["spare_nodes"], "resources.spare_nodes", 0, 64))
      out.spare_nodes = static_cast<int>(*n);
  if (v.contains("account"))
    if (auto s = SlurmName(c, v["account"], "resources.account", "account")) out.account = *s;
  if (v.contains("qos"))
    if (auto s = SlurmName(c, v["qos"], "resources.qos", "QOS")) out.qos = *s;
  if (v.contains("reservation"))
    if (auto s = SlurmName(c, v["reservation"], "resources.reservation", "reservation", true))
      out.reservation = *s;
  if (v.contains("exclude")) NodeList(c, v["exclude"], "resources.exclude", out.exclude);
  if (v.contains("time_limit")) {
    auto s = c.String(v["time_limit"], "resources.time_limit", 32);
    std::optional<int> minutes = s ? ParseSlurmTimeMinutes(*s) : std::nullopt;
    if (s && (!minutes || *minutes < 1)) {
      std::string upper = *s;
      for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      // Slurm's sbatch takes these; a job without an end gets no checkpoint
      // signal before it, so tfslurm does not.
      const bool unlimited = upper == "UNLIMITED" || upper == "INFINITE" || upper == "-1";
      c.Fail("resources.time_limit",
             "must be a Slurm time from 1 minute to " + FormatSlurmTime(kMaxTimeLimitMinutes) +
                 " (the most Slurm reads: it counts a time limit's seconds in a 32-bit int, "
                 "time_str2secs in src/common/parse_time.c): MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM "
                 "or D-HH:MM:SS, got " +
                 Show(v["time_limit"]) +
                 (unlimited ? "; an unlimited job would get no checkpoint signal before its end, "
                              "so tfslurm needs a limit"
                            : ""));
    } else if (minutes) {
      out.time_limit_minutes = *minutes;
    }
  }
}

void ParseRestart(Checker& c, const json& v, const ExperimentSpec& spec, RestartPolicy& out) {
  if (!c.IsObject(v, "restart")) return;
  c.OnlyKeys(v, "restart", kRestartFields);
  if (v.contains("max_task_restarts")) {
    if (spec.framework != Framework::kTensorflow || spec.cluster.ps < 1)
      c.Fail("restart.max_task_restarts",
             "applies only to framework tensorflow with parameter servers (cluster.ps of 1 or "
             "more), whose chief trains on while a worker restarts; this spec has " +
                 (spec.framework == Framework::kTensorflow
                      ? std::string("no ps: every worker takes part in each step")
                      : "framework " + std::string(FrameworkName(spec.framework)) +
                            ": a rank cannot rejoin its peers alone") +
                 "; remove it");
    else if (auto n = c.Int(v["max_task_restarts"], "restart.max_task_restarts", 0, 100))
      out.max_task_restarts = static_cast<int>(*n);
  }
  if (v.contains("in_allocation")) {
    if (v["in_allocation"].is_boolean())
      out.in_allocation = v["in_allocation"].get<bool>();
    else
      c.Fail("restart.in_allocation",
             "must be true (restart inside the running Slurm job when it can) or false (every "
             "restart is a new Slurm job), got " +
                 TypeAndValue(v["in_allocation"]));
  }
  if (v.contains("max_restarts"))
    if (auto n = c.Int(v["max_restarts"], "restart.max_restarts", 0, 100))
      out.max_restarts = static_cast<int>(*n);
  if (v.contains("backoff_s"))
    if (auto n = c.Int(v["backoff_s"], "restart.backoff_s", 0, 3600))
      out.backoff_s = static_cast<int>(*n);
  if (v.contains("on")) {
    const json& on = v["on"];
    if (!on.is_array()) {
      c.Fail("restart.on",
             "must be an array of: preempted, timeout, node_fail, retryable_exit, stalled, "
             "startup_error");
      return;
    }
    out.on.clear();
    for (size_t i = 0; i < on.size(); ++i) {
      std::string path = "restart.on[" + std::to_string(i) + "]";
      auto s = c.OneOf(
          on[i], path,
          {"preempted", "timeout", "node_fail", "retryable_exit", "stalled", "startup_error"});
      if (s) out.on.insert(*ParseEndReason(*s));
    }
  }
}

void ParsePytorch(Checker& c, const json& v, PytorchOptions& out) {
  if (!c.IsObject(v, "pytorch")) return;
  c.OnlyKeys(v, "pytorch", {"omp_num_threads"});
  if (!v.contains("omp_num_threads")) return;
  const json& n = v["omp_num_threads"];
  if (n.is_string() && n.get<std::string>() == "auto") return;
  if (!n.is_number_integer() && !n.is_number_unsigned()) {
    c.Fail("pytorch.omp_num_threads",
           "must be \"auto\" (resources.cpus_per_task) or a whole number from 1 to 1024, got " +
               Show(n));
    return;
  }
  if (auto threads = c.Int(n, "pytorch.omp_num_threads", 1, 1024))
    out.omp_num_threads = static_cast<int>(*threads);
}

// Roles of an explicit placement must be exactly the cluster's roles.
void CheckExplicitPlacement(Checker& c, const ExperimentSpec& spec) {
  const auto& roles = spec.placement.roles;
  int total = spec.resources.Tasks();
  if (static_cast<int>(roles.size()) != total) {
    c.Fail("placement", "lists " + std::to_string(roles.size()) + " roles but the job has " +
                            std::to_string(total) + " tasks (resources.nodes " +
                            std::to_string(spec.resources.nodes) + " x tasks_per_node " +
                            std::to_string(spec.resources.tasks_per_node) +
                            "); give one role per task");
    return;
  }
  std::map<std::string, int> counts;
  for (const auto& r : roles) counts[r]++;
  const std::pair<const char*, int> expected[] = {{"chief", spec.cluster.chief},
                                                  {"ps", spec.cluster.ps},
                                                  {"worker", spec.cluster.worker},
                                                  {"evaluator", spec.cluster.evaluator}};
  for (const auto& [role, want] : expected) {
    if (counts[role] != want)
      c.Fail("placement", std::string("has ") + std::to_string(counts[role]) + " x " + role +
                              " but cluster." + role + " is " + std::to_string(want));
  }
}

}  // namespace

namespace {

// The framework, and the fields that belong to another one: refused, not
// ignored, since a user who wrote them expects them to do something.
void ParseFramework(Checker& c, const json& input, ExperimentSpec& spec) {
  if (input.contains("framework"))
    if (auto framework = c.OneOf(input["framework"], "framework", kFrameworkNames))
      spec.framework = *framework;
  const std::string name = FrameworkName(spec.framework);
  if (HasRanks(spec.framework)) {
    const std::string rank = spec.framework == Framework::kJax ? "process" : "rank";
    for (const char* field : {"cluster", "placement", "success"})
      if (input.contains(field))
        c.Fail(field, "does not apply to framework " + name +
                          ": its world is every task of the allocation "
                          "(resources.nodes x tasks_per_node), one " +
                          rank + " each, and success is every " + rank +
                          " exiting 0; remove it, or use framework tensorflow");
    if (input.contains("roles"))
      c.Fail("roles", "does not apply to framework " + name + ": every " + rank +
                          " runs with resources, in one plain job; per-role resources (a "
                          "heterogeneous job) are for framework tensorflow");
  }
  if (spec.framework != Framework::kPytorch && input.contains("pytorch"))
    c.Fail("pytorch", "applies only to framework pytorch; this spec's framework is " + name);
}

void ParseId(Checker& c, const json& input, ExperimentSpec& spec) {
  if (!input.contains("id")) return;
  if (auto s = c.String(input["id"], "id", 256)) {
    if (IsValidExperimentId(*s))
      spec.id = *s;
    else
      c.Fail("id",
             "must match [a-z0-9][a-z0-9._-]{0,62} (lower case, digits, . _ -; at most 63), got " +
                 Show(input["id"]));
  }
}

void ParseCommand(Checker& c, const json& input, const SpecLimits& limits, ExperimentSpec& spec) {
  if (!input.contains("command")) {
    c.Fail("command",
           "is required: the program and its arguments, e.g. [\"python3\", \"train.py\"]");
    return;
  }
  const json& cmd = input["command"];
  if (!cmd.is_array() || cmd.empty()) {
    c.Fail("command", "must be a non-empty array of strings (argv), got " + Show(cmd));
    return;
  }
  if (static_cast<int>(cmd.size()) > limits.max_command_args)
    c.Fail("command", "has " + std::to_string(cmd.size()) + " arguments; at most " +
                          std::to_string(limits.max_command_args) + " allowed");
  size_t bytes = 0;
  for (size_t i = 0; i < cmd.size() && static_cast<int>(i) < limits.max_command_args; ++i) {
    std::string path = "command[" + std::to_string(i) + "]";
    if (auto s = c.String(cmd[i], path, limits.max_command_bytes)) {
      if (i == 0 && s->empty()) c.Fail(path, "the program name must not be empty");
      bytes += s->size();
      spec.command.push_back(*s);
    }
  }
  if (bytes > limits.max_command_bytes)
    c.Fail("command", "is " + std::to_string(bytes) + " bytes in all; at most " +
                          std::to_string(limits.max_command_bytes) + " allowed");
}

void ParseEnv(Checker& c, const json& input, const SpecLimits& limits, ExperimentSpec& spec) {
  if (!input.contains("env")) return;
  const json& env = input["env"];
  if (!c.IsObject(env, "env")) return;
  if (static_cast<int>(env.size()) > limits.max_env_entries)
    c.Fail("env", "has " + std::to_string(env.size()) + " entries; at most " +
                      std::to_string(limits.max_env_entries) + " allowed");
  const bool pytorch = spec.framework == Framework::kPytorch;
  const bool jax = spec.framework == Framework::kJax;
  size_t bytes = 0;
  for (const auto& [key, value] : env.items()) {
    std::string path = "env." + key;
    if (key.size() > 256 || !std::regex_match(key, kEnvNamePattern)) {
      c.Fail(path, "is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
      continue;
    }
    if (key == "TF_CONFIG" || key == "EXPERIMENT_ID" || key == "MODEL_DIR" ||
        key == "CUDA_VISIBLE_DEVICES" || key.rfind("TFSLURM_", 0) == 0 ||
        key.rfind("SLURM_", 0) == 0) {
      c.Fail(path, "is set by tfslurm for every task and cannot be overridden");
      continue;
    }
    if (pytorch && IsTorchVariable(key)) {
      c.Fail(path, key == "OMP_NUM_THREADS"
                       ? "is set by tfslurm for every rank; use pytorch.omp_num_threads"
                       : "is set by tfslurm for every rank of a pytorch experiment and "
                         "cannot be overridden");
      continue;
    }
    if (jax && IsJaxVariable(key)) {
      c.Fail(path,
             "is set by tfslurm for every process of a jax experiment and cannot be overridden");
      continue;
    }
    if (auto s = c.String(value, path, limits.max_env_bytes)) {
      bytes += key.size() + s->size();
      spec.env[key] = *s;
    }
  }
  if (bytes > limits.max_env_bytes)
    c.Fail("env", "is " + std::to_string(bytes) + " bytes in all; at most " +
                      std::to_string(limits.max_env_bytes) + " allowed");
}

// The job's shape: cluster, resources and roles (TensorFlow), the ranks and
// pytorch options (PyTorch, JAX), and how the tasks add up.
void ParseShape(Checker& c, const json& input, const SpecLimits& limits, ExperimentSpec& spec) {
  const bool pytorch = spec.framework == Framework::kPytorch;
  const bool ranks = HasRanks(spec.framework);
  bool cluster_given = input.contains("cluster") && !ranks;
  if (cluster_given)
    ParseCluster(c, input["cluster"], limits, spec.cluster);
  else if (!ranks)
    c.Fail("cluster", "is required, e.g. {\"ps\": 2, \"worker\": 4}");
  if (input.contains("resources")) ParseResources(c, input["resources"], spec.resources);
  if (cluster_given && input.contains("roles")) ParseRoles(c, input["roles"], spec);
  if (ranks && spec.resources.Tasks() > limits.max_tasks)
    c.Fail("resources", "give " + std::to_string(spec.resources.Tasks()) + " ranks (nodes " +
                            std::to_string(spec.resources.nodes) + " x tasks_per_node " +
                            std::to_string(spec.resources.tasks_per_node) + "); " +
                            AtMostTasks(limits));
  if (pytorch && input.contains("pytorch")) ParsePytorch(c, input["pytorch"], spec.pytorch);
  if (!cluster_given || !input["cluster"].is_object()) return;
  const ClusterShape& k = spec.cluster;
  if (k.chief + k.worker < 1) c.Fail("cluster", "needs at least one chief or worker to train");
  if (k.Total() > limits.max_tasks)
    c.Fail("cluster", "has " + std::to_string(k.Total()) + " tasks; " + AtMostTasks(limits));
  if (input.contains("roles"))
    CheckRoles(c, input, spec, limits);
  else if (k.Total() != spec.resources.Tasks())
    c.Fail("cluster", "has " + std::to_string(k.Total()) + " tasks (chief " +
                          std::to_string(k.chief) + " + ps " + std::to_string(k.ps) + " + worker " +
                          std::to_string(k.worker) + " + evaluator " + std::to_string(k.evaluator) +
                          ") but resources give " + std::to_string(spec.resources.Tasks()) +
                          " (nodes " + std::to_string(spec.resources.nodes) + " x tasks_per_node " +
                          std::to_string(spec.resources.tasks_per_node) +
                          "); every task needs exactly one role");
}

void ParsePlacement(Checker& c, const json& input, ExperimentSpec& spec) {
  if (!input.contains("placement") || HasRanks(spec.framework)) return;
  const json& p = input["placement"];
  if (p.is_array()) {
    spec.placement.kind = PlacementKind::kExplicit;
    bool ok = true;
    for (size_t i = 0; i < p.size(); ++i) {
      auto s = c.OneOf(p[i], "placement[" + std::to_string(i) + "]",
                       {"chief", "ps", "worker", "evaluator"});
      if (s)
        spec.placement.roles.push_back(*s);
      else
        ok = false;
    }
    if (ok && c.errors.empty() && spec.roles.empty()) CheckExplicitPlacement(c, spec);
  } else if (auto s = c.OneOf(p, "placement", {"spread", "pack"})) {
    spec.placement.kind = *s == "spread" ? PlacementKind::kSpread : PlacementKind::kPack;
  }
}

void ParseNetwork(Checker& c, const json& input, ExperimentSpec& spec) {
  if (!input.contains("network")) return;
  const json& n = input["network"];
  if (!c.IsObject(n, "network")) return;
  c.OnlyKeys(n, "network", {"address"});
  if (!n.contains("address")) return;
  auto s = c.String(n["address"], "network.address", 64);
  if (!s) return;
  bool iface = s->rfind("interface:", 0) == 0 && std::regex_match(s->substr(10), kInterfacePattern);
  if (*s == "hostname" || *s == "fqdn" || iface)
    spec.network_address = *s;
  else
    c.Fail(
        "network.address",
        "must be hostname | fqdn | interface:NAME (e.g. interface:ib0), got " + Show(n["address"]));
}

void ParseSuccess(Checker& c, const json& input, ExperimentSpec& spec) {
  if (!input.contains("success") || HasRanks(spec.framework)) return;
  auto success = c.OneOf(input["success"], "success", kSuccessPolicyNames);
  if (!success) return;
  spec.success = *success;
  if (spec.success == SuccessPolicy::kChief && spec.cluster.chief == 0)
    c.Fail("success", "is chief but cluster.chief is 0; add a chief or use auto");
  if ((spec.success == SuccessPolicy::kWorker0 || spec.success == SuccessPolicy::kAllWorkers) &&
      spec.cluster.worker == 0)
    c.Fail("success",
           std::string("is ") + SuccessPolicyName(*success) + " but cluster.worker is 0");
}

// checkpoint.signal_grace_s, which must leave the job time to run.
void ParseCheckpoint(Checker& c, const json& input, ExperimentSpec& spec) {
  if (input.contains("checkpoint")) {
    const json& cp = input["checkpoint"];
    if (c.IsObject(cp, "checkpoint")) {
      c.OnlyKeys(cp, "checkpoint", kCheckpointFields);
      if (cp.contains("signal_grace_s"))
        if (auto n = c.Int(cp["signal_grace_s"], "checkpoint.signal_grace_s", 0, 3600))
          spec.signal_grace_s = static_cast<int>(*n);
    }
  }
  // Slurm's warning signal must come before the end, or it never comes.
  const int64_t limit_s = int64_t{spec.resources.time_limit_minutes} * 60;
  if (spec.signal_grace_s >= limit_s) {
    const bool set = input.contains("checkpoint") && input["checkpoint"].is_object() &&
                     input["checkpoint"].contains("signal_grace_s");
    // Raised: the next whole minute past the grace, as Slurm counts minutes.
    const int raised = spec.signal_grace_s / 60 + 1;
    c.Fail("checkpoint.signal_grace_s",
           "is " + std::to_string(spec.signal_grace_s) + " s" + (set ? "" : " (the default)") +
               ", not shorter than resources.time_limit (" +
               FormatSlurmTime(spec.resources.time_limit_minutes) + ", " + std::to_string(limit_s) +
               " s): the checkpoint signal would come before the job starts; lower "
               "checkpoint.signal_grace_s below " +
               std::to_string(limit_s) + " (e.g. " + std::to_string(limit_s / 2) +
               "), or raise resources.time_limit to at least " + FormatSlurmTime(raised));
  }
}

void ParseProgress(Checker& c, const json& input, ExperimentSpec& spec) {
  if (!input.contains("progress")) return;
  const json& p = input["progress"];
  if (!c.IsObject(p, "progress")) return;
  c.OnlyKeys(p, "progress", kProgressFields);
  if (!p.contains("stall_timeout_s")) return;
  const json& t = p["stall_timeout_s"];
  bool integer = t.is_number_integer() || t.is_number_unsigned();
  if (integer && t.get<int64_t>() == 0)
    spec.stall_timeout_s = 0;
  else if (!integer || t.get<int64_t>() < 5 || t.get<int64_t>() > 7 * 24 * 3600)
    c.Fail("progress.stall_timeout_s",
           "must be 0 (off) or a whole number of seconds from 5 to 604800, got " + Show(t));
  else
    spec.stall_timeout_s = static_cast<int>(t.get<int64_t>());
}

// Every problem found, in one InvalidArgument.
Status Refusal(Checker& c) {
  size_t n = c.errors.size() + c.more;
  // Hostile input can have an error per byte; the answer stays small.
  if (c.more > 0)
    c.errors.push_back({"", "and " + std::to_string(c.more) + " more error" +
                                (c.more == 1 ? "" : "s") + " (only the first " +
                                std::to_string(kMaxSpecFieldErrors) + " are listed)"});
  return InvalidArgument(
      "the experiment spec has " + std::to_string(n) + " invalid field" + (n == 1 ? "" : "s"),
      std::move(c.errors));
}

// A spare stands in for a node in a restart inside the job, in a job of
// one node shape.
void CheckSpareNodes(Checker& c, const ExperimentSpec& spec) {
  const int k = spec.resources.spare_nodes;
  if (k == 0) return;
  if (!spec.roles.empty())
    c.Fail("resources.spare_nodes",
           "is " + std::to_string(k) +
               ", but the spec gives roles resources of their own (roles), which makes a "
               "heterogeneous job: a spare node of one component could not stand in for another's; "
               "leave spare_nodes out, or the roles block");
  if (!spec.restart.in_allocation)
    c.Fail("resources.spare_nodes",
           "is " + std::to_string(k) +
               ", but restart.in_allocation is false: a spare takes a failed node's place only in "
               "a restart inside the job; set in_allocation to true, or leave spare_nodes out");
}

}  // namespace

StatusOr<ExperimentSpec> ParseSpec(const json& input, const SpecLimits& limits) {
  if (!input.is_object()) {
    return InvalidArgument("the experiment spec must be a JSON object",
                           {{"", "must be an object, got " + TypeName(input)}});
  }
  Checker c;
  ExperimentSpec spec;
  c.OnlyKeys(input, "",
             {"id", "framework", "command", "workdir", "env", "cluster", "placement", "resources",
              "roles", "network", "success", "pytorch", "restart", "checkpoint", "progress",
              "model_dir", "container"},
             ObjectOwning);
  ParseFramework(c, input, spec);
  ParseId(c, input, spec);
  ParseCommand(c, input, limits, spec);
  if (input.contains("workdir"))
    if (auto s = c.AbsolutePath(input["workdir"], "workdir")) spec.workdir = *s;
  ParseEnv(c, input, limits, spec);
  ParseShape(c, input, limits, spec);
  ParsePlacement(c, input, spec);
  if (input.contains("container")) ParseContainer(c, input["container"], spec);
  ParseNetwork(c, input, spec);
  ParseSuccess(c, input, spec);
  if (input.contains("restart")) ParseRestart(c, input["restart"], spec, spec.restart);
  ParseCheckpoint(c, input, spec);
  ParseProgress(c, input, spec);
  CheckSpareNodes(c, spec);
  if (input.contains("model_dir")) {
    const json& m = input["model_dir"];
    if (!(m.is_string() && m.get<std::string>() == "auto"))
      if (auto s = c.AbsolutePath(m, "model_dir")) spec.model_dir = *s;
  }
  if (!c.errors.empty()) return Refusal(c);
  return spec;
}

}  // namespace tfslurm
