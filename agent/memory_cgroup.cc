#include "agent/memory_cgroup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace tfslurm::agent {
namespace {

// v1 reports "no limit" as the largest page-aligned int64; anything at or
// above this is no limit a job was given.
constexpr int64_t kUnlimitedV1 = int64_t{1} << 60;

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<int64_t> ParseInt(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ProcsList(const std::string& dir, int pid) {
  std::ifstream in(dir + "/cgroup.procs");
  for (int listed = 0; in >> listed;)
    if (listed == pid) return true;
  return false;
}

// How far the search below a mount goes: Slurm's task cgroup is five levels
// under the hierarchy's root (slurm_NODE/uid_U/job_J/step_S/task_T), and a
// container's mount shows a part of that path.
constexpr int kSearchDepth = 8;
constexpr int kSearchDirectories = 4096;

}  // namespace

std::optional<MemoryCgroup> FindCgroupListing(const MemoryCgroup& cgroup, int pid) {
  if (ProcsList(cgroup.dir(), pid)) return cgroup;
  // Breadth first from the mount: the nearest listing is the task's.
  std::deque<std::pair<std::string, int>> pending{{"", 0}};
  for (int visited = 0; !pending.empty() && visited < kSearchDirectories; ++visited) {
    auto [rel, depth] = pending.front();
    pending.pop_front();
    if (!rel.empty() && ProcsList(cgroup.root + rel, pid))
      return MemoryCgroup{cgroup.root, rel, cgroup.v2};
    if (depth == kSearchDepth) continue;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(cgroup.root + rel, ec), end; !ec && it != end;
         it.increment(ec)) {
      std::error_code kind_ec;
      if (it->is_directory(kind_ec) && !it->is_symlink(kind_ec))
        pending.emplace_back(rel + "/" + it->path().filename().string(), depth + 1);
    }
  }
  return std::nullopt;
}

std::optional<MemoryCgroup> ParseMemoryCgroup(std::string_view text, const std::string& mount_root,
                                              bool v2_available) {
  std::optional<MemoryCgroup> v2;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    // hierarchy-id:controllers:path
    size_t first = line.find(':');
    size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    std::string_view controllers = line.substr(first + 1, second - first - 1);
    std::string path(line.substr(second + 1));
    if (path.empty() || path[0] != '/') continue;
    if (controllers.empty()) {
      if (line.substr(0, first) == "0" && v2_available) v2 = MemoryCgroup{mount_root, path, true};
      continue;
    }
    std::string_view rest = controllers;
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      if (rest.substr(0, comma) == "memory")
        return MemoryCgroup{mount_root + "/memory", path, false};
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return v2;
}

std::optional<MemoryCgroup> CurrentMemoryCgroup(const std::string& mount_root) {
  auto text = ReadSmallFile("/proc/self/cgroup");
  if (!text) return std::nullopt;
  // The unified hierarchy has the memory controller when it is mounted at
  // the root with memory among its controllers (not a hybrid host's
  // /sys/fs/cgroup/unified, whose controllers are v1's).
  auto controllers = ReadSmallFile(mount_root + "/cgroup.controllers");
  bool v2 = controllers && (" " + *controllers + " ").find(" memory") != std::string::npos;
  auto cgroup = ParseMemoryCgroup(*text, mount_root, v2);
  if (!cgroup || !IsDirectory(cgroup->dir())) return std::nullopt;
  if (auto listing = FindCgroupListing(*cgroup, static_cast<int>(::getpid()))) return listing;
  return cgroup;
}

std::optional<int64_t> ParseOomKills(std::string_view text) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    constexpr std::string_view kKey = "oom_kill ";
    if (line.substr(0, kKey.size()) == kKey) return ParseInt(line.substr(kKey.size()));
  }
  return std::nullopt;
}

std::optional<int64_t> OomKills(const MemoryCgroup& cgroup) {
  auto text = ReadSmallFile(cgroup.dir() + (cgroup.v2 ? "/memory.events" : "/memory.oom_control"));
  if (!text) return std::nullopt;
  return ParseOomKills(*text);
}

std::optional<int64_t> MemoryLimit(const MemoryCgroup& cgroup) {
  std::optional<int64_t> lowest;
  std::string path = cgroup.path;
  for (;;) {
    std::string dir = path == "/" ? cgroup.root : cgroup.root + path;
    if (auto text = ReadSmallFile(dir + (cgroup.v2 ? "/memory.max" : "/memory.limit_in_bytes"))) {
      // v2's "max", and v1's near-int64 "unlimited", are no limit.
      if (auto v = ParseInt(*text); v && *v > 0 && *v < kUnlimitedV1 && (!lowest || *v < *lowest))
        lowest = v;
    }
    if (path == "/" || path.empty()) break;
    size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return lowest;
}

std::string OomKillCause(std::optional<int64_t> limit_bytes) {
  // Short enough that tfctl list's reason column (140 bytes, after "attempt
  // N retryable_exit: worker:0 (task 0 on node1) was killed by signal 9: ")
  // still shows the memory.
  if (!limit_bytes) return "out of memory (OOM killer); raise resources.mem_per_task_mb";
  return "out of memory: the job has " + std::to_string(*limit_bytes / (1024 * 1024)) +
         " MB on this node (OOM killer); raise resources.mem_per_task_mb";
}

}  // namespace tfslurm::agent
