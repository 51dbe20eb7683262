// The program's memory cgroup, as far as the agent can see it from inside:
// how many times the kernel's out-of-memory killer has killed a process in
// it, and the memory limit that applies to it. Slurm's task/cgroup puts
// each task (the agent and the program it starts) in a cgroup of its own
// under the step's, whose limit is the job's memory (ConstrainRAMSpace);
// an OOM kill counted there while the program ran, and a program dead of
// SIGKILL, is the cause to report: the program's own output says nothing.
//
// cgroup v1 (a "N:memory:/path" line in /proc/self/cgroup, counted in
// memory.oom_control's oom_kill, limited by memory.limit_in_bytes) and v2
// ("0::/path", memory.events' oom_kill, memory.max). v2 counts a kill in
// the victim's cgroup and every ancestor; v1 in the victim's cgroup alone
// (seen on cgroup v1, kernel 6.18, 2026-11-29: an OOM kill in runc's
// cgroup below Slurm's task_0 counted 1 there and 0 in task_0, the step
// and the job), so the agent must read the cgroup its program is in.
//
// Thread safety: pure functions, and reads of files under the cgroup mount.
#ifndef TFSLURM_AGENT_MEMORY_CGROUP_H_
#define TFSLURM_AGENT_MEMORY_CGROUP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tfslurm::agent {

struct MemoryCgroup {
  std::string root;  // the cgroup file system's mount, /sys/fs/cgroup/memory for v1
  std::string path;  // this process's cgroup under it, "/" or "/slurm/uid_0/job_7/step_0/task_0"
  bool v2 = false;

  std::string dir() const { return path == "/" ? root : root + path; }
};

// From the text of /proc/self/cgroup and where cgroup file systems are
// mounted (`mount_root`, /sys/fs/cgroup): the v1 memory controller's line
// when there is one, else the v2 line when `v2_available` (the unified
// hierarchy with the memory controller at `mount_root`). nullopt: no
// memory cgroup to read.
std::optional<MemoryCgroup> ParseMemoryCgroup(std::string_view proc_self_cgroup,
                                              const std::string& mount_root, bool v2_available);

// `cgroup` when its cgroup.procs lists `pid`, else the cgroup under its
// mount (`cgroup.root`) nearest the mount whose cgroup.procs does; nullopt
// when none does within 8 levels and 4,096 directories. Why: in a cgroup
// namespace of its own (pyxis and enroot make one) /proc/self/cgroup says
// "/", while the hierarchy mounted at /sys/fs/cgroup/memory is the step's
// cgroup, with the task's (task_0) below it, where alone an OOM kill of the
// task's program counts (seen with pyxis 0.24.0, enroot 4.1.2 and Slurm
// 22.05's task/cgroup on cgroup v1).
std::optional<MemoryCgroup> FindCgroupListing(const MemoryCgroup& cgroup, int pid);

// This process's memory cgroup, nullopt when there is none to read: the
// one /proc/self/cgroup names, or the one FindCgroupListing finds for this
// process under the same mount when that one does not list it.
std::optional<MemoryCgroup> CurrentMemoryCgroup(const std::string& mount_root = "/sys/fs/cgroup");

// The oom_kill count of memory.oom_control (v1) or memory.events (v2)
// text; nullopt when the file has none (a kernel before 4.13).
std::optional<int64_t> ParseOomKills(std::string_view text);

// The OOM kills counted in `cgroup` so far; nullopt when unreadable.
std::optional<int64_t> OomKills(const MemoryCgroup& cgroup);

// The smallest memory limit from `cgroup` up to the root of its hierarchy,
// in bytes; nullopt when none is set (v1's "unlimited" is a huge number,
// v2's is "max").
std::optional<int64_t> MemoryLimit(const MemoryCgroup& cgroup);

// The exit report's cause for a program the OOM killer ended, with the
// limit when known: "out of memory: the job has 300 MB on this node (OOM
// killer); raise resources.mem_per_task_mb".
std::string OomKillCause(std::optional<int64_t> limit_bytes);

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_MEMORY_CGROUP_H_
