// The spec's node shapes (resources and each roles.<role> block) and the
// Slurm node lists in them, for ParseSpec (spec.cc) and ParseRoles
// (spec_roles.cc).
#include <regex>

#include "service/core/spec.h"
#include "service/core/spec_checker.h"

namespace tfslurm::spec_internal {

using nlohmann::json;

namespace {

constexpr int64_t kMaxHostlistCount = 1000000;

// At namespace scope, compiled at program start on one thread: two request
// threads compiling a function-local std::regex at once race in libstdc++'s
// shared ctype cache (TSan saw two GETs parse specs at once).
const std::regex kRange("([0-9]{1,9})(?:-([0-9]{1,9}))?");

// "1-4,7" inside a hostlist's brackets: how many numbers it names.
std::optional<int64_t> CountRanges(const std::string& body) {
  int64_t total = 0;
  size_t start = 0;
  while (true) {
    size_t comma = body.find(',', start);
    std::smatch m;
    const std::string part = body.substr(start, comma - start);
    if (!std::regex_match(part, m, kRange)) return std::nullopt;
    const int64_t lo = std::stoll(m[1].str());
    const int64_t hi = m[2].matched ? std::stoll(m[2].str()) : lo;
    if (hi < lo) return std::nullopt;
    total += hi - lo + 1;
    if (total > kMaxHostlistCount) return std::nullopt;
    if (comma == std::string::npos) return total;
    start = comma + 1;
  }
}

bool IsNodeNameChar(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '.' || ch == '-';
}

}  // namespace

// A field holding a Slurm node list (--nodelist, --exclude); its count of
// names, or nullopt when refused.
std::optional<int64_t> NodeList(Checker& c, const json& v, const std::string& path,
                                std::string& out) {
  auto s = c.String(v, path, 4096);
  if (!s) return std::nullopt;
  const char* allowed =
      "a Slurm node list such as node[1-4],gpu7: node names of letters, digits and _ . -, "
      "numeric ranges in [ ], joined by ','; no spaces";
  if (s->empty()) {
    c.Fail(path, std::string("must be ") + allowed +
                     ", got an empty string; leave the field out for no list");
    return std::nullopt;
  }
  std::optional<int64_t> count = CountHostlist(*s);
  if (!count) {
    c.Fail(path, std::string("must be ") + allowed + ", got " + Show(v));
    return std::nullopt;
  }
  out = *s;
  return count;
}

std::optional<int64_t> CountHostlist(const std::string& list) {
  int64_t total = 0;
  size_t i = 0;
  while (true) {
    int64_t count = 1;
    bool named = false;
    while (i < list.size() && list[i] != ',') {
      if (IsNodeNameChar(list[i])) {
        named = true;
        ++i;
      } else if (list[i] == '[') {
        const size_t close = list.find(']', i);
        if (close == std::string::npos) return std::nullopt;
        auto n = CountRanges(list.substr(i + 1, close - i - 1));
        if (!n) return std::nullopt;
        count *= *n;
        if (count > kMaxHostlistCount) return std::nullopt;
        i = close + 1;
      } else {
        return std::nullopt;
      }
    }
    if (!named) return std::nullopt;  // empty, "[1-2]" alone, ",," or a trailing ','
    total += count;
    if (total > kMaxHostlistCount) return std::nullopt;
    if (i == list.size()) return total;
    ++i;
  }
}

bool ParseNodeShape(Checker& c, const json& v, const std::string& path, Resources& out) {
  if (v.contains("partition")) {
    if (auto s = c.String(v["partition"], path + ".partition")) {
      if (std::regex_match(*s, kPartitionPattern))
        out.partition = *s;
      else
        c.Fail(
            path + ".partition",
            "must be a Slurm partition name (letters, digits, _ . -), got " + Show(v["partition"]));
    }
  }
  auto count = [&](const char* name, int64_t min, int64_t max, int& target) {
    if (!v.contains(name)) return false;
    if (auto n = c.Int(v[name], path + "." + name, min, max)) target = static_cast<int>(*n);
    return true;
  };
  count("nodes", 1, 10000, out.nodes);
  bool tasks_per_node_given = count("tasks_per_node", 1, 1024, out.tasks_per_node);
  count("cpus_per_task", 1, 1024, out.cpus_per_task);
  const bool gpus_per_node_given = count("gpus_per_node", 0, 64, out.gpus_per_node);
  const bool gpus_per_task_given = count("gpus_per_task", 0, 64, out.gpus_per_task);
  // A block that names one GPU field says how its tasks get GPUs: a role
  // does not inherit the other from `resources`.
  if (gpus_per_node_given && !gpus_per_task_given) out.gpus_per_task = 0;
  if (gpus_per_task_given && !gpus_per_node_given) out.gpus_per_node = 0;
  // Slurm would take both, but then each node's GPUs are split among its
  // tasks and the rest left idle; one way of asking is clearer.
  if (out.gpus_per_node > 0 && out.gpus_per_task > 0)
    c.Fail(path + ".gpus_per_task",
           "cannot be combined with gpus_per_node (got gpus_per_task " +
               std::to_string(out.gpus_per_task) + " and gpus_per_node " +
               std::to_string(out.gpus_per_node) +
               "): use gpus_per_task for GPUs of each task's own, or gpus_per_node for GPUs "
               "every task of a node shares, and set the other to 0");
  if (v.contains("mem_per_task_mb")) {
    const json& m = v["mem_per_task_mb"];
    if (m.is_string() && m.get<std::string>() == "auto") {
      out.mem_per_task_mb.reset();
    } else if (m.is_number_integer() || m.is_number_unsigned()) {
      if (auto n = c.Int(m, path + ".mem_per_task_mb", 1, int64_t{1} << 40))
        out.mem_per_task_mb = *n;
    } else {
      c.Fail(path + ".mem_per_task_mb", "must be \"auto\" or a whole number of MB, got " + Show(m));
    }
  }
  if (v.contains("constraint")) {
    if (auto s = c.String(v["constraint"], path + ".constraint", 256)) {
      if (std::regex_match(*s, kConstraintPattern))
        out.constraint = *s;
      else
        c.Fail(path + ".constraint",
               "must be a Slurm feature expression (feature names with & | , [ ] ( ) * !; no "
               "spaces), got " +
                   Show(v["constraint"]));
    }
  }
  if (v.contains("nodelist")) {
    auto count = NodeList(c, v["nodelist"], path + ".nodelist", out.nodelist);
    // slurmctld refuses a job whose required nodes outnumber its node count
    // (validate_job_create_req and _job_create, src/slurmctld/job_mgr.c).
    if (count && *count > out.nodes)
      c.Fail(path + ".nodelist",
             "names " + std::to_string(*count) + " nodes (" + Show(v["nodelist"]) + ") but " +
                 path + ".nodes is " + std::to_string(out.nodes) +
                 "; Slurm gives the job every node in nodelist, so name at most nodes of them");
  }
  if (v.contains("exclusive")) {
    if (v["exclusive"].is_boolean())
      out.exclusive = v["exclusive"].get<bool>();
    else
      c.Fail(path + ".exclusive", "must be true (no other job shares the nodes) or false, got " +
                                      TypeAndValue(v["exclusive"]));
  }
  return tasks_per_node_given;
}

}  // namespace tfslurm::spec_internal
