// The command lines through which the agent starts a program under enroot
// and Apptainer (agent/container_command.h), checked against each runtime's
// documented interface (the header cites it), and the launcher's own
// command line, which must parse back to what the agent meant.
#include "agent/container_command.h"

#include <gtest/gtest.h>

namespace tfslurm::agent {
namespace {

ContainerLaunch Launch(std::string runtime, bool gpus = false) {
  return {std::move(runtime),
          "/images/tf.sqsh",
          {{"/out/x", "/out/x", false}, {"/data", "/in", true}},
          gpus};
}

TEST(ContainerCommand, OnlyEnrootAndApptainerStartTheProgramFromTheHost) {
  EXPECT_TRUE(LaunchesThroughRuntime("enroot"));
  EXPECT_TRUE(LaunchesThroughRuntime("apptainer"));
  EXPECT_FALSE(LaunchesThroughRuntime("pyxis")) << "pyxis put the agent itself in the container";
  EXPECT_FALSE(LaunchesThroughRuntime("oci"));
  EXPECT_FALSE(LaunchesThroughRuntime(""));
}

TEST(ContainerCommand, EnrootImportsAFileOnceByCreateAndARegistryImageThroughASquashfs) {
  EXPECT_EQ(EnrootImport("/images/tf.sqsh", "tfslurm-1", "/tmp/s.sqsh"),
            (std::vector<std::vector<std::string>>{
                {"enroot", "create", "--name", "tfslurm-1", "/images/tf.sqsh"}}));
  EXPECT_EQ(EnrootImport("nvcr.io#nvidia/pytorch:24.01-py3", "tfslurm-2", "/tmp/s.sqsh"),
            (std::vector<std::vector<std::string>>{
                {"enroot", "import", "--output", "/tmp/s.sqsh",
                 "docker://nvcr.io#nvidia/pytorch:24.01-py3"},
                {"enroot", "create", "--name", "tfslurm-2", "/tmp/s.sqsh"}}));
  EXPECT_EQ(EnrootImport("podman://localhost/tf:1", "n", "/s")[0][4], "podman://localhost/tf:1")
      << "a scheme given is kept";
  EXPECT_EQ(EnrootName("a").size(), std::string("tfslurm-").size() + 16);
  EXPECT_NE(EnrootName("/i.sqsh:1:2:3"), EnrootName("/i.sqsh:1:2:4"));
}

TEST(ContainerCommand, EnrootStartNamesMountsAndVariablesNotTheirValues) {
  EXPECT_EQ(EnrootStart(Launch("enroot"), "tfslurm-1", "/tmp/rc.sh", {"TF_CONFIG", "SLURM_PROCID"},
                        {"python3", "train.py", "--lr", "0.1"}),
            (std::vector<std::string>{"enroot", "start", "--rc", "/tmp/rc.sh", "--mount",
                                      "/out/x:/out/x:none:x-create=dir,bind", "--mount",
                                      "/data:/in:none:x-create=dir,bind,ro", "--env", "TF_CONFIG",
                                      "--env", "SLURM_PROCID", "--env", kWorkdirVariable,
                                      "tfslurm-1", "python3", "train.py", "--lr", "0.1"}));
  std::vector<std::string> gpus = EnrootStart(Launch("enroot", true), "n", "/rc", {}, {"p"});
  EXPECT_NE(std::find(gpus.begin(), gpus.end(), "NVIDIA_VISIBLE_DEVICES=all"), gpus.end())
      << "enroot's 98-nvidia.sh hook mounts the driver when it is set";
  EXPECT_EQ(std::find(gpus.begin(), gpus.end(), "CUDA_VISIBLE_DEVICES"), gpus.end())
      << "named only when the agent's environment has it, as Slurm set it";
}

TEST(ContainerCommand, TheHostsSearchPathsStayOnTheHost) {
  for (const char* name : {"PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "HOME", "ENROOT_DATA_PATH"})
    EXPECT_TRUE(StaysOnTheHost(name)) << name;
  for (const char* name : {"TF_CONFIG", "CUDA_VISIBLE_DEVICES", "SLURM_PROCID", "MODEL_DIR",
                           "TFSLURM_PORT", "MASTER_ADDR"})
    EXPECT_FALSE(StaysOnTheHost(name)) << name;
}

TEST(ContainerCommand, ApptainerExecBindsAtTheSamePathsAndNvForGpus) {
  EXPECT_EQ(
      ApptainerExec(Launch("apptainer"), "/out/x", {"python3", "t.py"}),
      (std::vector<std::string>{"apptainer", "exec", "--pwd", "/out/x", "--bind", "/out/x:/out/x",
                                "--bind", "/data:/in:ro", "/images/tf.sqsh", "python3", "t.py"}));
  std::vector<std::string> gpus = ApptainerExec(Launch("apptainer", true), "/w", {"p"});
  EXPECT_NE(std::find(gpus.begin(), gpus.end(), "--nv"), gpus.end());
}

TEST(ContainerCommand, TheLaunchersCommandLineParsesBackWhateverTheArguments) {
  ContainerLaunch launch = Launch("enroot", true);
  std::vector<std::string> argv = {"python3", "--", "--runtime", "it's", ""};
  std::vector<std::string> args = LauncherArgs("/bin/launch", launch, "/out/x", argv);
  std::string error;
  LauncherRequest r =
      ParseLauncherArgs(std::vector<std::string>(args.begin() + 1, args.end()), &error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(r.argv, argv) << "everything after -- is the program's";
  EXPECT_EQ(r.workdir, "/out/x");
  EXPECT_EQ(r.launch.runtime, "enroot");
  EXPECT_EQ(r.launch.image, "/images/tf.sqsh");
  EXPECT_TRUE(r.launch.gpus);
  ASSERT_EQ(r.launch.mounts.size(), 2u);
  EXPECT_EQ(r.launch.mounts[1].source, "/data");
  EXPECT_EQ(r.launch.mounts[1].target, "/in");
  EXPECT_TRUE(r.launch.mounts[1].read_only);
  EXPECT_FALSE(r.launch.mounts[0].read_only);

  EXPECT_TRUE(ParseLauncherArgs({"--runtime", "enroot", "--", "p"}, &error).argv.empty());
  EXPECT_NE(error.find("usage"), std::string::npos) << error;
  EXPECT_TRUE(ParseLauncherArgs({"--bogus"}, &error).argv.empty());
  EXPECT_NE(error.find("--bogus"), std::string::npos);
}

// A TF_CONFIG too long for the environment is a file in the agent's own
// directory on the host (tf_config_file.h), named by TFSLURM_TF_CONFIG_FILE
// and with a sitecustomize on PYTHONPATH: the program in the container must
// see that directory at the same path, through every runtime.
TEST(ContainerCommand, TheAgentsDirectoryIsMountedReadOnlyAtTheSamePath) {
  const std::string dir = "/tmp/tfslurm-agent-Ab12Cd";
  EXPECT_EQ(WithAgentDirectory(Launch("enroot"), "").mounts.size(), 2u)
      << "no directory when TF_CONFIG fit in the environment";
  ContainerLaunch launch = WithAgentDirectory(Launch("enroot"), dir);

  std::vector<std::string> args = LauncherArgs("/bin/launch", launch, "/out/x", {"python3"});
  EXPECT_NE(std::find(args.begin(), args.end(), dir + ":" + dir + ":ro"), args.end());
  std::string error;
  LauncherRequest r =
      ParseLauncherArgs(std::vector<std::string>(args.begin() + 1, args.end()), &error);
  ASSERT_EQ(r.launch.mounts.size(), 3u) << error;
  EXPECT_EQ(r.launch.mounts[2].source, dir);
  EXPECT_EQ(r.launch.mounts[2].target, dir);
  EXPECT_TRUE(r.launch.mounts[2].read_only);

  std::vector<std::string> enroot = EnrootStart(r.launch, "n", "/rc", {}, {"python3"});
  EXPECT_NE(std::find(enroot.begin(), enroot.end(), dir + ":" + dir + ":none:x-create=dir,bind,ro"),
            enroot.end());
  std::vector<std::string> apptainer =
      ApptainerExec(WithAgentDirectory(Launch("apptainer"), dir), "/w", {"python3"});
  EXPECT_NE(std::find(apptainer.begin(), apptainer.end(), dir + ":" + dir + ":ro"),
            apptainer.end());
  for (const char* name : {"TFSLURM_TF_CONFIG_FILE", "PYTHONPATH"})
    EXPECT_FALSE(StaysOnTheHost(name)) << name << " must reach the program in the container";
}

TEST(ContainerCommand, TheRcScriptEntersTheWorkdirAndExecsTheArgvAsGiven) {
  const std::string rc = EnrootRcScript();
  EXPECT_NE(rc.find("exec \"$@\""), std::string::npos);
  EXPECT_NE(rc.find(kLauncherError), std::string::npos);
  EXPECT_NE(rc.find(kWorkdirVariable), std::string::npos);
}

}  // namespace
}  // namespace tfslurm::agent
