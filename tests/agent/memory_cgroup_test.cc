#include "agent/memory_cgroup.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/agent/temp_dir.h"

namespace tfslurm::agent {
namespace {

using testing::TempDir;
using testing::WriteFile;

TEST(MemoryCgroupTest, TheV1MemoryLineWinsOverTheUnifiedOne) {
  // A hybrid host, as Slurm's task/cgroup (cgroup/v1) places a task.
  const char* text =
      "9:name=systemd:/\n"
      "5:devices:/slurm_node1/uid_0/job_7/step_0/task_0\n"
      "4:memory:/slurm_node1/uid_0/job_7/step_0/task_0\n"
      "2:cpu,cpuacct:/\n"
      "0::/\n";
  auto cgroup = ParseMemoryCgroup(text, "/sys/fs/cgroup", true);
  ASSERT_TRUE(cgroup);
  EXPECT_FALSE(cgroup->v2);
  EXPECT_EQ(cgroup->dir(), "/sys/fs/cgroup/memory/slurm_node1/uid_0/job_7/step_0/task_0");
  // memory among other controllers of one hierarchy
  cgroup = ParseMemoryCgroup("3:cpu,memory:/a/b\n", "/r", false);
  ASSERT_TRUE(cgroup);
  EXPECT_EQ(cgroup->dir(), "/r/memory/a/b");
}

TEST(MemoryCgroupTest, TheUnifiedLineOnlyWhenItHasTheMemoryController) {
  auto cgroup = ParseMemoryCgroup("0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_0\n",
                                  "/sys/fs/cgroup", true);
  ASSERT_TRUE(cgroup);
  EXPECT_TRUE(cgroup->v2);
  EXPECT_EQ(cgroup->dir(), "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0/user/task_0");
  EXPECT_FALSE(ParseMemoryCgroup("0::/x\n", "/sys/fs/cgroup", false));
  EXPECT_FALSE(ParseMemoryCgroup("5:devices:/x\n", "/sys/fs/cgroup", true));
  EXPECT_FALSE(ParseMemoryCgroup("", "/sys/fs/cgroup", true));
  EXPECT_EQ(ParseMemoryCgroup("0::/\n", "/r", true)->dir(), "/r");
}

TEST(MemoryCgroupTest, OomKillsFromV1AndV2Files) {
  EXPECT_EQ(ParseOomKills("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), 3);
  EXPECT_EQ(ParseOomKills("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n"), 2);
  EXPECT_EQ(ParseOomKills("oom_kill_disable 0\nunder_oom 0\n"), std::nullopt) << "before 4.13";
  EXPECT_EQ(ParseOomKills("oom_kill x\n"), std::nullopt);
}

TEST(MemoryCgroupTest, TheLimitIsTheSmallestFromTheTaskUpAndCountsAreRead) {
  TempDir dir;
  const std::string root = dir.Path("memory");
  const std::string task = root + "/slurm_node1/uid_0/job_7/step_0/task_0";
  std::filesystem::create_directories(task);
  WriteFile(root + "/memory.limit_in_bytes", "9223372036854771712\n");  // v1's unlimited
  WriteFile(root + "/slurm_node1/uid_0/job_7/memory.limit_in_bytes", "629145600\n");  // 600 MB
  WriteFile(root + "/slurm_node1/uid_0/job_7/step_0/memory.limit_in_bytes", "314572800\n");
  WriteFile(task + "/memory.limit_in_bytes", "9223372036854771712\n");
  WriteFile(task + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
  MemoryCgroup cgroup{root, "/slurm_node1/uid_0/job_7/step_0/task_0", false};
  EXPECT_EQ(MemoryLimit(cgroup), 314572800);
  EXPECT_EQ(OomKills(cgroup), 1);

  const std::string v2 = dir.Path("unified");
  std::filesystem::create_directories(v2 + "/job_7/task_0");
  WriteFile(v2 + "/job_7/memory.max", "209715200\n");
  WriteFile(v2 + "/job_7/task_0/memory.max", "max\n");
  WriteFile(v2 + "/job_7/task_0/memory.events", "oom 1\noom_kill 1\n");
  MemoryCgroup unified{v2, "/job_7/task_0", true};
  EXPECT_EQ(MemoryLimit(unified), 209715200);
  EXPECT_EQ(OomKills(unified), 1);
  EXPECT_EQ(MemoryLimit(MemoryCgroup{v2, "/", true}), std::nullopt) << "no limit anywhere";
}

// What the agent sees inside a pyxis container (Slurm 22.05, task/cgroup
// on cgroup v1): /proc/self/cgroup says "4:memory:/", and the hierarchy
// mounted at /sys/fs/cgroup/memory is the step's cgroup, which lists
// slurmstepd's helper; the task's cgroup, task_0, is below it.
TEST(MemoryCgroupTest, InACgroupNamespaceTheCgroupListingTheProcessIsFoundBelowTheMount) {
  TempDir dir;
  const std::string step = dir.Path("memory");
  std::filesystem::create_directories(step + "/task_0");
  std::filesystem::create_directories(step + "/task_1");
  WriteFile(step + "/cgroup.procs", "6928\n");
  WriteFile(step + "/memory.limit_in_bytes", "314572800\n");
  WriteFile(step + "/task_0/cgroup.procs", "6933\n7108\n");
  WriteFile(step + "/task_1/cgroup.procs", "6940\n");
  WriteFile(step + "/task_0/memory.limit_in_bytes", "9223372036854771712\n");
  WriteFile(step + "/task_0/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");

  const MemoryCgroup as_named{step, "/", false};
  auto task0 = FindCgroupListing(as_named, 7108);
  ASSERT_TRUE(task0);
  EXPECT_EQ(task0->dir(), step + "/task_0");
  EXPECT_EQ(OomKills(*task0), 1) << "the task's count, not the step's";
  EXPECT_EQ(MemoryLimit(*task0), 314572800) << "the step's limit, above the task";
  EXPECT_EQ(FindCgroupListing(as_named, 6940)->path, "/task_1");
  EXPECT_EQ(FindCgroupListing(as_named, 6928)->path, "/")
      << "the cgroup named, when it lists the process";
  EXPECT_EQ(FindCgroupListing(as_named, 9999), std::nullopt) << "listed nowhere";
}

TEST(MemoryCgroupTest, TheCgroupNamedIsKeptWhenItListsTheProcessWithoutASearch) {
  TempDir dir;
  const std::string root = dir.Path("memory");
  std::filesystem::create_directories(root + "/slurm_node1/job_7/step_0/task_0");
  std::filesystem::create_directories(root + "/a_decoy");
  WriteFile(root + "/a_decoy/cgroup.procs", "4243\n");
  WriteFile(root + "/slurm_node1/job_7/step_0/task_0/cgroup.procs", "4243\n");
  auto found =
      FindCgroupListing(MemoryCgroup{root, "/slurm_node1/job_7/step_0/task_0", false}, 4243);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->path, "/slurm_node1/job_7/step_0/task_0");
  // Named wrongly (a namespace's "/"): the search goes breadth first and
  // deep enough for Slurm's five levels.
  std::filesystem::remove_all(root + "/a_decoy");
  EXPECT_EQ(FindCgroupListing(MemoryCgroup{root, "/", false}, 4243)->path,
            "/slurm_node1/job_7/step_0/task_0");
}

// What the agent sees inside Slurm's OCI support with runc as root (Slurm
// 26.05.3's task/cgroup on cgroup v1, runc 1.1.5 --rootless=true, the
// host's /sys, no cgroup namespace; seen on the local cluster): runc made
// a cgroup named for the container below its own in every hierarchy, so
// below Slurm's task_0 in the memory one, and the agent and its program
// are in it. On v1 the program's OOM kill counts there only.
TEST(MemoryCgroupTest, UnderRootRuncTheContainersCgroupBelowTheTaskIsTheOneRead) {
  const char* text =
      "9:name=systemd:/node1.root.7.0.0\n"
      "5:devices:/node1.root.7.0.0\n"
      "4:memory:/slurm_node1/uid_0/job_7/step_0/task_0/node1.root.7.0.0\n"
      "1:cpu:/node1.root.7.0.0\n"
      "0::/node1.root.7.0.0\n";
  TempDir dir;
  const std::string root = dir.Path("memory");
  const std::string step = root + "/slurm_node1/uid_0/job_7/step_0";
  std::filesystem::create_directories(step + "/task_0/node1.root.7.0.0");
  WriteFile(step + "/memory.limit_in_bytes", "314572800\n");
  WriteFile(step + "/task_0/cgroup.procs", "11740\n");  // slurmstepd's, runc's
  WriteFile(step + "/task_0/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
  WriteFile(step + "/task_0/node1.root.7.0.0/cgroup.procs", "11753\n11766\n");
  WriteFile(step + "/task_0/node1.root.7.0.0/memory.oom_control",
            "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");

  auto named = ParseMemoryCgroup(text, "/sys/fs/cgroup", true);
  ASSERT_TRUE(named);
  EXPECT_FALSE(named->v2) << "the v1 memory line, not the unified one";
  EXPECT_EQ(named->dir(),
            "/sys/fs/cgroup/memory/slurm_node1/uid_0/job_7/step_0/task_0/node1.root.7.0.0");
  auto found = FindCgroupListing(MemoryCgroup{root, named->path, false}, 11766);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->path, "/slurm_node1/uid_0/job_7/step_0/task_0/node1.root.7.0.0");
  EXPECT_EQ(OomKills(*found), 1) << "runc's cgroup's count, not task_0's";
  EXPECT_EQ(MemoryLimit(*found), 314572800) << "the step's limit, above task_0";
}

TEST(MemoryCgroupTest, TheCauseNamesTheMemoryAndTheField) {
  EXPECT_EQ(OomKillCause(314572800),
            "out of memory: the job has 300 MB on this node (OOM killer); raise "
            "resources.mem_per_task_mb");
  EXPECT_EQ(OomKillCause(std::nullopt),
            "out of memory (OOM killer); raise resources.mem_per_task_mb");
}

}  // namespace
}  // namespace tfslurm::agent
