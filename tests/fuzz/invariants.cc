#include "tests/fuzz/invariants.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "base/unsafe_text.h"
#include "schema/tf_config_wire.h"
#include "service/agentrpc/convert.h"
#include "service/core/memory.h"
#include "service/core/model_dir.h"
#include "tests/fuzz/shell_words.h"
#include "tests/unit/job_plans.h"

namespace tfslurm::fuzz {
namespace {

using google::protobuf::util::MessageDifferencer;
using nlohmann::json;

const SpecLimits kTinyLimits{16, 4, 64, 3, 64};

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string Printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 200)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return s.size() > 200 ? out + "..." : out;
}

bool IsEnvName(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || c == '_') || c >= 0x80) return false;
  return true;
}

// Whether PATH ("a.b", "a[2]", "a.b[0].c") leads from NODE to a value the
// input has. A key may itself hold a dot or a bracket (an unknown key is
// reported as it was written), so each place the path could split is tried.
bool Walks(const json& node, std::string_view path) {
  if (path.empty()) return true;
  if (node.is_array() && path[0] == '[') {
    size_t close = path.find(']');
    std::string_view digits = path.substr(1, close == std::string_view::npos ? 0 : close - 1);
    if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0'))
      return false;
    for (char c : digits)
      if (c < '0' || c > '9') return false;
    size_t i = std::stoul(std::string(digits));
    std::string_view rest = path.substr(close + 1);
    if (!rest.empty() && rest[0] == '.') rest.remove_prefix(1);
    return i < node.size() && Walks(node[i], rest);
  }
  if (!node.is_object()) return false;
  for (size_t end = 1; end <= path.size(); ++end) {
    if (end < path.size() && path[end] != '.' && path[end] != '[') continue;
    auto it = node.find(std::string(path.substr(0, end)));
    if (it == node.end()) continue;
    std::string_view rest = path.substr(end);
    if (!rest.empty() && rest[0] == '.') rest.remove_prefix(1);
    if (Walks(*it, rest)) return true;
  }
  return false;
}

// A FieldError's path must name a field of the documented shape, or a value
// the input actually has (unknown fields are reported where they are), or a
// required field missing from an object the input has.
bool PathNamesInput(const json& in, const std::string& path, const std::string& reason) {
  static const std::set<std::string> kKnown = {"id",
                                               "command",
                                               "workdir",
                                               "env",
                                               "cluster",
                                               "cluster.chief",
                                               "cluster.ps",
                                               "cluster.worker",
                                               "cluster.evaluator",
                                               "placement",
                                               "resources",
                                               "resources.partition",
                                               "resources.nodes",
                                               "resources.tasks_per_node",
                                               "resources.cpus_per_task",
                                               "resources.gpus_per_node",
                                               "resources.mem_per_task_mb",
                                               "resources.time_limit",
                                               "network",
                                               "network.address",
                                               "success",
                                               "restart",
                                               "restart.max_restarts",
                                               "restart.on",
                                               "restart.backoff_s",
                                               "checkpoint",
                                               "checkpoint.signal_grace_s",
                                               "model_dir"};
  if (kKnown.count(path)) return true;
  if (in.contains(path)) return true;  // an unknown top-level key, dots and all
  if (Walks(in, path)) return true;
  // A required field the input lacks is named under a value the input has.
  size_t dot = path.rfind('.');
  return StartsWith(reason, "is required") && dot != std::string::npos &&
         Walks(in, std::string_view(path).substr(0, dot));
}

std::string CheckErrors(const json& in, const Status& status) {
  if (status.code() != StatusCode::kInvalidArgument)
    return "ParseSpec failed with a code other than InvalidArgument: " + status.message();
  if (status.fields().empty()) return "error without a field path: " + status.message();
  // At most kMaxSpecFieldErrors, then one "and N more errors".
  std::vector<FieldError> fields = status.fields();
  size_t more = 0;
  if (fields.size() > kMaxSpecFieldErrors) {
    const FieldError& last = fields.back();
    if (fields.size() == kMaxSpecFieldErrors + 1 && last.field.empty() &&
        StartsWith(last.reason, "and "))
      more = std::strtoull(last.reason.c_str() + 4, nullptr, 10);
    std::string want = "and " + std::to_string(more) + " more error" + (more == 1 ? "" : "s") +
                       " (only the first " + std::to_string(kMaxSpecFieldErrors) + " are listed)";
    if (more == 0 || last.reason != want)
      return std::to_string(fields.size()) + " field errors, the last '" + Printable(last.field) +
             ": " + Printable(last.reason) + "'";
    fields.pop_back();
  }
  for (const FieldError& f : fields) {
    if (f.reason.empty()) return "empty reason for field '" + Printable(f.field) + "'";
    // "" is the whole input, or an unknown key "" of it.
    if (f.field.empty() ? in.is_object() && !in.contains("")
                        : !PathNamesInput(in, f.field, f.reason))
      return "error path '" + Printable(f.field) + "' names no field of the input (" +
             Printable(f.reason) + ")";
  }
  if (in.is_object()) {
    size_t n = fields.size() + more;
    std::string want =
        "the experiment spec has " + std::to_string(n) + " invalid field" + (n == 1 ? "" : "s");
    if (status.message() != want)
      return "message '" + status.message() + "' but " + std::to_string(n) + " errors";
  }
  return "";
}

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

// The documented rules every accepted spec meets.
std::string CheckValidSpec(const ExperimentSpec& s, const SpecLimits& limits) {
  const ClusterShape& k = s.cluster;
  const Resources& r = s.resources;
  if (!s.id.empty() && !IsValidExperimentId(s.id)) return "accepted invalid id " + Printable(s.id);
  if (k.Total() != r.Tasks()) return "cluster total != nodes x tasks_per_node";
  if (k.chief + k.worker < 1) return "no chief and no worker";
  if (k.chief > 1 || k.evaluator > 1 || k.chief < 0 || k.ps < 0 || k.worker < 0 || k.evaluator < 0)
    return "role count out of range";
  if (k.Total() > limits.max_tasks) return "more tasks than max_tasks";
  if (r.nodes < 1 || r.tasks_per_node < 1 || r.cpus_per_task < 1 || r.gpus_per_node < 0)
    return "resource count out of range";
  if (r.mem_per_task_mb && *r.mem_per_task_mb < 1) return "mem_per_task_mb < 1";
  if (r.time_limit_minutes < 1 || r.time_limit_minutes > 365 * 24 * 60)
    return "time limit out of range";
  if (s.signal_grace_s < 0 || s.signal_grace_s >= r.time_limit_minutes * 60)
    return "signal grace not < time limit";
  if (s.command.empty() || s.command[0].empty()) return "empty command or program";
  if (static_cast<int>(s.command.size()) > limits.max_command_args) return "too many command args";
  size_t bytes = 0;
  for (const auto& a : s.command) {
    if (HasNul(a)) return "NUL in command";
    bytes += a.size();
  }
  if (bytes > limits.max_command_bytes) return "command too long";
  if (static_cast<int>(s.env.size()) > limits.max_env_entries) return "too many env entries";
  bytes = 0;
  for (const auto& [key, value] : s.env) {
    if (!IsEnvName(key)) return "accepted env name " + Printable(key);
    if (key == "TF_CONFIG" || key == "MODEL_DIR" || key == "EXPERIMENT_ID" ||
        key == "CUDA_VISIBLE_DEVICES" || StartsWith(key, "TFSLURM_") || StartsWith(key, "SLURM_"))
      return "accepted reserved env name " + key;
    if (HasNul(value)) return "NUL in env value";
    bytes += key.size() + value.size();
  }
  if (bytes > limits.max_env_bytes) return "env too large";
  for (const std::string* path : {&s.workdir, &s.model_dir}) {
    if (!path->empty() && ((*path)[0] != '/' || HasNul(*path)))
      return "accepted a relative path " + Printable(*path);
    // Others read these paths (tfctl, the dashboard): issue 31.
    if (!path->empty() && UnsafeCharacter(*path))
      return "accepted a path with " + *UnsafeCharacter(*path) + ": " + Printable(*path);
    if (!path->empty() && NormalizePath(*path) != *path)
      return "accepted a path that is not normalized: " + Printable(*path);
  }
  if (s.network_address != "hostname" && s.network_address != "fqdn" &&
      !StartsWith(s.network_address, "interface:"))
    return "accepted network address " + Printable(s.network_address);
  if (s.placement.kind == PlacementKind::kExplicit) {
    if (static_cast<int>(s.placement.roles.size()) != r.Tasks())
      return "explicit placement of the wrong size";
    std::map<std::string, int> counts;
    for (const auto& role : s.placement.roles) counts[role]++;
    if (counts["chief"] != k.chief || counts["ps"] != k.ps || counts["worker"] != k.worker ||
        counts["evaluator"] != k.evaluator)
      return "explicit placement does not match the cluster";
  }
  if (s.success == SuccessPolicy::kChief && k.chief == 0) return "success chief without a chief";
  if ((s.success == SuccessPolicy::kWorker0 || s.success == SuccessPolicy::kAllWorkers) &&
      k.worker == 0)
    return "success on workers without workers";
  return "";
}

std::string CheckParse(const json& in, const SpecLimits& limits) {
  auto r = ParseSpec(in, limits);
  if (!r.ok()) return CheckErrors(in, r.status());
  ExperimentSpec spec = std::move(r).value();
  if (std::string e = CheckValidSpec(spec, limits); !e.empty()) return e;
  // ToJson is the canonical form: it parses back to the same spec. An absent
  // id is generated by the caller before the spec is stored.
  if (spec.id.empty()) spec.id = "fuzz-id";
  json canonical = spec.ToJson();
  auto again = ParseSpec(canonical, limits);
  if (!again.ok())
    return "ToJson() of an accepted spec is refused: " +
           (again.status().fields().empty()
                ? again.status().message()
                : again.status().fields()[0].field + ": " + again.status().fields()[0].reason);
  if (again->ToJson() != canonical)
    return "ToJson() does not round-trip: " + Printable(canonical.dump());
  return "";
}

json ParseJson(std::string_view bytes) {
  return json::parse(bytes.begin(), bytes.end(), nullptr, false);
}

}  // namespace

std::string CheckSpecInput(std::string_view bytes) {
  json in = ParseJson(bytes);
  if (in.is_discarded()) return "";
  if (std::string e = CheckParse(in, SpecLimits{}); !e.empty()) return "default limits: " + e;
  if (std::string e = CheckParse(in, kTinyLimits); !e.empty()) return "tiny limits: " + e;
  // Limits only ever take away: what the tiny ones accept, the defaults do.
  if (ParseSpec(in, kTinyLimits).ok() && !ParseSpec(in).ok()) return "accepted by tiny limits only";
  return "";
}

std::string CheckShellQuote(std::string_view bytes) {
  std::string s(bytes);
  std::string error;
  auto commands = SplitShellCommands(ShellQuote(s) + "\n", &error);
  if (!commands) return "ShellQuote output is not a plain word: " + error;
  if (s.empty() && commands->size() == 1 && commands->at(0) == std::vector<std::string>{""})
    return "";
  if (commands->size() != 1 || commands->at(0).size() != 1)
    return "ShellQuote output is not one word";
  if (commands->at(0)[0] != s) return "ShellQuote does not round-trip " + Printable(s);
  return "";
}

SubmitRequest RenderForCheck(const ExperimentSpec& spec, unsigned variant,
                             std::vector<std::string>* argv) {
  // The launch is the operator's, not the user's, but quoting must hold for
  // any bytes, so some are hostile too.
  static const AgentLaunch kLaunches[] = {
      {"/opt/tfslurm/bin/tfslurm-agent", "login1.cluster:8081"},
      {"/opt/it's here/$(touch pwned)/tfslurm-agent", "[::1]:8081"},
      {"/a b\n\tc`x`;|&>\"\\", "h'; rm -rf / #:1"},
  };
  const AgentLaunch& launch = kLaunches[variant % 3];
  int attempt = 1 + static_cast<int>(variant % 7);

  PartitionShape partition;
  partition.name = spec.resources.partition.empty() ? "debug" : spec.resources.partition;
  if (variant % 2) partition.def_mem_per_cpu_mb = 1000;
  for (int i = 0; i < 4; ++i)
    partition.nodes.push_back({"node" + std::to_string(i), 64 << i, 64000LL << i});
  auto memory = ComputeMemPerTask(partition, spec.resources);
  MemoryPlan plan = memory.ok() ? *memory : MemoryPlan{1000, 1000, "fixed by the fuzzer"};

  AttemptPaths paths{"/srv/tfslurm-out/" + spec.id + "/logs/attempt-" + std::to_string(attempt)};
  *argv = {"exec",
           "srun",
           "--kill-on-bad-exit=0",
           "--output=" + paths.log_dir + "/task-%t.out",
           launch.agent_path,
           "--service",
           launch.service_address,
           "--experiment",
           spec.id,
           "--attempt",
           std::to_string(attempt),
           "--address",
           spec.network_address};
  return BuildSubmitRequest(spec, testing::PlanOf(spec, plan),
                            {attempt, paths, "s3cr3t-NOT-IN-THE-SCRIPT", {}}, launch,
                            {"PATH=/usr/bin"});
}

std::string CheckSbatchInput(std::string_view bytes) {
  if (std::string e = CheckShellQuote(bytes); !e.empty()) return e;
  json in = ParseJson(bytes);
  if (in.is_discarded()) return "";
  auto parsed = ParseSpec(in);
  if (!parsed.ok()) return "";
  ExperimentSpec spec = std::move(parsed).value();
  if (spec.id.empty()) spec.id = "fuzz-id";
  std::vector<std::string> argv;
  SubmitRequest r = RenderForCheck(spec, static_cast<unsigned>(bytes.size()), &argv);
  const std::string& script = r.script;

  if (script.find("s3cr3t") != std::string::npos) return "the secret is in the script";
  if (r.environment.empty() ||
      r.environment.back() != "TFSLURM_SECRET_FILE=s3cr3t-NOT-IN-THE-SCRIPT")
    return "the secret's file is not in the job's environment";
  if (script.find('\0') != std::string::npos) return "NUL byte in the script";

  // The header: comments up to the first blank line.
  size_t blank = script.find("\n\n");
  if (blank == std::string::npos) return "no blank line after the header";
  std::string_view header(script.data(), blank + 1);
  if (!StartsWith(header, "#!/bin/bash\n")) return "no #!/bin/bash line";
  std::set<std::string> directives;
  size_t start = 0;
  while (start < header.size()) {
    size_t end = header.find('\n', start);
    std::string_view line = header.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line[0] != '#') return "header line is not a comment: " + Printable(line);
    for (unsigned char c : line)
      if (c < 0x20 || c > 0x7e) return "control or non-ASCII byte in a comment: " + Printable(line);
    if (StartsWith(line, "#SBATCH ")) {
      std::string_view d = line.substr(8);
      if (!StartsWith(d, "--")) return "bad #SBATCH line: " + Printable(line);
      size_t eq = d.find('=');
      std::string name(d.substr(2, eq == std::string_view::npos ? std::string_view::npos : eq - 2));
      for (char c : name)
        if (!(c >= 'a' && c <= 'z') && c != '-') return "bad #SBATCH option: " + Printable(line);
      if (eq != std::string_view::npos)
        for (unsigned char c : d.substr(eq + 1))
          if (!IsSafeBareByte(c)) return "unsafe byte in an #SBATCH value: " + Printable(line);
      if (!directives.insert(name).second) return "#SBATCH --" + name + " twice";
    }
    // What the comments say about the command is JSON that reads back exactly.
    for (auto [label, value] : {std::pair<std::string, json>{"#   command: ", spec.command},
                                {"#   workdir: ", spec.workdir},
                                {"#   env: ", spec.env}}) {
      if (StartsWith(line, label)) {
        json shown = ParseJson(line.substr(label.size()));
        if (shown != value) return "comment " + label + "does not read back: " + Printable(line);
      }
    }
  }
  for (const char* d : {"job-name", "nodes", "ntasks-per-node", "cpus-per-task", "mem-per-cpu",
                        "time", "no-requeue", "chdir", "output"})
    if (!directives.count(d)) return std::string("no #SBATCH --") + d;
  if (header.find("#SBATCH --job-name=" + r.job_name + "\n") == std::string_view::npos)
    return "job name differs";

  // The body: the step's launch time for the agents, a constant line with
  // nothing of the spec in it, then exactly the srun command, every variable
  // part quoted.
  std::string_view body = std::string_view(script).substr(blank + 2);
  constexpr std::string_view kLaunchStamp =
      "export TFSLURM_STEP_LAUNCHED_AT_MS=\"$(date +%s%3N)\"\n";
  if (!StartsWith(body, kLaunchStamp)) return "no launch time line before srun";
  body.remove_prefix(kLaunchStamp.size());
  std::string error;
  auto commands = SplitShellCommands(body, &error);
  if (!commands) return "script body outside the safe shell subset: " + error;
  if (commands->size() != 1)
    return "script body has " + std::to_string(commands->size()) + " commands";
  if (commands->at(0) != argv) {
    std::string got;
    for (const auto& w : commands->at(0)) got += "[" + Printable(w) + "] ";
    return "srun argv differs from the expected one: " + got;
  }
  return "";
}

namespace {

std::string CheckSameMessage(const google::protobuf::Message& a, const google::protobuf::Message& b,
                             const char* what) {
  std::string diff;
  MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  if (!d.Compare(a, b)) return std::string(what) + " changes the message: " + Printable(diff);
  return "";
}

template <typename M>
std::string CheckBinaryRoundTrip(const M& m, const char* what) {
  std::string bin;
  if (!m.SerializeToString(&bin)) return std::string(what) + ": does not serialize";
  M back;
  if (!back.ParseFromString(bin)) return std::string(what) + ": its serialization does not parse";
  return CheckSameMessage(m, back, what);
}

// The replies core sends, built from the strings an agent sent: they reach
// the agent intact.
std::string CheckReplies(const TaskRef& ref, const RegisterInfo& info,
                         const agent::v1::AgentMessage& m) {
  AssignmentMsg a;
  a.role = ref.experiment_id;
  a.index = ref.proc_id.value();
  a.cluster =
      std::make_shared<SharedCluster>(SharedCluster{ref.secret, wire::CompressCluster(ref.secret)});
  a.command = {info.node_name, info.address};
  a.workdir = info.address;
  a.env[info.node_name] = info.address;
  a.model_dir = m.progress().checkpoint_path();
  a.heartbeat_interval_ms = ref.attempt;
  a.shutdown_grace_ms = info.port;
  a.report_checkpoints = info.reconnect;
  agent::v1::ServiceMessage p = agentrpc::ToProto(a);
  const auto& pa = p.assignment();
  if (p.body_case() != agent::v1::ServiceMessage::kAssignment || pa.role() != a.role ||
      pa.index() != a.index ||
      pa.tf_config() != wire::TfConfigForTask(a.cluster->json, a.role, a.index) ||
      pa.command_size() != 2 || pa.command(0) != a.command[0] || pa.command(1) != a.command[1] ||
      pa.workdir() != a.workdir || pa.env().size() != 1 ||
      pa.env().at(info.node_name) != info.address || pa.model_dir() != a.model_dir ||
      pa.heartbeat_interval_ms() != a.heartbeat_interval_ms ||
      pa.shutdown_grace_ms() != a.shutdown_grace_ms ||
      pa.report_checkpoints() != a.report_checkpoints)
    return "ToProto(Assignment) loses a field";
  if (std::string e = CheckBinaryRoundTrip(p, "Assignment"); !e.empty()) return e;
  // The gRPC stream's form: the cluster object compressed, TF_CONFIG empty.
  p = agentrpc::ToProto(a, agentrpc::TfConfigEncoding::kCompressedCluster);
  if (!p.assignment().tf_config().empty() ||
      wire::InflateCluster(p.assignment().cluster_zlib()) != a.cluster->json)
    return "ToProto(Assignment, compressed) does not carry the cluster object";

  p = agentrpc::ToProto(ShutdownMsg{m.progress().checkpoint_path(), m.exited().exit_code()});
  if (p.body_case() != agent::v1::ServiceMessage::kShutdown ||
      p.shutdown().reason() != m.progress().checkpoint_path() ||
      p.shutdown().grace_ms() != m.exited().exit_code())
    return "ToProto(Shutdown) loses a field";
  if (std::string e = CheckBinaryRoundTrip(p, "Shutdown"); !e.empty()) return e;

  p = agentrpc::ToProto(RefusedMsg{ref.secret, m.exited().reaped()});
  if (p.body_case() != agent::v1::ServiceMessage::kRefused || p.refused().reason() != ref.secret ||
      p.refused().permanent() != m.exited().reaped())
    return "ToProto(Refused) loses a field";
  return CheckBinaryRoundTrip(p, "Refused");
}

std::string CheckDecoded(const agent::v1::AgentMessage& m) {
  TaskRef ref = agentrpc::FromProto(m.task());
  if (ref.experiment_id != m.task().experiment_id() || ref.attempt != m.task().attempt() ||
      ref.secret != m.task().secret() || ref.proc_id.value() != m.task().proc_id())
    return "FromProto(TaskRef) loses a field";
  RegisterInfo info = agentrpc::FromProto(m.register_());
  const auto& r = m.register_();
  if (info.slurm_job_id != r.slurm_job_id() || info.node_id != r.node_id() ||
      info.local_id != r.local_id() || info.node_name != r.node_name() ||
      info.address != r.address() || info.port != r.port() || info.reconnect != r.reconnect())
    return "FromProto(Register) loses a field";

  // The JSON mapping: what the service decodes, it can encode, and back.
  agent::v1::AgentMessage known = m;
  known.DiscardUnknownFields();  // JSON has no unknown fields
  std::string text;
  if (auto s = google::protobuf::util::MessageToJsonString(known, &text); !s.ok())
    return "decoded message does not print as JSON: " + std::string(s.message());
  agent::v1::AgentMessage back;
  if (auto s = google::protobuf::util::JsonStringToMessage(text, &back); !s.ok())
    return "printed JSON does not parse: " + std::string(s.message()) + ": " + Printable(text);
  if (std::string e = CheckSameMessage(known, back, "a JSON round trip"); !e.empty()) return e;
  if (std::string e = CheckBinaryRoundTrip(m, "a binary round trip"); !e.empty()) return e;
  return CheckReplies(ref, info, m);
}

}  // namespace

std::string CheckAgentJsonInput(std::string_view bytes) {
  agent::v1::AgentMessage m;
  google::protobuf::util::JsonParseOptions opts;  // as http_agent.cc
  if (!google::protobuf::util::JsonStringToMessage(std::string(bytes), &m, opts).ok()) return "";
  return CheckDecoded(m);
}

std::string CheckAgentBinaryInput(std::string_view bytes) {
  agent::v1::AgentMessage m;
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return "";
  return CheckDecoded(m);
}

}  // namespace tfslurm::fuzz
