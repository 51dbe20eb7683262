// The spec's container section (service/core/spec_container.cc), its checks
// against the site's runtime, and the job script's container step for pyxis
// (service/core/container_launch.cc, sbatch_script.cc), run with bash and a
// stand-in srun that records its argv, as sbatch_script_test.cc does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "service/core/container_launch.h"
#include "service/core/sbatch_script.h"
#include "service/core/spec.h"
#include "tests/unit/job_plans.h"
#include "tests/unit/spec_parsing.h"

namespace tfslurm {
namespace {

using testing::Dump;
using testing::ParsedSpec;

using nlohmann::json;
namespace fs = std::filesystem;

json SpecWithContainer(json container) {
  json j = json::parse(R"({
    "id": "ctr-1",
    "command": ["python3", "train.py"],
    "cluster": {"chief": 1, "ps": 2, "worker": 2, "evaluator": 1},
    "resources": {"nodes": 3, "tasks_per_node": 2}
  })");
  j["container"] = std::move(container);
  return j;
}

// The one error of `spec` on `field`, which must contain `needle`.
void ExpectRefused(const json& spec, const std::string& field, const std::string& needle) {
  auto r = ParseSpec(spec);
  ASSERT_FALSE(r.ok()) << spec.dump();
  bool found = false;
  for (const FieldError& e : r.status().fields())
    if (e.field == field && e.reason.find(needle) != std::string::npos) found = true;
  EXPECT_TRUE(found) << "wanted " << field << ": ..." << needle << "...\ngot:\n"
                     << Dump(r.status().fields());
}

TEST(ContainerSpec, ParsesImageRuntimeMountsAndRoleImages) {
  auto r = ParseSpec(SpecWithContainer(
      {{"image", "/images//tf.sqsh"},
       {"runtime", "pyxis"},
       {"mounts", {"/data:/data:ro", "/scratch", {{"source", "/a"}, {"target", "/b"}}}},
       {"roles", {{"ps", {{"image", "nvcr.io#nvidia/tensorflow:24.01-tf2-py3"}}}}}}));
  ASSERT_TRUE(r.ok()) << Dump(r.status().fields());
  const ContainerSpec& c = r->container;
  EXPECT_TRUE(c.enabled());
  EXPECT_EQ(c.image, "/images/tf.sqsh") << "a path is normalized";
  EXPECT_EQ(c.runtime, ContainerRuntime::kPyxis);
  ASSERT_EQ(c.mounts.size(), 3u);
  EXPECT_EQ(c.mounts[0], (ContainerMount{"/data", "/data", true}));
  EXPECT_EQ(c.mounts[1], (ContainerMount{"/scratch", "/scratch", false}));
  EXPECT_EQ(c.mounts[2], (ContainerMount{"/a", "/b", false}));
  EXPECT_EQ(c.ImageFor("ps"), "nvcr.io#nvidia/tensorflow:24.01-tf2-py3");
  EXPECT_EQ(c.ImageFor("worker"), "/images/tf.sqsh");
}

TEST(ContainerSpec, RoundTripsThroughCanonicalJsonAndIsAbsentWithoutOne) {
  auto r =
      ParseSpec(SpecWithContainer({{"image", "docker://ubuntu:22.04"}, {"mounts", {"/d:/e"}}}));
  ASSERT_TRUE(r.ok()) << Dump(r.status().fields());
  json canonical = r->ToJson();
  EXPECT_EQ(canonical["container"]["runtime"], "auto");
  auto again = ParseSpec(canonical);
  ASSERT_TRUE(again.ok()) << Dump(again.status().fields());
  EXPECT_EQ(again->ToJson(), canonical);

  json plain = SpecWithContainer(nullptr);
  plain.erase("container");
  auto p = ParseSpec(plain);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->container.enabled());
  EXPECT_FALSE(p->ToJson().contains("container")) << "a spec without one reads as it always did";
}

TEST(ContainerSpec, RefusesBadValuesNamingTheField) {
  ExpectRefused(SpecWithContainer("x"), "container", "must be an object");
  ExpectRefused(SpecWithContainer(json::object()), "container.image", "is required");
  ExpectRefused(SpecWithContainer({{"image", ""}}), "container.image", "must name an image");
  ExpectRefused(SpecWithContainer({{"image", "./tf.sqsh"}}), "container.image", "relative path");
  ExpectRefused(SpecWithContainer({{"image", "/images/my tf.sqsh"}}), "container.image",
                "no spaces");
  ExpectRefused(SpecWithContainer({{"image", "-v=/:/host"}}), "container.image",
                "registry reference");
  ExpectRefused(SpecWithContainer({{"image", "ubuntu;reboot"}}), "container.image",
                "registry reference");
  ExpectRefused(SpecWithContainer({{"image", "/i.sqsh"}, {"runtime", "docker"}}),
                "container.runtime", "must be one of auto | pyxis | enroot | oci | apptainer");
  ExpectRefused(SpecWithContainer({{"image", "/i.sqsh"}, {"imgae", "/j"}}), "container.imgae",
                "did you mean 'container.image'?");
  ExpectRefused(SpecWithContainer({{"image", "/i.sqsh"}, {"mounts", "/data"}}), "container.mounts",
                "must be an array");
  ExpectRefused(SpecWithContainer({{"image", "/i.sqsh"}, {"mounts", {"data:/data"}}}),
                "container.mounts[0]", "absolute path");
  ExpectRefused(SpecWithContainer({{"image", "/i.sqsh"}, {"mounts", {"/a,b:/c"}}}),
                "container.mounts[0]", "pyxis separates mounts with ','");
  ExpectRefused(SpecWithContainer({{"image", "/i.sqsh"}, {"mounts", {"/a:/b:rx"}}}),
                "container.mounts[0]", "SRC:DST:ro|rw");
  ExpectRefused(SpecWithContainer({{"image", "/i.sqsh"}, {"mounts", {"/a:/"}}}),
                "container.mounts[0]", "root");
  ExpectRefused(SpecWithContainer({{"image", "/i.sqsh"}, {"mounts", {"/a:/x", "/b:/x"}}}),
                "container.mounts[1]", "already uses");
  ExpectRefused(SpecWithContainer({{"image", "/i.sqsh"}, {"mounts", {{{"target", "/x"}}}}}),
                "container.mounts[0].source", "is required");
  ExpectRefused(SpecWithContainer(
                    {{"image", "/i.sqsh"}, {"mounts", {{{"source", "/x"}, {"read_only", "yes"}}}}}),
                "container.mounts[0].read_only", "true or false");
  ExpectRefused(SpecWithContainer({{"image", "/i.sqsh"}, {"roles", {{"boss", {{"image", "/j"}}}}}}),
                "container.roles.boss", "unknown field");
  json no_ps = SpecWithContainer({{"image", "/i.sqsh"}, {"roles", {{"ps", {{"image", "/j"}}}}}});
  no_ps["cluster"] = {{"worker", 6}};
  ExpectRefused(no_ps, "container.roles.ps", "which cluster.ps does not have");
  ExpectRefused(SpecWithContainer({{"image", "/i.sqsh"}, {"roles", {{"ps", json::object()}}}}),
                "container.roles.ps.image", "is required");
  json torch = SpecWithContainer({{"image", "/i.sqsh"}, {"roles", {{"ps", {{"image", "/j"}}}}}});
  torch["framework"] = "pytorch";
  torch.erase("cluster");
  ExpectRefused(torch, "container.roles", "applies only to framework tensorflow");
}

TEST(ContainerSpec, TheSitesRuntimeResolvesAutoAndRefusesWhatItCannotRun) {
  ExperimentSpec s = ParsedSpec(SpecWithContainer({{"image", "/i.sqsh"}}));
  EXPECT_EQ(ResolveContainerRuntime(s.container, ContainerRuntime::kEnroot),
            ContainerRuntime::kEnroot);
  Status none = CheckContainerForSite(s, ContainerRuntime::kAuto, "");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument) << "a 400";
  ASSERT_EQ(none.fields().size(), 1u);
  EXPECT_EQ(none.fields()[0].field, "container.runtime");
  EXPECT_NE(none.fields()[0].reason.find("--container-runtime"), std::string::npos);
  EXPECT_TRUE(CheckContainerForSite(s, ContainerRuntime::kPyxis, "").ok());

  ExperimentSpec registry =
      ParsedSpec(SpecWithContainer({{"image", "nvcr.io#nvidia/pytorch:24.01-py3"}}));
  Status oci = CheckContainerForSite(registry, ContainerRuntime::kOci, "");
  ASSERT_FALSE(oci.ok());
  EXPECT_EQ(oci.fields()[0].field, "container.image");
  EXPECT_NE(oci.fields()[0].reason.find("OCI bundle"), std::string::npos);
  EXPECT_TRUE(CheckContainerForSite(registry, ContainerRuntime::kEnroot, "").ok());

  // pyxis takes one image per job component: ps sharing `resources` with
  // the others cannot have its own, with roles.ps it can.
  json shared =
      SpecWithContainer({{"image", "/i.sqsh"}, {"roles", {{"ps", {{"image", "/ps.sqsh"}}}}}});
  Status one_component = CheckContainerForSite(ParsedSpec(shared), ContainerRuntime::kPyxis, "");
  ASSERT_FALSE(one_component.ok());
  EXPECT_EQ(one_component.fields()[0].field, "container.roles.ps");
  EXPECT_TRUE(CheckContainerForSite(ParsedSpec(shared), ContainerRuntime::kEnroot, "").ok())
      << "enroot starts each task's program itself: any role may have its own image";
  json own = shared;
  own["resources"] = {{"nodes", 2}, {"tasks_per_node", 2}};
  own["roles"] = {{"ps", {{"nodes", 1}, {"tasks_per_node", 2}}}};
  EXPECT_TRUE(CheckContainerForSite(ParsedSpec(own), ContainerRuntime::kPyxis, "").ok());
}

TEST(ContainerSpec, OciIsRefusedOnSlurm2205WhoseOciSupportCannotRunTheAttemptsBundle) {
  ExperimentSpec s =
      ParsedSpec(SpecWithContainer({{"image", "/images/tf.oci"}, {"runtime", "oci"}}));
  Status old = CheckContainerForSite(s, ContainerRuntime::kAuto, "22.05.8");
  ASSERT_FALSE(old.ok());
  ASSERT_EQ(old.fields().size(), 1u);
  EXPECT_EQ(old.fields()[0].field, "container.runtime");
  EXPECT_NE(old.fields()[0].reason.find("Slurm 22.05.8"), std::string::npos)
      << old.fields()[0].reason;
  EXPECT_NE(old.fields()[0].reason.find("23.02 or later"), std::string::npos);
  EXPECT_TRUE(CheckContainerForSite(s, ContainerRuntime::kAuto, "").ok())
      << "a release that can run it (slurm::OciRunsAttemptBundles), or one not known";
  ExperimentSpec pyxis =
      ParsedSpec(SpecWithContainer({{"image", "/i.sqsh"}, {"runtime", "pyxis"}}));
  EXPECT_TRUE(CheckContainerForSite(pyxis, ContainerRuntime::kAuto, "22.05.8").ok());
}

TEST(ContainerLaunch, MountsTheExperimentModelDirAndWorkdirAtTheirPaths) {
  ContainerSpec c;
  c.image = "/i.sqsh";
  c.mounts = {{"/data", "/data", true}};
  ContainerPaths paths{"/out/x", "/out/x", "/home/u/code", "/opt/agent"};
  EXPECT_EQ(ContainerMounts(c, ContainerRuntime::kPyxis, paths),
            (std::vector<ContainerMount>{{"/out/x", "/out/x", false},
                                         {"/home/u/code", "/home/u/code", false},
                                         {"/opt/agent", "/opt/agent", true},
                                         {"/data", "/data", true}}))
      << "the model dir inside the experiment's is covered by it";
  EXPECT_EQ(ContainerMounts(c, ContainerRuntime::kEnroot, paths).size(), 3u)
      << "enroot's agent stays on the host: no agent mount";
}

TEST(ContainerLaunch, TheAgentRunsOnItsOwnLoaderAndLibraries) {
  EXPECT_EQ(AgentInContainer("/opt/b"),
            (std::vector<std::string>{"/opt/b/loader", "--library-path", "/opt/b/lib",
                                      "/opt/b/tfslurm-agent"}));
}

// What pyxis 0.24.0 wrote to the task's output on the local cluster (Slurm
// 22.05.8) when the image file did not exist (srun --container-image=...).
constexpr const char kPyxisMissingImage[] =
    "slurmstepd-node1: error: pyxis: child 25316 failed with error code: 1\n"
    "slurmstepd-node1: error: pyxis: failed to create container filesystem for image: "
    "/tmp/nonexistent.sqsh\n"
    "slurmstepd-node1: error: pyxis: printing enroot log file:\n"
    "slurmstepd-node1: error: pyxis:     [ERROR] No such file or directory: "
    "/tmp/nonexistent.sqsh\n"
    "slurmstepd-node1: error: spank: required plugin spank_pyxis.so: task_init() failed with "
    "rc=-1\n"
    "slurmstepd-node1: error: Failed to invoke spank plugin stack\n";

// The same on Slurm 26.05.3, whose slurmstepd begins its lines with the
// time instead of its name (src/common/log.c, _log_msg, from 25.05 on).
constexpr const char kPyxisMissingImage2605[] =
    "[2026-11-29T00:35:17.829] error: pyxis: child 4027 failed with error code: 1\n"
    "[2026-11-29T00:35:17.830] error: pyxis: failed to create container filesystem for image: "
    "/nonexistent/tf.sqsh\n"
    "[2026-11-29T00:35:17.830] error: pyxis: printing enroot log file:\n"
    "[2026-11-29T00:35:17.830] error: pyxis:     [ERROR] No such file or directory: "
    "/nonexistent/tf.sqsh\n"
    "[2026-11-29T00:35:17.830] error: spank: required plugin spank_pyxis.so: task_init() failed "
    "with rc=-1\n"
    "[2026-11-29T00:35:17.830] error: Failed to invoke spank plugin stack\n";

TEST(RuntimeStartError, ReadsSlurmstepdsLinesWithTheTimeFirstAsSlurm2505On) {
  EXPECT_EQ(RuntimeStartError(kPyxisMissingImage2605,
                              "srun: error: node1: tasks 0-1: Exited with exit code 1\n"),
            "pyxis: failed to create container filesystem for image: /nonexistent/tf.sqsh: "
            "enroot: No such file or directory: /nonexistent/tf.sqsh");
  EXPECT_EQ(RuntimeStartError("[Nov 29 00:35:17] error: pyxis: container was not started "
                              "successfully by another task\n",
                              ""),
            std::nullopt)
      << "LogTimeFormat=short, and a task that waited for another's import";
}

TEST(RuntimeStartError, QuotesRuncsFirstErrorUnderSlurmsOciSupport) {
  // runc 1.1.5's lines in a task's output on Slurm 26.05.3 (srun
  // --container), a bundle whose image is missing: warnings first.
  const std::string task_output =
      "time=\"2026-11-29T07:15:22Z\" level=warning msg=\"cannot toggle freezer: cgroups not "
      "configured for container\"\n"
      "time=\"2026-11-29T07:16:20Z\" level=error msg=\"runc run failed: invalid rootfs: stat "
      "/nonexistent/tf.oci/rootfs: no such file or directory\"\n"
      "time=\"2026-11-29T07:16:20Z\" level=error msg=\"a later one\"\n";
  EXPECT_EQ(
      RuntimeStartError(task_output, "srun: error: node1: tasks 0-1: Exited with exit code 1"),
      "runc run failed: invalid rootfs: stat /nonexistent/tf.oci/rootfs: no such file or "
      "directory");
  EXPECT_EQ(RuntimeStartError("time=\"t\" level=error msg=\"error mounting \\\"proc\\\" to "
                              "rootfs\"\n",
                              ""),
            "error mounting \"proc\" to rootfs")
      << "its quotes unescaped";
  EXPECT_EQ(RuntimeStartError("time=\"t\" level=warning msg=\"lstat : no such file\"\n", ""),
            std::nullopt);
}

TEST(RuntimeStartError, QuotesPyxisAndEnrootsOwnWords) {
  EXPECT_EQ(RuntimeStartError(kPyxisMissingImage,
                              "srun: error: node1: task 0: Exited with exit code 1\n"),
            "pyxis: failed to create container filesystem for image: /tmp/nonexistent.sqsh: "
            "enroot: No such file or directory: /tmp/nonexistent.sqsh");
  EXPECT_EQ(RuntimeStartError("",
                              "srun: unrecognized option '--container-image=/i.sqsh'\n"
                              "Try \"srun --help\" for more information\n"),
            "srun: unrecognized option '--container-image=/i.sqsh'")
      << "pyxis is not installed: srun's own word";
  EXPECT_EQ(RuntimeStartError(
                "slurmstepd-node2: error: _read_config: unable to open: /b/config.json\n", ""),
            "slurmstepd: _read_config: unable to open: /b/config.json");
  EXPECT_EQ(RuntimeStartError("slurmstepd-node1: error: pyxis: container was not started "
                              "successfully by another task\n"
                              "slurmstepd-node1: error: Failed to invoke spank plugin stack\n",
                              "srun: error: node3: tasks 4-5: Exited with exit code 1\n"),
            std::nullopt)
      << "a task that waited for another's import says nothing of why";
  EXPECT_EQ(RuntimeStartError("Traceback...\nValueError: x\n",
                              "srun: error: node1: task 0: Exited with exit code 1\n"),
            std::nullopt)
      << "a program's own failure is not the runtime's";
}

class PyxisScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pyxis-script-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "bin");
    std::ofstream(dir_ / "bin" / "srun") << "#!/bin/bash\nprintf '%s\\0' \"$@\" > \"$ARGV_OUT\"\n";
    fs::permissions(dir_ / "bin" / "srun", fs::perms::owner_all);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // srun's argv when the script runs.
  std::vector<std::string> Run(const std::string& script) {
    std::ofstream(dir_ / "job.sh") << script;
    std::string cmd = "cd '" + dir_.string() + "' && PATH='" + (dir_ / "bin").string() +
                      ":/usr/bin:/bin' ARGV_OUT='" + (dir_ / "argv").string() + "' bash job.sh";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << script;
    std::ifstream f(dir_ / "argv");
    std::stringstream ss;
    ss << f.rdbuf();
    std::string raw = ss.str();
    std::vector<std::string> argv;
    for (size_t start = 0, i = 0; i < raw.size(); ++i)
      if (raw[i] == '\0') {
        argv.push_back(raw.substr(start, i - start));
        start = i + 1;
      }
    return argv;
  }
  fs::path dir_;
};

TEST_F(PyxisScriptTest, SrunStartsTheBundledAgentInTheImageWithTheMounts) {
  fs::path image = dir_ / "tf.sqsh";
  std::ofstream(image) << "not really squashfs";
  ExperimentSpec s =
      ParsedSpec(SpecWithContainer({{"image", image.string()}, {"mounts", {"/data:/data:ro"}}}));
  AgentLaunch launch{"/opt/tfslurm-agent", "svc:9", ContainerRuntime::kPyxis, "/opt/bundle"};
  auto r = BuildSubmitRequest(
      s, testing::PlanOf(s, {2000, 2000, "m"}),
      {2, {"/out/ctr-1/logs/attempt-2", "/out/ctr-1", "/out/ctr-1"}, "s", {}}, launch, {});
  std::vector<std::string> argv = Run(r.script);
  ASSERT_GE(argv.size(), 12u) << r.script;
  EXPECT_EQ(argv[1], "--output=/out/ctr-1/logs/attempt-2/task-%t.out");
  EXPECT_EQ(argv[2], "--container-image=" + image.string());
  EXPECT_EQ(argv[3].rfind("--container-name=tfslurm-", 0), 0u) << argv[3];
  EXPECT_EQ(argv[3].size(), std::string("--container-name=tfslurm-").size() + 16 + 8)
      << "16 hex digits of the file's identity, then :no_exec: " << argv[3];
  EXPECT_EQ(argv[3].substr(argv[3].size() - 8), ":no_exec");
  EXPECT_EQ(argv[4],
            "--container-mounts=/out/ctr-1:/out/ctr-1,/opt/bundle:/opt/bundle:ro,"
            "/data:/data:ro");
  EXPECT_EQ(argv[5], "--container-workdir=/out/ctr-1");
  EXPECT_EQ(argv[9], "--container-env=SHELL")
      << "enroot starts the container with the job's SHELL, not the owner's login shell";
  EXPECT_NE(r.script.find("\nexport SHELL=/bin/sh\n"), std::string::npos) << r.script;
  EXPECT_EQ(std::vector<std::string>(argv.begin() + 10, argv.begin() + 14),
            AgentInContainer("/opt/bundle"));
  EXPECT_EQ(std::vector<std::string>(argv.begin() + 14, argv.end()),
            (std::vector<std::string>{"--service", "svc:9", "--experiment", "ctr-1", "--attempt",
                                      "2", "--address", "hostname"}));

  // The name follows the file: rewritten, it is another import.
  std::string before = argv[3];
  fs::remove(image);
  std::ofstream(image) << "rebuilt, longer than before";
  EXPECT_NE(Run(r.script)[3], before);
}

// Site mode: each agent proves its uid with a MUNGE credential from the
// node's munged (docs/security.md); inside the container it reaches the
// socket only through a mount.
TEST_F(PyxisScriptTest, InSiteModeTheAgentInsideReachesMunged) {
  EXPECT_EQ(MungeSocketDir({"PATH=/bin"}), "") << "personal mode: no uid proof, no mount";
  EXPECT_EQ(MungeSocketDir({"TFSLURM_PROVE_UID=munge"}), "/run/munge")
      << "libmunge's default socket, /run/munge/munge.socket.2";
  EXPECT_EQ(MungeSocketDir({"TFSLURM_PROVE_UID=munge", "TFSLURM_MUNGE_SOCKET=/c/munge/munge.sock"}),
            "/c/munge");
  ExperimentSpec s =
      ParsedSpec(SpecWithContainer({{"image", "nvcr.io#nvidia/tensorflow:24.01-tf2-py3"}}));
  s.container.runtime = ContainerRuntime::kPyxis;
  AgentLaunch launch{"/opt/tfslurm-agent", "svc:9", ContainerRuntime::kAuto, "/opt/bundle"};
  auto r = BuildSubmitRequest(s, testing::PlanOf(s, {2000, 2000, "m"}),
                              {1, {"/o/l", "/o", "/o"}, "s", {}}, launch,
                              {"TFSLURM_PROVE_UID=munge", "TFSLURM_MUNGE_SOCKET=/c/munge/m.sock"});
  EXPECT_EQ(Run(r.script)[4],
            "--container-mounts=/o:/o,/opt/bundle:/opt/bundle:ro,/c/munge:/c/munge");
  ContainerSpec c;
  c.image = "/i.sqsh";
  EXPECT_EQ(
      ContainerMounts(c, ContainerRuntime::kEnroot, {"/o", "/o", "/o", "", "/run/munge"}).size(),
      1u)
      << "enroot's agent stays on the host and reaches munged there";
}

TEST_F(PyxisScriptTest, ARegistryImageIsNamedByItsReferenceAndNoFileIsRead) {
  ExperimentSpec s =
      ParsedSpec(SpecWithContainer({{"image", "nvcr.io#nvidia/tensorflow:24.01-tf2-py3"}}));
  AgentLaunch launch{"/opt/tfslurm-agent", "svc:9", ContainerRuntime::kAuto, "/opt/bundle"};
  s.container.runtime = ContainerRuntime::kPyxis;
  auto r = BuildSubmitRequest(s, testing::PlanOf(s, {2000, 2000, "m"}),
                              {1, {"/o/l", "/o", "/o"}, "s", {}}, launch, {});
  EXPECT_EQ(r.script.find("stat "), std::string::npos) << r.script;
  std::vector<std::string> argv = Run(r.script);
  EXPECT_EQ(argv[3], "--container-name=" +
                         ContainerNameFor("nvcr.io#nvidia/tensorflow:24.01-tf2-py3") + ":no_exec");
}

TEST_F(PyxisScriptTest, OciWritesTheAttemptsBundleAndRunsTheAgentInIt) {
  ExperimentSpec s =
      ParsedSpec(SpecWithContainer({{"image", "/images/tf.oci"}, {"runtime", "oci"}}));
  JobPlan plan = testing::PlanOf(s, {2000, 2000, "m"});
  plan.account = {"alice", 1001, 1002, {1002}};
  const std::string logs = (dir_ / "logs").string();
  auto r =
      BuildSubmitRequest(s, plan, {1, {logs, "/out/ctr-1", "/out/ctr-1"}, "s", {}},
                         {"/opt/tfslurm-agent", "svc:9", ContainerRuntime::kAuto, "/opt/b"}, {});
  std::vector<std::string> argv = Run(r.script);
  ASSERT_GE(argv.size(), 4u) << r.script;
  EXPECT_EQ(argv[2], "--container=" + logs + "/oci-bundle");
  EXPECT_EQ(argv[3], "/opt/b/loader");
  std::ifstream f(logs + "/oci-bundle/config.json");
  json config = json::parse(f, nullptr, false);
  ASSERT_FALSE(config.is_discarded()) << "the script wrote valid JSON";
  EXPECT_EQ(config["root"]["path"], "/images/tf.oci/rootfs");
  EXPECT_EQ(config["root"]["readonly"], true);
  EXPECT_EQ(config["process"]["user"], (json{{"uid", 0}, {"gid", 0}}))
      << "the container's root, which is the owner on the host";
  EXPECT_EQ(config["linux"]["uidMappings"],
            json::array({{{"containerID", 0}, {"hostID", 1001}, {"size", 1}}}))
      << "the owner alone, never the host's root";
  EXPECT_EQ(config["linux"]["gidMappings"],
            json::array({{{"containerID", 0}, {"hostID", 1002}, {"size", 1}}}));
  for (const json& ns : config["linux"]["namespaces"])
    EXPECT_NE(ns["type"], "network") << "the host's network, as enroot";
  bool agent_mounted = false;
  for (const json& m : config["mounts"])
    if (m["destination"] == "/opt/b")
      agent_mounted = m["options"].dump().find("\"ro\"") != std::string::npos;
  EXPECT_TRUE(agent_mounted) << config["mounts"].dump();
  EXPECT_FALSE(config.contains("hooks")) << "no GPUs, no NVIDIA hook";

  s.resources.gpus_per_node = 1;
  json with_gpus = OciConfig("/i", {}, "/w", 1, 1, TaskHasGpus(s, "worker"));
  EXPECT_EQ(with_gpus["hooks"]["prestart"][0]["path"], "/usr/bin/nvidia-container-runtime-hook");
}

TEST_F(PyxisScriptTest, EnrootLeavesTheAgentOnTheHost) {
  ExperimentSpec s = ParsedSpec(SpecWithContainer({{"image", "/i.sqsh"}, {"runtime", "enroot"}}));
  auto r = BuildSubmitRequest(s, testing::PlanOf(s, {2000, 2000, "m"}),
                              {1, {"/o/l", "/o", "/o"}, "s", {}},
                              {"/opt/tfslurm-agent", "svc:9", ContainerRuntime::kAuto, "/b"}, {});
  std::vector<std::string> argv = Run(r.script);
  ASSERT_GE(argv.size(), 3u);
  EXPECT_EQ(argv[2], "/opt/tfslurm-agent") << "no container option for srun";
}

}  // namespace
}  // namespace tfslurm
