// The command lines through which the agent, staying on the host, starts the
// program in a container (enroot, Apptainer; docs/containers.md), and the
// import that runs once per image per node before it.
//
// The agent does not block on an import: it starts tfslurm-container-launch
// (container_launch_main.cc) as the program, which imports the image under
// a per-user, per-node lock (tasks of the node share one import, later
// attempts and jobs reuse it) and then replaces itself with the runtime's
// start command, so the program is the agent's child in its process group
// as without a container: signals, the exit status and OOM's cgroup are
// unchanged. The launcher's own failures are lines starting with
// kLauncherError on the task's output, which exit_cause.h reads as
// failures that repeat at every start (startup_error, with the runtime's
// own words).
//
// The command lines follow each runtime's documented interface:
//  - enroot 4.1.2, doc/cmd/create.md, import.md and start.md: `enroot create
//    --name NAME IMAGE.sqsh` (unsquashfs into ENROOT_DATA_PATH/NAME), `enroot
//    import --output FILE docker://REF`, `enroot start [--rc SCRIPT] [--mount
//    FSTAB] [--env KEY[=VAL]] NAME [COMMAND] [ARG...]`. enroot-switchroot
//    clears the environment and loads only enroot's environ file
//    (load_environment in bin/common.h), so each variable the program needs
//    is named with --env (its value read from enroot's own environment, not
//    argv). GPUs: the hook conf/hooks/98-nvidia.sh mounts the driver and
//    NVIDIA_VISIBLE_DEVICES' devices through nvidia-container-cli; all of them
//    are mounted and Slurm's CUDA_VISIBLE_DEVICES (host numbering) is passed
//    on as it is, so the gres binding (and ConstrainDevices' cgroup) decides.
//  - Apptainer (apptainer.org/docs/user/latest, "apptainer exec", "Bind
//    Paths and Mounts", "GPU Support"): `apptainer exec --pwd DIR --bind
//    SRC:DST[:ro] [--nv] IMAGE COMMAND [ARG...]`; --nv binds the driver and
//    keeps CUDA_VISIBLE_DEVICES.
//
// Thread safety: pure functions.
#ifndef TFSLURM_AGENT_CONTAINER_COMMAND_H_
#define TFSLURM_AGENT_CONTAINER_COMMAND_H_

#include <string>
#include <vector>

namespace tfslurm::agent {

// The launcher's lines on the task's output; errors are kLauncherError's.
inline constexpr const char kLauncherPrefix[] = "tfslurm-container: ";
inline constexpr const char kLauncherError[] = "tfslurm-container: error: ";

struct Mount {
  std::string source;
  std::string target;
  bool read_only = false;
};

struct ContainerLaunch {
  std::string runtime;  // "enroot" | "apptainer" (the agent is on the host)
  std::string image;    // an absolute path, or a registry reference
  std::vector<Mount> mounts;
  bool gpus = false;
};

// Whether the agent starts the program through the runtime (it stays on the
// host): enroot and Apptainer. pyxis and OCI put the agent itself inside.
bool LaunchesThroughRuntime(const std::string& runtime);

// `launch` with the agent's private directory `dir` (tf_config_file.h: the
// file TFSLURM_TF_CONFIG_FILE names and the sitecustomize first on
// PYTHONPATH, both paths of the host) mounted read-only at the same path, so
// the program in the container reads what those variables name; `launch`
// as it is when dir is "" (TF_CONFIG fit in the environment).
ContainerLaunch WithAgentDirectory(ContainerLaunch launch, const std::string& dir);

// The name under which enroot keeps the image's root file system:
// "tfslurm-" and a hash of `identity` (fnv1a.h) (a registry reference's text, or an
// image file's path, size, mtime and inode), so a rebuilt file is imported
// again and an unchanged one never.
std::string EnrootName(const std::string& identity);

// The commands that import `image` as `name` (run in order): a squashfs
// file is created from directly; a registry reference is imported to
// `scratch_sqsh` first (docker:// unless it names its scheme).
std::vector<std::vector<std::string>> EnrootImport(const std::string& image,
                                                   const std::string& name,
                                                   const std::string& scratch_sqsh);

// The rc script enroot start runs in the container (--rc): enter the
// workdir, check that the command exists, exec it (no shell between: argv
// as given). Failures say so with kLauncherError and exit 127.
std::string EnrootRcScript();
inline constexpr const char kWorkdirVariable[] = "TFSLURM_CONTAINER_WORKDIR";

// The variables of the agent's environment enroot is not told to pass on:
// the host's search paths and loader settings, which belong to the image
// (pyxis leaves out the same ones: enroot_deny_env in
// pyxis_slurmstepd.c), and enroot's own settings.
bool StaysOnTheHost(const std::string& name);

// enroot start for `argv` in container `name`, with `env_names` (the
// program's variables, values in the environment) and kWorkdirVariable.
std::vector<std::string> EnrootStart(const ContainerLaunch& launch, const std::string& name,
                                     const std::string& rc_path,
                                     const std::vector<std::string>& env_names,
                                     const std::vector<std::string>& argv);

// apptainer exec for `argv` in `launch.image`, working in `workdir`.
std::vector<std::string> ApptainerExec(const ContainerLaunch& launch, const std::string& workdir,
                                       const std::vector<std::string>& argv);

// The launcher's own command line, and its parsing back (the launcher's
// main): tfslurm-container-launch --runtime R --image I [--mount S:T[:ro]]...
// [--gpus] --workdir W -- ARGV...
std::vector<std::string> LauncherArgs(const std::string& launcher, const ContainerLaunch& launch,
                                      const std::string& workdir,
                                      const std::vector<std::string>& argv);
struct LauncherRequest {
  ContainerLaunch launch;
  std::string workdir;
  std::vector<std::string> argv;
};
// nullopt-like: an empty argv on a malformed command line, with `error` set.
LauncherRequest ParseLauncherArgs(const std::vector<std::string>& args, std::string* error);

}  // namespace tfslurm::agent

#endif  // TFSLURM_AGENT_CONTAINER_COMMAND_H_
