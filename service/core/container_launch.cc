#include "service/core/container_launch.h"

#include <algorithm>
#include <regex>

#include "base/sha256.h"
#include "base/shell_quote.h"

namespace tfslurm {
namespace {

// Whether `path` is `dir` or below it.
bool Under(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         path[dir.size()] == '/');
}

bool Covered(const std::vector<ContainerMount>& mounts, const std::string& path) {
  for (const ContainerMount& m : mounts)
    if (m.source == m.target && Under(path, m.target)) return true;
  return false;
}

}  // namespace

std::vector<ContainerMount> ContainerMounts(const ContainerSpec& spec, ContainerRuntime runtime,
                                            const ContainerPaths& paths) {
  std::vector<ContainerMount> mounts;
  for (const std::string& dir : {paths.experiment_dir, paths.model_dir, paths.workdir})
    if (!dir.empty() && !Covered(mounts, dir)) mounts.push_back({dir, dir, false});
  if (AgentRunsInside(runtime) && !paths.agent_dir.empty())
    mounts.push_back({paths.agent_dir, paths.agent_dir, true});
  if (AgentRunsInside(runtime) && !paths.munge_socket_dir.empty() &&
      !Covered(mounts, paths.munge_socket_dir))
    mounts.push_back({paths.munge_socket_dir, paths.munge_socket_dir, false});
  for (const ContainerMount& m : spec.mounts) mounts.push_back(m);
  return mounts;
}

std::string MungeSocketDir(const std::vector<std::string>& job_environment) {
  auto has = [&](const std::string& kv) {
    return std::find(job_environment.begin(), job_environment.end(), kv) != job_environment.end();
  };
  if (!has("TFSLURM_PROVE_UID=munge")) return "";
  std::string socket = "/run/munge/munge.socket.2";
  const std::string key = "TFSLURM_MUNGE_SOCKET=";
  for (const std::string& kv : job_environment)
    if (kv.starts_with(key) && kv.size() > key.size()) socket = kv.substr(key.size());
  const size_t slash = socket.rfind('/');
  return slash == std::string::npos || slash == 0 ? "" : socket.substr(0, slash);
}

std::string ContainerNameFor(const std::string& identity) {
  return "tfslurm-" + Sha256Hex(identity).substr(0, 16);
}

// A file's identity is read when the job starts, on the batch node, as the
// job's user: the image may be rebuilt between attempts, and a rebuilt file
// must not reuse the old import. stat's %s-%Y-%i is size, mtime and inode;
// a file that is not there gets a name of its own, and pyxis's import then
// fails with its own words.
std::string PyxisPrologue(const std::string& image) {
  if (image.empty() || image[0] != '/') return "";
  return "# One import per image per node: pyxis keeps a named container's file system\n"
         "# (--container-name) and later jobs on the node reuse it; the name follows the\n"
         "# image file's size, mtime and inode, so a rebuilt image is imported again.\n"
         "tfslurm_image_key=$(stat -L -c '%s-%Y-%i' -- " +
         ShellQuote(image) + " 2>&1 | sha256sum | cut -c1-16)\n";
}

std::vector<std::string> PyxisSrunOptions(const std::string& image,
                                          const std::vector<ContainerMount>& mounts,
                                          const std::string& workdir) {
  std::string mount_list;
  for (const ContainerMount& m : mounts)
    mount_list +=
        (mount_list.empty() ? "" : ",") + m.source + ":" + m.target + (m.read_only ? ":ro" : "");
  // :no_exec: never join the namespaces of another job's running container
  // of the same name, whose mounts are not this job's (pyxis's
  // slurm_spank_user_init: "reusing existing container namespaces" ignores
  // --container-mounts); only its file system is reused.
  const std::string name = image[0] == '/' ? "\"tfslurm-${tfslurm_image_key}:no_exec\""
                                           : ShellQuote(ContainerNameFor(image).append(":no_exec"));
  std::vector<std::string> options = {
      ShellQuote("--container-image=" + image),
      "--container-name=" + name,
      ShellQuote("--container-mounts=" + mount_list),
      ShellQuote("--container-workdir=" + workdir),
      // The program sees the user's files at their own paths only through
      // the mounts above, as its own uid (no remapping to root), and starts
      // as its command says, not through the image's entrypoint.
      "--no-container-mount-home",
      "--no-container-remap-root",
      "--no-container-entrypoint",
      // The shell enroot starts the container with: the job's SHELL, which
      // the job script sets (kPyxisShell), not the owner's login shell that
      // enroot's 10-shadow.sh copies into the image's passwd (and that
      // enroot-switchroot runs when SHELL is not in the container's
      // environment), which for an account without one (nologin) starts
      // nothing.
      "--container-env=SHELL",
  };
  return options;
}

namespace {

// The OCI bundle's mounts: runc's rootless spec's, adjusted to the host's
// PID and network namespaces, then the host's name files and `mounts`.
nlohmann::json OciMounts(const std::vector<ContainerMount>& mounts) {
  using nlohmann::json;
  json m = json::array({
      // The host's PID namespace, so its /proc: a new proc mount needs a
      // PID namespace of the user namespace's own (runc: "mount proc:/proc
      // ... operation not permitted"), and runc allows a bind of a procfs
      // over /proc (checkProcMount in libcontainer/rootfs_linux.go).
      {{"destination", "/proc"},
       {"type", "none"},
       {"source", "/proc"},
       {"options", {"rbind", "nosuid", "noexec", "nodev"}}},
      {{"destination", "/dev"},
       {"type", "tmpfs"},
       {"source", "tmpfs"},
       {"options", {"nosuid", "strictatime", "mode=755", "size=65536k"}}},
      {{"destination", "/dev/pts"},
       {"type", "devpts"},
       {"source", "devpts"},
       {"options", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}}},
      {{"destination", "/dev/shm"},
       {"type", "tmpfs"},
       {"source", "shm"},
       {"options", {"nosuid", "noexec", "nodev", "mode=1777"}}},
      // Without a network namespace of its own the container cannot mount
      // a sysfs: the host's, read-only (runc's rootless spec does the same).
      {{"destination", "/sys"},
       {"type", "none"},
       {"source", "/sys"},
       {"options", {"rbind", "nosuid", "noexec", "nodev", "ro"}}},
      {{"destination", "/tmp"},
       {"type", "tmpfs"},
       {"source", "tmpfs"},
       {"options", {"nosuid", "nodev", "mode=1777"}}},
  });
  for (const char* file : {"/etc/hosts", "/etc/resolv.conf"})
    m.push_back({{"destination", file},
                 {"type", "none"},
                 {"source", file},
                 {"options", {"bind", "ro", "nosuid", "nodev"}}});
  for (const ContainerMount& mount : mounts) {
    json options = {"rbind", "nosuid", "nodev"};
    if (mount.read_only) options.push_back("ro");
    m.push_back({{"destination", mount.target},
                 {"type", "none"},
                 {"source", mount.source},
                 {"options", options}});
  }
  return m;
}

}  // namespace

nlohmann::json OciConfig(const std::string& image, const std::vector<ContainerMount>& mounts,
                         const std::string& workdir, uint32_t uid, uint32_t gid, bool gpus) {
  using nlohmann::json;
  const json caps = json::array({"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"});
  const json m = OciMounts(mounts);
  json config = {
      {"ociVersion", "1.0.2-dev"},
      {"process",
       {{"terminal", false},
        // Root of the container's user namespace, which is the owner on
        // the host (uidMappings below).
        {"user", {{"uid", 0}, {"gid", 0}}},
        {"args", {"true"}},
        {"env", {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
        {"cwd", workdir},
        {"capabilities",
         {{"bounding", caps}, {"effective", caps}, {"permitted", caps}, {"ambient", caps}}},
        {"noNewPrivileges", true}}},
      {"root", {{"path", image + "/rootfs"}, {"readonly", true}}},
      {"mounts", m},
      {"linux",
       // The owner's one uid and gid, as container root: a user may map
       // only their own ids without newuidmap, and runc needs root mapped
       // (HostRootUID, which createExecFifo in libcontainer's
       // container_linux.go chowns its fifo to: "User namespaces enabled,
       // but no user mapping found" otherwise, runc 1.1.5).
       {{"uidMappings", {{{"containerID", 0}, {"hostID", uid}, {"size", 1}}}},
        {"gidMappings", {{{"containerID", 0}, {"hostID", gid}, {"size", 1}}}},
        {"namespaces", {{{"type", "ipc"}}, {{"type", "mount"}}, {{"type", "user"}}}},
        {"maskedPaths",
         {"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
          "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware",
          "/proc/scsi"}},
        {"readonlyPaths",
         {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}}}},
  };
  // NVIDIA's container toolkit: its prestart hook mounts the driver and the
  // devices NVIDIA_VISIBLE_DEVICES names into the rootfs (the toolkit's
  // "nvidia-container-runtime-hook prestart", OCI runtime spec's
  // hooks.prestart). Slurm's CUDA_VISIBLE_DEVICES reaches the program
  // through the step's environment.
  if (gpus)
    config["hooks"] = {
        {"prestart",
         {{{"path", "/usr/bin/nvidia-container-runtime-hook"},
           {"args", {"nvidia-container-runtime-hook", "prestart"}},
           {"env",
            {"NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"}}}}}};
  return config;
}

std::string OciPrologue(const std::string& bundle_dir, const nlohmann::json& config) {
  // One line of JSON (control characters escaped) never holds the
  // delimiter's line, and the quoted delimiter keeps the shell from
  // expanding anything in it.
  return "# The attempt's OCI bundle: Slurm reads its config.json (srun --container).\n"
         "mkdir -p -- " +
         ShellQuote(bundle_dir) + "\ncat > " + ShellQuote(bundle_dir + "/config.json") +
         " <<'TFSLURM_OCI_CONFIG'\n" +
         config.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace) +
         "\nTFSLURM_OCI_CONFIG\n";
}

std::vector<std::string> AgentInContainer(const std::string& agent_dir) {
  return {agent_dir + "/loader", "--library-path", agent_dir + "/lib",
          agent_dir + "/tfslurm-agent"};
}

namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

std::string Bounded(std::string line) {
  for (char& ch : line)
    if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
  return line.size() > 300 ? line.substr(0, 297) + "..." : line;
}

// The first error an OCI runtime wrote in Go's logrus text format, as runc
// does (`time="..." level=error msg="runc run failed: ..."`, its default
// log format, main.go's --log-format), with the message's quotes unescaped;
// its warnings are not errors.
std::optional<std::string> OciRuntimeError(const std::string& task_output) {
  static const std::regex kLogrus(
      R"re(^time="[^"]*" level=(?:error|fatal) msg="((?:[^"\\]|\\.)*)".*$)re");
  for (const std::string& line : Lines(task_output)) {
    std::smatch m;
    if (!std::regex_match(line, m, kLogrus)) continue;
    std::string said;
    const std::string quoted = m[1];
    for (size_t i = 0; i < quoted.size(); ++i) said += quoted[i] == '\\' ? quoted[++i] : quoted[i];
    return said;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> RuntimeStartError(const std::string& task_output,
                                             const std::string& batch_output) {
  // pyxis prints enroot's log after "printing enroot log file:", each line
  // as "slurmstepd: error: pyxis:     LINE" (memfd_print_log in pyxis's
  // common.c); enroot's own failures are its "[ERROR] ..." lines
  // (common::err in enroot's src/common.sh). slurmstepd's stderr, the
  // task's output, begins its lines with its name up to Slurm 24.11 and
  // with the time from 25.05 on ("[2026-11-29T00:35:17.830] error: ...",
  // as LogTimeFormat says): _log_msg in src/common/log.c, whose daemons
  // write "[%M]" since commit 712cda9b2e.
  static const std::regex kStepd(
      R"(^(?:slurmstepd(?:-[^:]*)?: |\[[^\]]+\] )error: (?:pyxis: +)?(.*)$)");
  static const std::regex kNoise(
      R"(^(child [0-9]+ failed|printing enroot log file|couldn't start container|spank: |Failed to invoke spank plugin stack|container was not started successfully))");
  std::string first, enroot, context;
  for (const std::string& line : Lines(task_output)) {
    std::smatch m;
    if (!std::regex_match(line, m, kStepd)) continue;
    const std::string said = m[1];
    if (said.rfind("[ERROR] ", 0) == 0 && enroot.empty()) enroot = said.substr(8);
    if (std::regex_search(said, kNoise) || said.rfind("[", 0) == 0) continue;
    if (first.empty()) first = said;
    if (context.empty() && said.rfind("failed to ", 0) == 0) context = said;
  }
  if (!enroot.empty())
    return Bounded("pyxis: " + (context.empty() ? std::string() : context + ": ") +
                   "enroot: " + enroot);
  if (!first.empty()) return Bounded("slurmstepd: " + first);
  if (std::optional<std::string> oci = OciRuntimeError(task_output)) return Bounded(*oci);
  // srun itself: an option of a plugin that is not loaded, or a refusal.
  static const std::regex kSrun(
      R"(^srun: (unrecognized option .*|error: (?!.*tasks? [0-9,-]+: ).*)$)");
  for (const std::string& line : Lines(batch_output))
    if (std::regex_match(line, kSrun)) return Bounded(line);
  return std::nullopt;
}

std::vector<RoleContainer> ContainersOf(const ExperimentSpec& spec, ContainerRuntime site) {
  std::vector<RoleContainer> out;
  if (!spec.container.enabled()) return out;
  const std::string runtime = ContainerRuntimeName(ResolveContainerRuntime(spec.container, site));
  if (HasRanks(spec.framework)) {
    out.push_back(
        {spec.framework == Framework::kJax ? "process" : "rank", spec.container.image, runtime});
    return out;
  }
  for (const char* role : kRoleOrder)
    if (spec.cluster.Count(role) > 0) out.push_back({role, spec.container.ImageFor(role), runtime});
  return out;
}

bool TaskHasGpus(const ExperimentSpec& spec, const std::string& role) {
  auto it = spec.roles.find(role);
  const Resources& r = it == spec.roles.end() ? spec.resources : it->second;
  return r.gpus_per_node > 0 || r.gpus_per_task > 0;
}

ContainerLaunchMsg ContainerFor(const ExperimentSpec& spec, ContainerRuntime runtime,
                                const std::string& role, const ContainerPaths& paths, bool gpus) {
  ContainerLaunchMsg m;
  if (!spec.container.enabled()) return m;
  m.runtime = ContainerRuntimeName(runtime);
  m.image = spec.container.ImageFor(role);
  m.mounts = ContainerMounts(spec.container, runtime, paths);
  m.gpus = gpus;
  return m;
}

}  // namespace tfslurm
