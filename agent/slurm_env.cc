#include "agent/slurm_env.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace tfslurm::agent {
namespace {

template <typename Int>
bool ParseNonNegative(std::string_view text, Int* out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end && *out >= 0;
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

StatusOr<TaskIdentity> ReadTaskIdentity(const EnvLookup& lookup, int64_t now_ms) {
  TaskIdentity identity;
  std::vector<std::string> missing;
  std::vector<std::string> malformed;

  auto read_number = [&](const char* name, auto* out) {
    std::optional<std::string> value = lookup(name);
    if (!value) {
      missing.push_back(name);
    } else if (!ParseNonNegative(*value, out)) {
      malformed.push_back(std::string(name) + "='" + *value + "'");
    }
  };
  read_number("SLURM_JOB_ID", &identity.slurm_job_id);
  read_number("SLURM_PROCID", &identity.proc_id);
  read_number("SLURM_NODEID", &identity.node_id);
  read_number("SLURM_LOCALID", &identity.local_id);
  if (std::optional<std::string> name = lookup("SLURMD_NODENAME"); name && !name->empty()) {
    identity.node_name = *name;
  } else {
    missing.push_back("SLURMD_NODENAME");
  }
  // Not the task's identity: a figure for /metrics, ignored when unreadable.
  int64_t launched_ms = 0;
  if (std::optional<std::string> launched = lookup("TFSLURM_STEP_LAUNCHED_AT_MS");
      launched && ParseNonNegative(*launched, &launched_ms))
    identity.started_after_launch_ms = std::max<int64_t>(0, now_ms - launched_ms);

  if (missing.empty() && malformed.empty()) return identity;
  std::string message;
  auto join = [](const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
    return out;
  };
  if (!missing.empty()) message = "missing Slurm task variables: " + join(missing);
  if (!malformed.empty()) {
    if (!message.empty()) message += "; ";
    message += "not a non-negative integer: " + join(malformed);
  }
  message +=
      ". tfslurm-agent runs as a Slurm task: start it with srun from the job script "
      "tfslurmd generates.";
  return Error(message);
}

}  // namespace tfslurm::agent
