// The fuzz corpora as regression tests, in every build (no clang needed):
// each file goes through the fuzzers' invariant checks, and the scripts
// rendered from the valid specs are run by real bash with a stand-in srun,
// which checks shell_words.h's model of bash on the same scripts.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/fuzz/http_invariants.h"
#include "tests/fuzz/invariants.h"
#include "tests/fuzz/scalar_invariants.h"
#include "tests/fuzz/shell_words.h"
#include "tests/fuzz/small_stack.h"

namespace tfslurm::fuzz {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<fs::path> CorpusFiles(const std::string& target) {
  std::vector<fs::path> files;
  fs::path dir = fs::path(TFSLURM_FUZZ_DIR) / "corpus" / target;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// `small_stack`: as the fuzzer runs the check (small_stack.h), so a seed that
// once overflowed the stack there is a regression test here.
void ReplayCorpus(const std::string& target, std::string (*check)(std::string_view),
                  bool small_stack = false) {
  auto files = CorpusFiles(target);
  EXPECT_GE(files.size(), 4u) << "corpus/" << target << " is nearly empty";
  for (const auto& f : files) {
    std::string bytes = Slurp(f);
    EXPECT_EQ(small_stack ? RunOnSmallStack(check, bytes) : check(bytes), "") << f;
  }
}

TEST(FuzzCorpus, Spec) { ReplayCorpus("spec", CheckSpecInput, /*small_stack=*/true); }
TEST(FuzzCorpus, Sbatch) { ReplayCorpus("sbatch", CheckSbatchInput, /*small_stack=*/true); }
TEST(FuzzCorpus, AgentJson) { ReplayCorpus("agent_json", CheckAgentJsonInput); }
TEST(FuzzCorpus, AgentProto) { ReplayCorpus("agent_proto", CheckAgentBinaryInput); }
TEST(FuzzCorpus, TfEvents) { ReplayCorpus("tfevents", CheckEventFileInput); }
TEST(FuzzCorpus, RequestHead) { ReplayCorpus("request_head", CheckRequestHeadInput); }
TEST(FuzzCorpus, HttpRequest) { ReplayCorpus("http_request", CheckHttpRequestInput); }
TEST(FuzzCorpus, ScalarsJsonl) {
  ReplayCorpus("scalars_jsonl", CheckScalarsJsonlInput, /*small_stack=*/true);
}

// The event files real TensorFlow wrote for the agent's tests, each of them,
// also through the fuzzer's checks (corpus/tfevents has copies of a few).
TEST(FuzzCorpus, AgentTestdataEventFiles) {
  int checked = 0;
  for (const auto& e :
       fs::recursive_directory_iterator(fs::path(TFSLURM_FUZZ_DIR) / ".." / "agent" / "testdata")) {
    if (!e.is_regular_file() || !e.path().filename().string().starts_with("events.out.tfevents."))
      continue;
    EXPECT_EQ(CheckEventFileInput(Slurp(e.path())), "") << e.path();
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

// Runs `argv` with `env` added; returns the exit status (-1: not run).
int RunProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
               const fs::path& cwd) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (chdir(cwd.c_str()) != 0) _exit(126);
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<std::string> SplitNul(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == '\0') {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

class BashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fuzz-corpus-test-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "bin");
    fs::create_directories(dir_ / "cwd");
    // srun writes its argv, NUL-separated, where ARGV_OUT says.
    std::ofstream(dir_ / "bin" / "srun") << "#!/bin/bash\nprintf '%s\\0' \"$@\" > \"$ARGV_OUT\"\n";
    fs::permissions(dir_ / "bin" / "srun", fs::perms::owner_all);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Renders the script of `spec` and runs it: bash -n accepts it, running it
  // runs srun with exactly the expected argv, and nothing else happens.
  void CheckScript(const ExperimentSpec& spec, unsigned variant, const std::string& what) {
    std::vector<std::string> argv;
    SubmitRequest r = RenderForCheck(spec, variant, &argv);
    fs::path script = dir_ / "job.sh", out = dir_ / "argv";
    std::ofstream(script, std::ios::binary) << r.script;
    fs::remove(out);
    ASSERT_EQ(RunProcess({"bash", "-n", script}, {}, dir_ / "cwd"), 0) << what << "\n" << r.script;
    std::string path_env = "PATH=" + (dir_ / "bin").string() + ":/usr/bin:/bin";
    std::string out_env = "ARGV_OUT=" + out.string();
    ASSERT_EQ(RunProcess({"bash", script}, {path_env, out_env}, dir_ / "cwd"), 0) << what << "\n"
                                                                                  << r.script;
    std::vector<std::string> srun_args(argv.begin() + 2, argv.end());  // after "exec", "srun"
    EXPECT_EQ(SplitNul(Slurp(out)), srun_args) << what << "\n" << r.script;
    EXPECT_TRUE(fs::is_empty(dir_ / "cwd")) << what << ": the script created files\n" << r.script;
  }

  fs::path dir_;
};

TEST_F(BashTest, ScriptsOfCorpusSpecsRunOnlySrunWithTheirArgv) {
  int checked = 0;
  for (const std::string target : {"spec", "sbatch"}) {
    for (const auto& f : CorpusFiles(target)) {
      json in = json::parse(Slurp(f), nullptr, false);
      if (in.is_discarded()) continue;
      auto spec = ParseSpec(in);
      if (!spec.ok()) continue;
      if (spec->id.empty()) spec->id = "fuzz-id";
      for (unsigned variant = 0; variant < 3; ++variant) CheckScript(*spec, variant, f.string());
      ++checked;
    }
  }
  EXPECT_GE(checked, 5) << "too few valid specs in the corpora";
}

// ShellQuote as bash reads it, against the model the fuzzer uses.
TEST_F(BashTest, ShellQuoteRoundTripsThroughBash) {
  std::vector<std::string> samples = {"",
                                      "plain",
                                      "it's",
                                      "''",
                                      "'\\''",
                                      "\"$HOME\"",
                                      "$(touch pwned)",
                                      "`touch pwned`",
                                      "a\nb",
                                      "\r\n",
                                      "; touch pwned #",
                                      "\\",
                                      "\\'",
                                      "ünïcødé ✓",
                                      "tab\there",
                                      "*",
                                      "~",
                                      "!!",
                                      "{a,b}",
                                      "-n",
                                      "\x01\x7f\xff"};
  for (const auto& f : CorpusFiles("sbatch")) samples.push_back(Slurp(f));
  for (const auto& s : samples) {
    if (s.find('\0') != std::string::npos) continue;  // no argv carries a NUL
    EXPECT_EQ(CheckShellQuote(s), "");
    fs::path script = dir_ / "quote.sh", out = dir_ / "quoted";
    std::ofstream(script, std::ios::binary)
        << "printf '%s' " << ShellQuote(s) << " > " << ShellQuote(out.string()) << "\n";
    ASSERT_EQ(RunProcess({"bash", script}, {}, dir_ / "cwd"), 0) << s;
    EXPECT_EQ(Slurp(out), s);
  }
  EXPECT_TRUE(fs::is_empty(dir_ / "cwd"));
}

// The model refuses what bash would expand: the fuzzer cannot pass a script
// with unquoted user text.
TEST(ShellWords, RefusesExpansionsAndAcceptsQuotedWords) {
  std::string error;
  for (const char* bad :
       {"echo $HOME\n", "echo `id`\n", "a;b\n", "a|b\n", "a&\n", "a>b\n", "(a)\n", "a*\n", "~/x\n",
        "#c\n", "echo \"x\"\n", "echo 'open\n", "a\r\n", "a {b}\n", "a"})
    EXPECT_FALSE(SplitShellCommands(bad, &error)) << bad;
  auto ok = SplitShellCommands("exec srun --o='a b'\\''c' \\\n  '$(x)' x\\'y\n", &error);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(*ok,
            (std::vector<std::vector<std::string>>{{"exec", "srun", "--o=a b'c", "$(x)", "x'y"}}));
}

}  // namespace
}  // namespace tfslurm::fuzz
