#include "agent/container_command.h"

#include <set>

#include "agent/fnv1a.h"

namespace tfslurm::agent {

bool LaunchesThroughRuntime(const std::string& runtime) {
  return runtime == "enroot" || runtime == "apptainer";
}

ContainerLaunch WithAgentDirectory(ContainerLaunch launch, const std::string& dir) {
  if (!dir.empty()) launch.mounts.push_back({dir, dir, /*read_only=*/true});
  return launch;
}

std::string EnrootName(const std::string& identity) { return "tfslurm-" + Fnv1a64Hex(identity); }

std::vector<std::vector<std::string>> EnrootImport(const std::string& image,
                                                   const std::string& name,
                                                   const std::string& scratch_sqsh) {
  if (!image.empty() && image[0] == '/') return {{"enroot", "create", "--name", name, image}};
  const std::string uri = image.find("://") == std::string::npos ? "docker://" + image : image;
  return {{"enroot", "import", "--output", scratch_sqsh, uri},
          {"enroot", "create", "--name", name, scratch_sqsh}};
}

std::string EnrootRcScript() {
  // Positional parameters are the command's argv; "$@" keeps them as they
  // are. `command -v` finds what exec would (PATH of the container's
  // environment), so a missing program is named here rather than by sh's
  // own wording, which names this script.
  return std::string("cd -- \"$") + kWorkdirVariable + "\" 2>/dev/null || {\n" +
         "  printf '%s\\n' \"" + kLauncherError + "cannot enter the workdir $" + kWorkdirVariable +
         " in the container\" >&2\n" + "  exit 127\n" + "}\n" + "unset " + kWorkdirVariable + "\n" +
         "command -v -- \"$1\" >/dev/null 2>&1 || {\n" + "  printf '%s\\n' \"" + kLauncherError +
         "cannot run '$1' in the container: not found in the image (PATH=$PATH)\" >&2\n" +
         "  exit 127\n" + "}\n" + "exec \"$@\"\n";
}

bool StaysOnTheHost(const std::string& name) {
  static const std::set<std::string> kHost = {
      "PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "PWD",  "OLDPWD",    "SHLVL", "_",
      "HOME", "SHELL",           "TMPDIR",     "TERM", "PYTHONHOME"};
  return kHost.count(name) > 0 || name.rfind("ENROOT_", 0) == 0 ||
         name.rfind("APPTAINER", 0) == 0 || name.rfind("SINGULARITY", 0) == 0;
}

std::vector<std::string> EnrootStart(const ContainerLaunch& launch, const std::string& name,
                                     const std::string& rc_path,
                                     const std::vector<std::string>& env_names,
                                     const std::vector<std::string>& argv) {
  std::vector<std::string> cmd = {"enroot", "start", "--rc", rc_path};
  for (const Mount& m : launch.mounts) {
    // An fstab line with ':' for spaces: SOURCE TARGET TYPE OPTIONS;
    // x-create makes the target in the image if it is not there.
    cmd.insert(cmd.end(), {"--mount", m.source + ":" + m.target + ":none:x-create=dir,bind" +
                                          (m.read_only ? ",ro" : "")});
  }
  for (const std::string& env : env_names) cmd.insert(cmd.end(), {"--env", env});
  cmd.insert(cmd.end(), {"--env", kWorkdirVariable});
  if (launch.gpus)
    cmd.insert(cmd.end(), {"--env", "NVIDIA_VISIBLE_DEVICES=all", "--env",
                           "NVIDIA_DRIVER_CAPABILITIES=compute,utility"});
  cmd.push_back(name);
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  return cmd;
}

std::vector<std::string> ApptainerExec(const ContainerLaunch& launch, const std::string& workdir,
                                       const std::vector<std::string>& argv) {
  std::vector<std::string> cmd = {"apptainer", "exec", "--pwd", workdir};
  for (const Mount& m : launch.mounts)
    cmd.insert(cmd.end(), {"--bind", m.source + ":" + m.target + (m.read_only ? ":ro" : "")});
  if (launch.gpus) cmd.push_back("--nv");
  cmd.push_back(launch.image);
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  return cmd;
}

std::vector<std::string> LauncherArgs(const std::string& launcher, const ContainerLaunch& launch,
                                      const std::string& workdir,
                                      const std::vector<std::string>& argv) {
  std::vector<std::string> args = {launcher, "--runtime", launch.runtime, "--image", launch.image};
  for (const Mount& m : launch.mounts)
    args.insert(args.end(), {"--mount", m.source + ":" + m.target + (m.read_only ? ":ro" : ":rw")});
  if (launch.gpus) args.push_back("--gpus");
  args.insert(args.end(), {"--workdir", workdir, "--"});
  args.insert(args.end(), argv.begin(), argv.end());
  return args;
}

LauncherRequest ParseLauncherArgs(const std::vector<std::string>& args, std::string* error) {
  LauncherRequest r;
  size_t i = 0;
  auto value = [&](const std::string& flag) -> const std::string* {
    if (i + 1 >= args.size()) {
      *error = flag + " needs a value";
      return nullptr;
    }
    return &args[++i];
  };
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    const std::string* v = nullptr;
    if (a == "--") {
      r.argv.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    } else if (a == "--gpus") {
      r.launch.gpus = true;
    } else if (a == "--runtime" || a == "--image" || a == "--workdir" || a == "--mount") {
      if (!(v = value(a))) return {};
      if (a == "--runtime") r.launch.runtime = *v;
      if (a == "--image") r.launch.image = *v;
      if (a == "--workdir") r.workdir = *v;
      if (a == "--mount") {
        // SOURCE:TARGET:ro|rw; the spec allows no ':' in either path.
        size_t first = v->find(':'), last = v->rfind(':');
        if (first == std::string::npos || first == last) {
          *error = "--mount must be SOURCE:TARGET:ro|rw, got " + *v;
          return {};
        }
        r.launch.mounts.push_back({v->substr(0, first), v->substr(first + 1, last - first - 1),
                                   v->substr(last + 1) == "ro"});
      }
    } else {
      *error = "unknown argument " + a;
      return {};
    }
  }
  if (r.argv.empty() || r.launch.runtime.empty() || r.launch.image.empty() || r.workdir.empty()) {
    *error =
        "usage: tfslurm-container-launch --runtime R --image I [--mount S:T:ro|rw]... "
        "[--gpus] --workdir W -- COMMAND [ARG...]";
    return {};
  }
  return r;
}

}  // namespace tfslurm::agent
