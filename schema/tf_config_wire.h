// TF_CONFIG as the agent protocol carries it (agent.proto, Assignment). The
// cluster object is the same for every task of an attempt and O(tasks) long:
// at 4,096 tasks, 70 KB per task and 285 MB per rendezvous. The gRPC stream
// therefore carries it zlib-compressed, compressed once per attempt, and the
// agent puts TF_CONFIG together; the JSON route carries TF_CONFIG whole.
// Shared by the service and the agent so both build the same text.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>

namespace tfslurm::wire {

// {"cluster": CLUSTER_JSON, "task": {"type": ROLE, "index": INDEX}}
std::string TfConfigForTask(const std::string& cluster_json, const std::string& role, int index);

// The longest TF_CONFIG a program can be started with: Linux refuses an
// exec (E2BIG) whose one environment string, "TF_CONFIG=" and its NUL
// included, is longer than MAX_ARG_STRLEN, 32 pages (131,072 bytes; a
// value of 131,061 bytes starts /bin/true here, 131,062 does not).
// TensorFlow reads the cluster from the environment variable only
// (tfconfig_cluster_resolver.py, _load_tf_config).
inline constexpr size_t kMaxTfConfigBytes = 131072 - sizeof("TF_CONFIG=");

std::string CompressCluster(const std::string& cluster_json);
// nullopt when `compressed` is not zlib data, or inflates beyond `max_bytes`.
std::optional<std::string> InflateCluster(const std::string& compressed,
                                          size_t max_bytes = 64 << 20);

}  // namespace tfslurm::wire
