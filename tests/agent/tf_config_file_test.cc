#include "agent/tf_config_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "agent/child_process.h"
#include "schema/tf_config_wire.h"
#include "tests/agent/temp_dir.h"

namespace tfslurm::agent {
namespace {

using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

std::map<std::string, std::string> AsMap(const std::vector<std::string>& entries) {
  std::map<std::string, std::string> vars;
  for (const std::string& entry : entries) {
    const size_t eq = entry.find('=');
    vars[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return vars;
}

// TF_CONFIG of worker 7 in a cluster of `tasks` tasks (one chief, the rest
// workers), with addresses like the storm's (`node0123:40000`).
std::string TfConfigOf(int tasks) {
  std::string workers;
  for (int i = 1; i < tasks; ++i)
    workers += (i > 1 ? ", " : "") + std::string("\"node") + std::to_string(i / 8) + ":" +
               std::to_string(40000 + i % 8) + "\"";
  return wire::TfConfigForTask(R"({"chief": ["node0:40000"], "worker": [)" + workers + "]}",
                               "worker", 7);
}

std::vector<std::string> EnvWith(const std::string& tf_config, const std::string& python_path) {
  std::vector<std::string> env = {"HOME=/root", "PATH=/usr/bin:/bin", "TF_CONFIG=" + tf_config};
  if (!python_path.empty()) env.push_back("PYTHONPATH=" + python_path);
  std::sort(env.begin(), env.end());
  return env;
}

ExitStatus RunProgram(std::vector<std::string> argv, std::vector<std::string> env) {
  auto child = ChildProcess::Start({std::move(argv), "", std::move(env)});
  EXPECT_TRUE(child.ok());
  return child->Wait();
}

TEST(TfConfigFileTest, ATfConfigThatFitsStaysInTheEnvironment) {
  TempDir tmp;
  TfConfigFile file(tmp.path());
  const std::vector<std::string> before = EnvWith(TfConfigOf(4096), "");
  ASSERT_LE(TfConfigOf(4096).size(), wire::kMaxTfConfigBytes);
  std::vector<std::string> env = before;
  auto moved = file.Apply(env);
  ASSERT_TRUE(moved.ok());
  EXPECT_FALSE(*moved);
  EXPECT_EQ(env, before);
  EXPECT_EQ(file.dir(), "");
}

// The control: the reason this exists. Linux refuses the exec outright.
TEST(TfConfigFileTest, ATfConfigOf16384TasksCannotBeExecutedInTheEnvironment) {
  const std::string tf_config = TfConfigOf(16384);
  ASSERT_GT(tf_config.size(), wire::kMaxTfConfigBytes);
  auto child = ChildProcess::Start({{"/bin/true"}, "", EnvWith(tf_config, "")});
  ASSERT_TRUE(child.ok());
  ASSERT_TRUE(child->launch_error().has_value());
  EXPECT_THAT(*child->launch_error(), ::testing::HasSubstr("Argument list too long"));
}

// A real python3 reads the whole TF_CONFIG in os.environ (where TensorFlow's
// TFConfigClusterResolver reads it), starts a non-Python program and a
// Python one, and the site's own sitecustomize still runs.
TEST(TfConfigFileTest, ATfConfigOf16384TasksReachesPythonThroughTheFile) {
  TempDir tmp;
  const std::string tf_config = TfConfigOf(16384);
  std::filesystem::create_directories(tmp.Path("site"));
  WriteFile(tmp.Path("site/sitecustomize.py"),
            "import os\nopen(os.path.join(os.path.dirname(__file__), 'ran'), 'w').close()\n");
  std::vector<std::string> env = EnvWith(tf_config, tmp.Path("site"));
  std::string dir;
  {
    TfConfigFile file(tmp.path());
    auto moved = file.Apply(env);
    ASSERT_TRUE(moved.ok()) << moved.status().message();
    EXPECT_TRUE(*moved);
    dir = file.dir();
    auto vars = AsMap(env);
    EXPECT_FALSE(vars.contains("TF_CONFIG"));
    EXPECT_EQ(vars["TFSLURM_TF_CONFIG_FILE"], dir + "/tf_config.json");
    EXPECT_EQ(vars["PYTHONPATH"], dir + "/python:" + tmp.Path("site"));
    EXPECT_EQ(ReadFile(dir + "/tf_config.json"), tf_config);
    EXPECT_EQ(std::filesystem::status(dir).permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_all);
    EXPECT_TRUE(std::is_sorted(env.begin(), env.end(), [](const auto& a, const auto& b) {
      return a.substr(0, a.find('=')) < b.substr(0, b.find('='));
    }));

    const std::string script =
        "import json, os, subprocess, sys\n"
        "c = json.loads(os.environ['TF_CONFIG'])\n"
        "subprocess.run(['/bin/true'], check=True)\n"
        "child = subprocess.run([sys.executable, '-c', 'import os; "
        "print(len(os.environ[\"TF_CONFIG\"]))'], check=True, capture_output=True, text=True)\n"
        "open(sys.argv[1], 'w').write('%d %d %s %s' % (len(os.environ['TF_CONFIG']), "
        "len(c['cluster']['worker']), c['task']['type'], child.stdout.strip()))\n";
    ExitStatus status = RunProgram({"python3", "-c", script, tmp.Path("out")}, env);
    ASSERT_EQ(status.ShellStatus(), 0);
    EXPECT_EQ(ReadFile(tmp.Path("out")), std::to_string(tf_config.size()) + " 16383 worker " +
                                             std::to_string(tf_config.size()));
    EXPECT_TRUE(std::filesystem::exists(tmp.Path("site/ran")));

    // The next program (a restart in place) gets the file rewritten.
    const std::string next = TfConfigOf(16000);
    std::vector<std::string> env2 = EnvWith(next, "");
    ASSERT_TRUE(file.Apply(env2).ok());
    EXPECT_EQ(ReadFile(dir + "/tf_config.json"), next);
    EXPECT_EQ(AsMap(env2)["PYTHONPATH"], dir + "/python");
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(TfConfigFileTest, ADirectoryThatCannotBeMadeIsAnError) {
  TempDir tmp;
  TfConfigFile file(tmp.Path("missing"));
  std::vector<std::string> env = EnvWith(TfConfigOf(16384), "");
  auto moved = file.Apply(env);
  ASSERT_FALSE(moved.ok());
  EXPECT_THAT(moved.status().message(), ::testing::HasSubstr(tmp.Path("missing")));
  EXPECT_THAT(moved.status().message(), ::testing::HasSubstr("TF_CONFIG"));
}

}  // namespace
}  // namespace tfslurm::agent
