// How an attempt's tasks reach their container (docs/containers.md): the
// mounts every task gets, and for the runtimes that put the task itself in
// the container (pyxis, Slurm's OCI support) the srun options and the
// agent's self-contained launch. enroot and Apptainer leave the agent on the
// host: their command lines are the agent's (agent/container_command.h),
// from the Assignment's container fields that ContainerFor fills.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "service/core/agent_messages.h"
#include "service/core/spec.h"

namespace tfslurm {

// Where the attempt's own files are, which every container mounts at the
// same paths.
struct ContainerPaths {
  std::string experiment_dir;  // <output_root>/<id>: logs/ of every attempt
  std::string model_dir;       // MODEL_DIR, perhaps outside experiment_dir
  std::string workdir;         // the spec's workdir, else MODEL_DIR
  std::string agent_dir;       // the self-contained agent (pyxis, oci); "" otherwise
  // Site mode with the agent inside (pyxis, oci): munged's socket
  // directory, which the agent's uid proof reaches (TFSLURM_PROVE_UID); ""
  // otherwise.
  std::string munge_socket_dir;
};

// munged's socket directory when the job's environment asks its agents to
// prove their uid with MUNGE: TFSLURM_MUNGE_SOCKET's, else libmunge's
// default socket's (/run/munge/munge.socket.2, MUNGE_SOCKET_NAME); "" when
// it does not ask.
std::string MungeSocketDir(const std::vector<std::string>& job_environment);

// The mounts of `spec`'s container: the experiment's directory, the model
// dir and the workdir (each unless a mount above already covers it), read
// and written at the same paths; the agent's directory read-only when the
// agent runs inside, and munged's socket directory with it in site mode;
// then the spec's own mounts.
std::vector<ContainerMount> ContainerMounts(const ContainerSpec& spec, ContainerRuntime runtime,
                                            const ContainerPaths& paths);

// The name pyxis keeps an image's container file system under
// (--container-name), so that tasks of later jobs on a node reuse the import:
// "tfslurm-" and a hash of `identity` (a registry reference's text, or an
// image file's size, mtime and inode as the job script reads them).
std::string ContainerNameFor(const std::string& identity);

// The shell lines before `srun` that the runtime needs (pyxis: the image's
// identity, read on the batch node) and the srun options of one component
// whose tasks run `image`, each one shell word, quoted.
std::string PyxisPrologue(const std::string& image);
// The job script's line before a pyxis step: pyxis runs `sh -c "kill -STOP
// $$"` in the container before the task (pyxis_slurmstepd.c,
// enroot_container_start), through the shell enroot-switchroot finds in
// the container's environment (SHELL, which --container-env=SHELL passes),
// else the account's login shell. /bin/sh is in every image pyxis can start.
inline constexpr char kPyxisShell[] = "export SHELL=/bin/sh\n";
std::vector<std::string> PyxisSrunOptions(const std::string& image,
                                          const std::vector<ContainerMount>& mounts,
                                          const std::string& workdir);

// The config.json of the OCI bundle tfslurm writes for an attempt under
// Slurm's OCI support (srun --container=DIR): runc's rootless spec (`runc
// spec --rootless`), with the image bundle's rootfs read-only as its root,
// no network, PID or UTS namespace of its own (the host's, as enroot; so
// the host's /proc, bound), the job's uid and gid as the container's root
// and nothing else mapped (the program is its owner on the host, and its
// files are the owner's), `mounts` as bind mounts, and with GPUs the
// NVIDIA container toolkit's prestart hook. Slurm replaces process.args and
// sets process.env from the step (container.c's _modify_config).
nlohmann::json OciConfig(const std::string& image, const std::vector<ContainerMount>& mounts,
                         const std::string& workdir, uint32_t uid, uint32_t gid, bool gpus);
// The shell lines that write it into `bundle_dir` before srun.
std::string OciPrologue(const std::string& bundle_dir, const nlohmann::json& config);

// The command srun starts in the container instead of the agent's own path:
// the agent's loader, its libraries and the agent from `agent_dir`, as
// deploy/containers/agent-bundle.sh lays them out. The host's dynamic
// loader runs the host's glibc and libraries whatever the image has (glibc
// 2.35 on Ubuntu 22.04, 2.36 on Debian 12, musl on Alpine), and passes
// nothing of it to the program, which runs on the image's own.
std::vector<std::string> AgentInContainer(const std::string& agent_dir);

// Whether a task of `role` ("" for ranks) gets GPUs: its component's
// gpus_per_node or gpus_per_task.
bool TaskHasGpus(const ExperimentSpec& spec, const std::string& role);

// When a job whose tasks run in a container ends before any agent
// registered, the runtime's own words on why, from the first task's output
// (what slurmstepd's task wrote: pyxis's errors and the enroot log it
// prints, Slurm's container setup errors, runc's first error under Slurm's
// OCI support) and the batch script's (srun's:
// an option no plugin knows when pyxis is not installed); nullopt when
// neither says anything a runtime would.
std::optional<std::string> RuntimeStartError(const std::string& task_output,
                                             const std::string& batch_output);

// The image and the runtime of each role that has tasks (TensorFlow, in
// chief, ps, worker, evaluator order), or of "rank" (PyTorch) or "process"
// (JAX); empty without a container. For the API, tfctl and the dashboard.
std::vector<RoleContainer> ContainersOf(const ExperimentSpec& spec, ContainerRuntime site);

// The Assignment's container fields for a task of `role` ("" for ranks).
ContainerLaunchMsg ContainerFor(const ExperimentSpec& spec, ContainerRuntime runtime,
                                const std::string& role, const ContainerPaths& paths, bool gpus);

}  // namespace tfslurm
