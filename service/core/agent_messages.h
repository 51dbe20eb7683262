// The agent protocol as core/ sees it: plain structs, so core never includes
// protobuf or gRPC. agentrpc/ converts from and to schema/agent.proto.
//
// Thread safety: plain values; RefusalFor is a pure function. Core calls
// TaskChannel::Send from any thread, under its lock: implementations are
// thread-safe, and Send must not block or call back into core.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "service/core/container_mount.h"
#include "service/core/task_identity.h"

namespace tfslurm {

struct TaskRef {
  std::string experiment_id;
  int attempt = 0;
  std::string secret;
  ProcId proc_id;  // the agent's SLURM_PROCID, not the task's index
  // The sender's Unix uid as munged vouched for it (site mode: a gRPC
  // stream's Register, or each JSON message, carries a MUNGE credential the
  // transport decoded); nullopt when nothing proved it.
  std::optional<uint32_t> proven_uid;
};

struct RegisterInfo {
  int64_t slurm_job_id = 0;
  int node_id = 0;
  int local_id = 0;
  std::string node_name;
  std::string address;
  int port = 0;
  bool reconnect = false;
  // The task's program has ended and its agent waits in the job for the
  // next attempt (schema/agent.proto, Register.standby).
  bool standby = false;
  // From the step's launch to the agent's start (Register.
  // started_after_launch_ms): in an agent's registrations until its first
  // Assignment; nullopt otherwise or from a job script without the time.
  std::optional<int64_t> started_after_launch_ms;
};

// What an agent reports is bounded where core takes it: a checkpoint path
// longer than a path can be (PATH_MAX) is not kept.
inline constexpr size_t kMaxCheckpointPathBytes = 4096;
// A node name and an address are at most a host name's 255 bytes, of the
// characters host names and IP addresses have.
inline constexpr size_t kMaxHostBytes = 255;

// Why a registration's node name, address or port cannot be taken, or ""
// when they can. They reach events, the job's --exclude (a node named in a
// failure) and every task's TF_CONFIG, so only host-name characters pass:
// node name [A-Za-z0-9._-], address [A-Za-z0-9._:%-] (an IPv6 address and
// its zone), port 0 to 65535; each may be empty (not known).
inline std::string RegisterInfoProblem(const RegisterInfo& info) {
  auto bad = [](const std::string& text, const char* extra) {
    if (text.size() > kMaxHostBytes) return true;
    for (char ch : text) {
      const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-' ||
                      (ch != '\0' && std::string_view(extra).find(ch) != std::string_view::npos);
      if (!ok) return true;
    }
    return false;
  };
  if (bad(info.node_name, ""))
    return "the node name must be at most 255 bytes of A-Z a-z 0-9 . _ - (" +
           std::to_string(info.node_name.size()) + " bytes given)";
  if (bad(info.address, ":%"))
    return "the address must be at most 255 bytes of A-Z a-z 0-9 . _ - : % (" +
           std::to_string(info.address.size()) + " bytes given)";
  if (info.port < 0 || info.port > 65535)
    return "the port must be from 0 to 65535, got " + std::to_string(info.port);
  return "";
}

// How a task's program ended, as its agent reports it (Exited).
struct ExitReport {
  std::optional<int> exit_code;  // when it exited normally
  std::optional<int> signal;     // when a signal ended it
  bool reaped = false;           // it ended because of a Shutdown
  std::string detail;            // why, in the agent's words; may be empty
  // The agent judged the failure one that repeats at every start: the
  // program could not be executed, or Python could not open the script,
  // import a module or parse a file (Exited.at_startup).
  bool at_startup = false;
};

// Store writes of exit reports a carrier lets core hold (Agents::OnExited):
// a node stream hands core a NodeUp's frames, several agents' reports, and
// acknowledges none of them before the last is handled. What they change
// then goes to the store in one transaction (WriteHeld) rather than one per
// report: at 4,096 ranks a failure's Shutdowns bring 4,095 exit reports at
// once, and each transaction writes its pages to SQLite's WAL anew.
struct HeldWrites {
  bool pending = false;  // set by core: something waits for WriteHeld
};

// An attempt's TF_CONFIG cluster object, built once after the barrier and
// shared by every assignment of the attempt (schema/tf_config_wire.h).
struct SharedCluster {
  std::string json;
  std::string zlib;  // `json` compressed, for the gRPC stream; empty if that failed
  // Names `zlib` on the stream (agent.proto, Assignment.cluster_digest): the
  // first 16 hex digits of its SHA-256; empty with `zlib`.
  std::string digest;
};

// How the agent runs the program in a container (docs/containers.md).
// Empty runtime: no container. "pyxis" and "oci": the agent itself runs in
// the container already and starts the program as always. "enroot" and
// "apptainer": the agent stays on the host and starts the program through
// the runtime, importing the image once per node (agent/container_command.h).
struct ContainerLaunchMsg {
  std::string runtime;  // "" | pyxis | enroot | oci | apptainer
  std::string image;
  std::vector<ContainerMount> mounts;
  bool gpus = false;  // the task has GPUs: the runtime's GPU path (enroot's hook, --nv)
};

struct AssignmentMsg {
  std::string role;
  int index = 0;
  std::string framework;  // FrameworkName: "tensorflow" | "pytorch" | "jax"
  // TF_CONFIG's cluster object; null for PyTorch and JAX, which have none.
  std::shared_ptr<const SharedCluster> cluster;
  std::vector<std::string> command;
  std::string workdir;
  std::map<std::string, std::string> env;
  std::string model_dir;
  int heartbeat_interval_ms = 0;
  int shutdown_grace_ms = 0;
  bool report_checkpoints = false;
  // restart.in_allocation: the agent stays in the job when its program ends.
  bool stay_for_next_attempt = false;
  ContainerLaunchMsg container;
};

struct ShutdownMsg {
  std::string reason;
  int grace_ms = 0;
};

struct RefusedMsg {
  std::string reason;
  bool permanent = true;
  // This service has no such experiment: the agent may have reached another
  // tfslurmd than its own, and retries for a while (schema/agent.proto).
  bool unknown_experiment = false;
};

// The refusal of a message the service could not accept: Unavailable (the
// submission is still being recorded) is worth a retry, everything else is
// final, and NotFound says the experiment is unknown here.
inline RefusedMsg RefusalFor(const Status& status) {
  return {status.message(), status.code() != StatusCode::kUnavailable,
          status.code() == StatusCode::kNotFound};
}

// A restart in place: the agent moves to attempt `attempt` of its job.
struct NextAttemptMsg {
  int attempt = 0;
  std::string reason;
  std::string log_dir;  // where the task's output goes from now on
};

// No further attempt in this job for the agent: it exits.
struct ReleaseMsg {
  std::string reason;
};

// The agent's node is a spare (node_slots.h): it runs no program and waits
// in the job (Register.standby) for a NextAttempt or a Release.
struct SpareMsg {
  std::string reason;
};

using ServiceMsg =
    std::variant<AssignmentMsg, ShutdownMsg, RefusedMsg, NextAttemptMsg, ReleaseMsg, SpareMsg>;

// Where core sends messages for one connected task: a gRPC stream or a
// waiting HTTP request. Send must not block (implementations queue).
class TaskChannel {
 public:
  virtual ~TaskChannel() = default;
  virtual void Send(const ServiceMsg& message) = 0;
};

}  // namespace tfslurm
