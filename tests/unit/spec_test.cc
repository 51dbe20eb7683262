#include "service/core/spec.h"
#include "tests/unit/spec_parsing.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <functional>

namespace tfslurm {
namespace {

using testing::Dump;
using testing::SpecErrors;

using nlohmann::json;

json ValidSpec() {
  return json::parse(R"({
    "id": "mnist-ps-01",
    "command": ["python3", "train.py", "--steps", "20000"],
    "cluster": {"ps": 2, "worker": 4},
    "resources": {"partition": "debug", "nodes": 3, "tasks_per_node": 2, "time_limit": "02:00:00"}
  })");
}

// The errors of parsing `spec`, as "field: reason" strings for readable failures.
bool HasError(const std::vector<FieldError>& errors, const std::string& field,
              const std::string& needle) {
  for (const auto& e : errors)
    if (e.field == field && e.reason.find(needle) != std::string::npos) return true;
  return false;
}

TEST(ParseSpec, AcceptsValidSpecWithDefaults) {
  auto r = ParseSpec(ValidSpec());
  ASSERT_TRUE(r.ok()) << Dump(r.status().fields());
  EXPECT_EQ(r->id, "mnist-ps-01");
  EXPECT_EQ(r->resources.Tasks(), 6);
  EXPECT_EQ(r->resources.time_limit_minutes, 120);
  EXPECT_FALSE(r->resources.mem_per_task_mb.has_value());
  EXPECT_EQ(r->placement.kind, PlacementKind::kSpread);
  EXPECT_EQ(r->success, SuccessPolicy::kAuto);
  EXPECT_EQ(r->restart.max_restarts, 3);
}

TEST(ParseSpec, RoundTripsThroughCanonicalJson) {
  json in = ValidSpec();
  in["env"] = {{"DATA_DIR", "/scratch/x"}};
  in["placement"] = json::array({"ps", "worker", "ps", "worker", "worker", "worker"});
  in["restart"] = {{"max_restarts", 1}, {"on", {"timeout"}}};
  in["resources"]["mem_per_task_mb"] = 1500;
  auto first = ParseSpec(in);
  ASSERT_TRUE(first.ok()) << Dump(first.status().fields());
  auto second = ParseSpec(first->ToJson());
  ASSERT_TRUE(second.ok()) << Dump(second.status().fields());
  EXPECT_EQ(first->ToJson(), second->ToJson());
}

TEST(ParseSpec, RefusesUnknownFieldsAtEveryLevel) {
  json s = ValidSpec();
  s["comand"] = {"x"};
  s["resources"]["node"] = 3;
  auto errors = SpecErrors(s);
  EXPECT_TRUE(HasError(errors, "comand", "unknown field")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "resources.node", "unknown field")) << Dump(errors);
}

TEST(ParseSpec, ReportsEveryBadFieldAtOnceWithValue) {
  json s = ValidSpec();
  s["id"] = "Bad ID!";
  s["resources"]["nodes"] = 0;
  s["resources"]["time_limit"] = "soon";
  s["success"] = "whenever";
  auto errors = SpecErrors(s);
  EXPECT_TRUE(HasError(errors, "id", "\"Bad ID!\"")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "resources.nodes", "got 0")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "resources.time_limit", "\"soon\"")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "success", "auto | chief | worker0 | all_workers")) << Dump(errors);
}

TEST(ParseSpec, CommandMustBeNonEmptyArgvOfStrings) {
  json s = ValidSpec();
  s["command"] = "python3 train.py";
  EXPECT_TRUE(HasError(SpecErrors(s), "command", "non-empty array"));
  s["command"] = json::array({"python3", 7});
  EXPECT_TRUE(HasError(SpecErrors(s), "command[1]", "must be a string"));
  s["command"] = json::array({""});
  EXPECT_TRUE(HasError(SpecErrors(s), "command[0]", "must not be empty"));
  s.erase("command");
  EXPECT_TRUE(HasError(SpecErrors(s), "command", "is required"));
}

TEST(ParseSpec, RefusesNulBytesAndOversizedCommands) {
  json s = ValidSpec();
  s["command"] = json::array({"python3", std::string("a\0b", 3)});
  EXPECT_TRUE(HasError(SpecErrors(s), "command[1]", "NUL"));
  s["command"] = json::array({"python3", std::string(70000, 'x')});
  EXPECT_TRUE(HasError(SpecErrors(s), "command[1]", "at most"));
}

TEST(ParseSpec, EnvNamesMustBeValidAndNotReserved) {
  json s = ValidSpec();
  s["env"] = {{"1BAD", "x"}, {"TF_CONFIG", "{}"}, {"SLURM_JOB_ID", "1"}, {"OK", 5}};
  auto errors = SpecErrors(s);
  EXPECT_TRUE(HasError(errors, "env.1BAD", "not a valid environment variable name"))
      << Dump(errors);
  EXPECT_TRUE(HasError(errors, "env.TF_CONFIG", "set by tfslurm")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "env.SLURM_JOB_ID", "set by tfslurm")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "env.OK", "must be a string")) << Dump(errors);
}

TEST(ParseSpec, ClusterMustMatchTaskCount) {
  json s = ValidSpec();
  s["cluster"] = {{"ps", 2}, {"worker", 3}};
  EXPECT_TRUE(HasError(SpecErrors(s), "cluster", "has 5 tasks"));
  s["cluster"] = {{"ps", 6}};
  EXPECT_TRUE(HasError(SpecErrors(s), "cluster", "at least one chief or worker"));
  s["cluster"] = {{"chief", 2}, {"worker", 4}};
  EXPECT_TRUE(HasError(SpecErrors(s), "cluster.chief", "from 0 to 1"));
}

TEST(ParseSpec, ExplicitPlacementMustMatchCluster) {
  json s = ValidSpec();
  s["placement"] = json::array({"ps", "ps", "worker"});
  EXPECT_TRUE(HasError(SpecErrors(s), "placement", "lists 3 roles but the job has 6 tasks"));
  s["placement"] = json::array({"ps", "worker", "worker", "worker", "worker", "worker"});
  EXPECT_TRUE(HasError(SpecErrors(s), "placement", "has 1 x ps but cluster.ps is 2"));
  s["placement"] = json::array({"ps", "boss", "ps", "worker", "worker", "worker"});
  EXPECT_TRUE(HasError(SpecErrors(s), "placement[1]", "\"boss\""));
}

TEST(ParseSpec, SuccessPolicyMustFitCluster) {
  json s = ValidSpec();
  s["success"] = "chief";
  EXPECT_TRUE(HasError(SpecErrors(s), "success", "cluster.chief is 0"));
}

TEST(ParseSpec, MemoryAndNetworkAndPaths) {
  json s = ValidSpec();
  s["resources"]["mem_per_task_mb"] = "lots";
  s["network"] = {{"address", "interface:ib0; rm -rf /"}};
  s["workdir"] = "relative/dir";
  s["model_dir"] = 3;
  auto errors = SpecErrors(s);
  EXPECT_TRUE(HasError(errors, "resources.mem_per_task_mb", "\"auto\" or a whole number"))
      << Dump(errors);
  EXPECT_TRUE(HasError(errors, "network.address", "interface:NAME")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "workdir", "absolute path")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "model_dir", "must be a string")) << Dump(errors);
}

TEST(ParseSpec, SignalGraceMustComeBeforeTheEnd) {
  json s = ValidSpec();
  s["resources"]["time_limit"] = "1";
  EXPECT_TRUE(HasError(SpecErrors(s), "checkpoint.signal_grace_s",
                       "not shorter than resources.time_limit"));
  // The default, which the user never set, is named as such, and the fix
  // has the numbers: a lower grace, or a limit past the grace.
  EXPECT_TRUE(HasError(SpecErrors(s), "checkpoint.signal_grace_s",
                       "is 120 s (the default), not shorter than resources.time_limit (00:01:00, "
                       "60 s): the checkpoint signal would come before the job starts; lower "
                       "checkpoint.signal_grace_s below 60 (e.g. 30), or raise "
                       "resources.time_limit to at least 00:03:00"))
      << Dump(SpecErrors(s));
  s["checkpoint"] = {{"signal_grace_s", 90}};
  EXPECT_TRUE(HasError(SpecErrors(s), "checkpoint.signal_grace_s", "is 90 s, not shorter"))
      << Dump(SpecErrors(s));
  s["checkpoint"] = {{"signal_grace_s", 30}};
  EXPECT_TRUE(ParseSpec(s).ok());
}

TEST(ParseSpec, TimeLimitsUpToSlurmsLargestAreTakenAndTheErrorNamesIt) {
  json s = ValidSpec();
  s["checkpoint"] = {{"signal_grace_s", 30}};
  s["resources"]["time_limit"] = "24855-03:14:00";
  auto longest = ParseSpec(s);
  ASSERT_TRUE(longest.ok()) << longest.status().message();
  EXPECT_EQ(longest->resources.time_limit_minutes, kMaxTimeLimitMinutes);
  EXPECT_EQ(FormatSlurmTime(kMaxTimeLimitMinutes), "24855-03:14:00");
  s["resources"]["time_limit"] = "24855-03:14:07";  // 2^31 - 1 s, a minute more once rounded up
  EXPECT_TRUE(
      HasError(SpecErrors(s), "resources.time_limit",
               "must be a Slurm time from 1 minute to 24855-03:14:00 (the most Slurm reads"))
      << Dump(SpecErrors(s));
  s["resources"]["time_limit"] = "UNLIMITED";
  EXPECT_TRUE(HasError(SpecErrors(s), "resources.time_limit", "tfslurm needs a limit"))
      << Dump(SpecErrors(s));
}

// YAML's "resources:" followed by keys not indented under it: resources is
// null and its keys land at the top level.
TEST(ParseSpec, AFieldOfAnObjectAtTheTopLevelIsSaidToBelongUnderIt) {
  json s = ValidSpec();
  s["resources"] = nullptr;
  s["nodes"] = 3;
  s["tasks_per_node"] = 2;
  s["max_restarts"] = 2;
  auto errors = SpecErrors(s);
  EXPECT_TRUE(HasError(errors, "nodes",
                       "unknown field here: it is a field of resources (resources.nodes); in "
                       "YAML, indent it under `resources:`"))
      << Dump(errors);
  EXPECT_TRUE(HasError(errors, "tasks_per_node", "a field of resources (resources.tasks_per_node)"))
      << Dump(errors);
  EXPECT_TRUE(HasError(errors, "max_restarts", "a field of restart (restart.max_restarts)"))
      << Dump(errors);
  EXPECT_TRUE(HasError(errors, "resources",
                       "must be an object, got null (in YAML, `resources:` with nothing after "
                       "it: its fields go on the lines below it, indented further"))
      << Dump(errors);
}

TEST(ParseSpec, AnUnknownFieldSuggestsTheNearestKnownOne) {
  json s = ValidSpec();
  s["restart"] = {{"max_restart", 2}};
  s["comand"] = {"x"};
  s["bogus_field_far_away"] = 1;
  auto errors = SpecErrors(s);
  EXPECT_TRUE(HasError(errors, "restart.max_restart", "did you mean 'restart.max_restarts'?"))
      << Dump(errors);
  EXPECT_TRUE(HasError(errors, "comand", "did you mean 'command'?")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "bogus_field_far_away", "unknown field; allowed here:"))
      << Dump(errors);
}

TEST(ParseSpec, RestartPolicy) {
  json s = ValidSpec();
  s["restart"] = {{"max_restarts", 101}, {"on", {"preempted", "sunspots"}}};
  auto errors = SpecErrors(s);
  EXPECT_TRUE(HasError(errors, "restart.max_restarts", "from 0 to 100")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "restart.on[1]", "\"sunspots\"")) << Dump(errors);
}

TEST(ParseSpec, WrongTypesEverywhereGiveErrorsNotCrashes) {
  for (const char* text :
       {R"([])", R"("x")", R"(null)", R"({"cluster": []})", R"({"resources": 5})",
        R"({"cluster": {"ps": 1.5}})", R"({"cluster": {"worker": 99999999999999999999}})",
        R"({"env": []})", R"({"restart": {"on": "timeout"}})"}) {
    auto r = ParseSpec(json::parse(text));
    EXPECT_FALSE(r.ok()) << text;
    EXPECT_FALSE(r.status().fields().empty()) << text;
  }
}

// `depth` arrays around "x", built without recursion.
json Nested(int depth) {
  json v = "x";
  for (int i = 0; i < depth; ++i) {
    json a = json::array();
    a.push_back(std::move(v));
    v = std::move(a);
  }
  return v;
}

// Runs `fn` on a thread with a `bytes` stack: recursion that grows with the
// input overflows it.
void OnSmallStack(size_t bytes, std::function<void()> fn) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t thread;
  auto body = [](void* f) -> void* {
    (*static_cast<std::function<void()>*>(f))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, body, &fn), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

TEST(ParseSpec, ValueNestedTooDeepIsNamedNotRendered) {
  json s = ValidSpec();
  s["command"] = json::array();
  s["command"].push_back(Nested(100000));
  s["env"] = json::object();
  s["env"]["DEEP"] = Nested(100000);
  s["workdir"] = Nested(100000);
  s["placement"] = json::object();
  s["placement"]["x"] = Nested(100000);
  std::vector<FieldError> errors;
  // 256 KiB, as the fuzzers run ParseSpec: dumping 100000 levels needs far more.
  OnSmallStack(256 * 1024, [&] { errors = SpecErrors(s); });
  EXPECT_TRUE(
      HasError(errors, "command[0]", "must be a string, got an array nested more than 8 levels"))
      << Dump(errors);
  EXPECT_TRUE(HasError(errors, "env.DEEP", "got an array nested more than 8 levels"))
      << Dump(errors);
  EXPECT_TRUE(HasError(errors, "workdir", "got an array nested more than 8 levels"))
      << Dump(errors);
  EXPECT_TRUE(HasError(errors, "placement", "got an object nested more than 8 levels"))
      << Dump(errors);
  OnSmallStack(256 * 1024, [&] { s = json(); });  // destroyed without recursion too
}

TEST(ParseSpec, ValueNestedEightLevelsIsStillShown) {
  json s = ValidSpec();
  s["command"] = json::array({Nested(8)});
  EXPECT_TRUE(HasError(SpecErrors(s), "command[0]", "got an array [[[[[[[[\"x\"]]]]]]]]"));
  s["command"] = json::array({Nested(9)});
  EXPECT_TRUE(HasError(SpecErrors(s), "command[0]", "got an array nested more than 8 levels"));
}

TEST(ParseSpec, FieldErrorsAreCappedWithACount) {
  json s = ValidSpec();
  s["env"] = json::object();
  for (int i = 0; i < 100000; ++i) s["env"]["1BAD" + std::to_string(i)] = "x";
  auto r = ParseSpec(s);
  ASSERT_FALSE(r.ok());
  // "env: has 100000 entries", then one per bad name.
  EXPECT_EQ(r.status().message(), "the experiment spec has 100001 invalid fields");
  const auto& fields = r.status().fields();
  ASSERT_EQ(fields.size(), kMaxSpecFieldErrors + 1);
  EXPECT_EQ(fields[0].field, "env");
  EXPECT_EQ(fields[1].field, "env.1BAD0");
  EXPECT_EQ(fields.back().field, "");
  EXPECT_EQ(fields.back().reason, "and 99901 more errors (only the first 100 are listed)");
}

TEST(ParseSpec, ExactlyTheCapOfErrorsHasNoCount) {
  json s = ValidSpec();
  s["env"] = json::object();
  for (int i = 0; i < 100; ++i) s["env"]["1BAD" + std::to_string(i)] = "x";
  SpecLimits limits;
  limits.max_env_entries = 1000;
  auto r = ParseSpec(s, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().fields().size(), 100u);
  EXPECT_NE(r.status().fields().back().field, "");
  s["env"]["1BAD100"] = "x";
  r = ParseSpec(s, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "the experiment spec has 101 invalid fields");
  ASSERT_EQ(r.status().fields().size(), 101u);
  EXPECT_EQ(r.status().fields().back().reason, "and 1 more error (only the first 100 are listed)");
}

TEST(SlurmTime, ParsesSlurmFormats) {
  EXPECT_EQ(ParseSlurmTimeMinutes("90"), 90);
  EXPECT_EQ(ParseSlurmTimeMinutes("10:30"), 11);  // MM:SS rounds up
  EXPECT_EQ(ParseSlurmTimeMinutes("02:00:00"), 120);
  EXPECT_EQ(ParseSlurmTimeMinutes("1-00"), 24 * 60);
  EXPECT_EQ(ParseSlurmTimeMinutes("1-02:30"), 24 * 60 + 150);
  EXPECT_EQ(ParseSlurmTimeMinutes("1-02:30:01"), 24 * 60 + 151);
  EXPECT_FALSE(ParseSlurmTimeMinutes("soon").has_value());
  EXPECT_FALSE(ParseSlurmTimeMinutes("-5").has_value());
  EXPECT_EQ(FormatSlurmTime(125), "02:05:00");
  EXPECT_EQ(FormatSlurmTime(24 * 60 + 1), "1-00:01:00");
}

json TorchSpec() {
  return json::parse(R"({
    "id": "ddp-01",
    "framework": "pytorch",
    "command": ["python3", "train.py"],
    "resources": {"nodes": 3, "tasks_per_node": 2}
  })");
}

TEST(ParseSpec, PytorchNeedsNoClusterAndHasNoRoles) {
  auto r = ParseSpec(TorchSpec());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->framework, Framework::kPytorch);
  EXPECT_EQ(r->cluster.Total(), 0);
  EXPECT_FALSE(r->pytorch.omp_num_threads.has_value());
  // The canonical form names the framework, has no TF fields, and parses back.
  json canonical = r->ToJson();
  EXPECT_EQ(canonical["framework"], "pytorch");
  EXPECT_FALSE(canonical.contains("cluster"));
  EXPECT_FALSE(canonical.contains("success"));
  EXPECT_EQ(canonical["pytorch"]["omp_num_threads"], "auto");
  auto again = ParseSpec(canonical);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->ToJson(), canonical);
  // TensorFlow stays the default, and says so.
  EXPECT_EQ(ParseSpec(ValidSpec())->ToJson()["framework"], "tensorflow");
}

TEST(ParseSpec, TensorflowFieldsInAPytorchSpecAreErrors) {
  json spec = TorchSpec();
  spec["cluster"] = {{"worker", 6}};
  spec["placement"] = "spread";
  spec["success"] = "auto";
  auto errors = SpecErrors(spec);
  for (const char* field : {"cluster", "placement", "success"})
    EXPECT_TRUE(HasError(errors, field, "does not apply to framework pytorch")) << Dump(errors);
  EXPECT_EQ(errors.size(), 3u) << Dump(errors);
}

TEST(ParseSpec, PytorchFieldsInATensorflowSpecAreErrors) {
  json spec = ValidSpec();
  spec["pytorch"] = {{"omp_num_threads", 2}};
  auto errors = SpecErrors(spec);
  EXPECT_TRUE(HasError(errors, "pytorch", "applies only to framework pytorch")) << Dump(errors);
  spec.erase("pytorch");
  spec["framework"] = "mxnet";
  EXPECT_TRUE(HasError(SpecErrors(spec), "framework",
                       "must be one of tensorflow | pytorch | jax, got \"mxnet\""));
}

json JaxSpec() {
  json spec = TorchSpec();
  spec["id"] = "jax-01";
  spec["framework"] = "jax";
  return spec;
}

TEST(ParseSpec, JaxNeedsNoClusterAndHasNoRoles) {
  auto r = ParseSpec(JaxSpec());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->framework, Framework::kJax);
  EXPECT_EQ(r->cluster.Total(), 0);
  json canonical = r->ToJson();
  EXPECT_EQ(canonical["framework"], "jax");
  for (const char* field : {"cluster", "placement", "success", "roles", "pytorch"})
    EXPECT_FALSE(canonical.contains(field)) << field;
  auto again = ParseSpec(canonical);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->ToJson(), canonical);
}

TEST(ParseSpec, FieldsThatDoNotApplyToJaxAreErrors) {
  json spec = JaxSpec();
  spec["cluster"] = {{"worker", 6}};
  spec["placement"] = "spread";
  spec["success"] = "auto";
  spec["roles"] = {{"worker", {{"nodes", 1}}}};
  spec["pytorch"] = {{"omp_num_threads", 2}};
  auto errors = SpecErrors(spec);
  for (const char* field : {"cluster", "placement", "success", "roles"})
    EXPECT_TRUE(HasError(errors, field, "does not apply to framework jax")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "success", "success is every process exiting 0")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "pytorch",
                       "applies only to framework pytorch; this spec's framework is jax"))
      << Dump(errors);
  EXPECT_EQ(errors.size(), 5u) << Dump(errors);
  SpecLimits limits;
  limits.max_tasks = 4;
  auto r = ParseSpec(JaxSpec(), limits);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(HasError(r.status().fields(), "resources", "give 6 ranks"));
}

// Issue 49: the cap is a site setting whose default holds a 16,384-GPU
// job; a spec over it is refused naming the cap and where it is set.
TEST(ParseSpec, TheDefaultTaskCapHolds16384Tasks) {
  EXPECT_GE(SpecLimits{}.max_tasks, 16384);
  json torch = TorchSpec();
  torch["resources"] = {{"nodes", 2048}, {"tasks_per_node", 8}};
  auto r = ParseSpec(torch);
  ASSERT_TRUE(r.ok()) << Dump(r.status().fields());
  EXPECT_EQ(r->resources.Tasks(), 16384);
  json tf = ValidSpec();
  tf["cluster"] = {{"chief", 1}, {"ps", 383}, {"worker", 16000}};
  tf["resources"] = {{"nodes", 2048}, {"tasks_per_node", 8}};
  r = ParseSpec(tf);
  ASSERT_TRUE(r.ok()) << Dump(r.status().fields());
  EXPECT_EQ(r->cluster.Total(), 16384);
}

TEST(ParseSpec, ASpecOverTheTaskCapIsRefusedNamingTheCapAndWhereItIsSet) {
  SpecLimits limits;
  limits.max_tasks = 100;
  const std::string where =
      "at most 100 allowed (the site's cap on tasks, " + std::string(kMaxTasksSetting) + ")";
  EXPECT_EQ(std::string(kMaxTasksSetting), "tfslurmd --max-tasks-per-experiment");
  json torch = TorchSpec();
  torch["resources"] = {{"nodes", 13}, {"tasks_per_node", 8}};
  auto r = ParseSpec(torch, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(HasError(r.status().fields(), "resources", "give 104 ranks (nodes 13 x "))
      << Dump(r.status().fields());
  EXPECT_TRUE(HasError(r.status().fields(), "resources", where)) << Dump(r.status().fields());
  torch["resources"] = {{"nodes", 25}, {"tasks_per_node", 4}};
  EXPECT_TRUE(ParseSpec(torch, limits).ok()) << "exactly the cap is allowed";

  json tf = ValidSpec();
  tf["cluster"] = {{"ps", 2}, {"worker", 101}};
  tf["resources"] = {{"nodes", 103}, {"tasks_per_node", 1}};
  r = ParseSpec(tf, limits);
  ASSERT_FALSE(r.ok());
  const auto& errors = r.status().fields();
  EXPECT_TRUE(HasError(errors, "cluster.worker", "is 101; " + where)) << Dump(errors);
  tf["cluster"] = {{"ps", 50}, {"worker", 51}};
  tf["resources"] = {{"nodes", 101}, {"tasks_per_node", 1}};
  r = ParseSpec(tf, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(HasError(r.status().fields(), "cluster", "has 101 tasks; " + where))
      << Dump(r.status().fields());
  EXPECT_EQ(r.status().fields().size(), 1u) << Dump(r.status().fields());
  // Below zero is a range error as before, not the cap's.
  tf["cluster"] = {{"ps", -1}, {"worker", 4}};
  EXPECT_TRUE(HasError(SpecErrors(tf), "cluster.ps", "must be from 0 to 16384, got -1"));
}

TEST(ParseSpec, JaxProcessVariablesAreTfslurms) {
  json spec = JaxSpec();
  spec["env"] = {
      {"JAX_COORDINATOR_ADDRESS", "n1:1"}, {"JAX_NUM_PROCESSES", "6"}, {"JAX_PROCESS_ID", "0"},
      {"JAX_LOCAL_DEVICE_IDS", "0"},       {"JAX_PLATFORMS", "cpu"},   {"RANK", "0"}};
  auto errors = SpecErrors(spec);
  for (const char* name : {"env.JAX_COORDINATOR_ADDRESS", "env.JAX_NUM_PROCESSES",
                           "env.JAX_PROCESS_ID", "env.JAX_LOCAL_DEVICE_IDS"})
    EXPECT_TRUE(HasError(errors, name, "set by tfslurm for every process of a jax experiment"))
        << Dump(errors);
  EXPECT_EQ(errors.size(), 4u) << Dump(errors);
  // Other frameworks' programs may use those names for their own purposes.
  json torch = TorchSpec();
  torch["env"] = {{"JAX_PROCESS_ID", "0"}};
  EXPECT_TRUE(ParseSpec(torch).ok());
}

TEST(ParseSpec, PytorchRanksVariablesAreTfslurms) {
  json spec = TorchSpec();
  spec["env"] = {
      {"MASTER_PORT", "29500"}, {"RANK", "0"}, {"OMP_NUM_THREADS", "4"}, {"NCCL_DEBUG", "INFO"}};
  auto errors = SpecErrors(spec);
  EXPECT_TRUE(HasError(errors, "env.MASTER_PORT", "set by tfslurm for every rank")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "env.RANK", "set by tfslurm for every rank")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "env.OMP_NUM_THREADS", "use pytorch.omp_num_threads"))
      << Dump(errors);
  EXPECT_EQ(errors.size(), 3u) << Dump(errors);
  // A TensorFlow program may use those names for its own purposes.
  json tf = ValidSpec();
  tf["env"] = {{"RANK", "0"}, {"OMP_NUM_THREADS", "4"}};
  EXPECT_TRUE(ParseSpec(tf).ok());
}

TEST(ParseSpec, PytorchOptionsAreChecked) {
  json spec = TorchSpec();
  spec["pytorch"] = {{"omp_num_threads", 0}};
  EXPECT_TRUE(HasError(SpecErrors(spec), "pytorch.omp_num_threads", "from 1 to 1024, got 0"));
  spec["pytorch"] = {{"omp_num_threads", "many"}};
  EXPECT_TRUE(HasError(SpecErrors(spec), "pytorch.omp_num_threads", "must be \"auto\""));
  spec["pytorch"] = {{"threads", 2}};
  EXPECT_TRUE(HasError(SpecErrors(spec), "pytorch.threads", "unknown field"));
  spec["pytorch"] = {{"omp_num_threads", 3}};
  EXPECT_EQ(ParseSpec(spec)->pytorch.omp_num_threads, 3);
  SpecLimits limits;
  limits.max_tasks = 4;
  auto r = ParseSpec(TorchSpec(), limits);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(HasError(r.status().fields(), "resources", "give 6 ranks"));
}

TEST(ParseSpec, StallTimeoutIsOffOrAtLeastFiveSeconds) {
  json spec = ValidSpec();
  EXPECT_EQ(ParseSpec(spec)->stall_timeout_s, 0);
  EXPECT_EQ(ParseSpec(spec)->ToJson()["progress"]["stall_timeout_s"], 0);
  spec["progress"] = {{"stall_timeout_s", 600}};
  EXPECT_EQ(ParseSpec(spec)->stall_timeout_s, 600);
  for (json bad : {json(3), json(-1), json(604801), json("10m"), json(1.5)}) {
    spec["progress"] = {{"stall_timeout_s", bad}};
    EXPECT_TRUE(
        HasError(SpecErrors(spec), "progress.stall_timeout_s", "must be 0 (off) or a whole"))
        << bad.dump();
  }
  spec["progress"] = {{"stall_timeout", 60}};
  EXPECT_TRUE(HasError(SpecErrors(spec), "progress.stall_timeout", "unknown field"));
  spec.erase("progress");
  spec["restart"] = {{"on", {"stalled", "hung"}}};
  auto errors = SpecErrors(spec);
  EXPECT_TRUE(HasError(errors, "restart.on[1]", "stalled | startup_error, got \"hung\""))
      << Dump(errors);
  EXPECT_TRUE(ParseSpec(ValidSpec())->restart.on.contains(EndReason::kStalled)) << "on by default";
  // A start-up failure repeats: restarted only when the user asks.
  EXPECT_FALSE(ParseSpec(ValidSpec())->restart.on.contains(EndReason::kStartupError));
  spec["restart"] = {{"on", {"startup_error"}}};
  EXPECT_TRUE(ParseSpec(spec)->restart.on.contains(EndReason::kStartupError));
}

}  // namespace
}  // namespace tfslurm

namespace tfslurm {
namespace {

TEST(ParseSpec, RestartFlagsAreCheckedWithTheirValues) {
  json s = ValidSpec();
  s["restart"] = {{"in_allocation", "yes"}, {"max_task_restarts", 101}};
  auto errors = SpecErrors(s);
  EXPECT_TRUE(HasError(errors, "restart.in_allocation", "must be true")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "restart.in_allocation", "\"yes\"")) << Dump(errors);
  EXPECT_TRUE(HasError(errors, "restart.max_task_restarts", "got 101")) << Dump(errors);
}

TEST(ParseSpec, SpareNodesAreCheckedAndNeedOneNodeShapeAndRestartsInPlace) {
  json s = ValidSpec();
  s["resources"]["spare_nodes"] = 1;
  auto r = ParseSpec(s);
  ASSERT_TRUE(r.ok()) << Dump(r.status().fields());
  EXPECT_EQ(r->resources.spare_nodes, 1);
  EXPECT_EQ(r->ToJson()["resources"]["spare_nodes"], 1);
  EXPECT_FALSE(ParseSpec(ValidSpec())->ToJson()["resources"].contains("spare_nodes"))
      << "absent when 0, as before";

  s["resources"]["spare_nodes"] = 65;
  EXPECT_TRUE(HasError(SpecErrors(s), "resources.spare_nodes", "got 65")) << Dump(SpecErrors(s));
  s["resources"]["spare_nodes"] = "one";
  EXPECT_TRUE(HasError(SpecErrors(s), "resources.spare_nodes", "\"one\"")) << Dump(SpecErrors(s));

  json off = ValidSpec();
  off["resources"]["spare_nodes"] = 2;
  off["restart"] = {{"in_allocation", false}};
  EXPECT_TRUE(HasError(SpecErrors(off), "resources.spare_nodes", "restart.in_allocation is false"))
      << Dump(SpecErrors(off));

  json roles = ValidSpec();
  roles["resources"]["spare_nodes"] = 1;
  roles["roles"] = {{"ps", {{"nodes", 1}}}};
  EXPECT_TRUE(HasError(SpecErrors(roles), "resources.spare_nodes", "heterogeneous job"))
      << Dump(SpecErrors(roles));
}

TEST(ParseSpec, MaxTaskRestartsAppliesOnlyToTensorflowWithParameterServers) {
  json s = ValidSpec();  // TensorFlow with ps
  s["restart"] = {{"max_task_restarts", 5}};
  auto r = ParseSpec(s);
  ASSERT_TRUE(r.ok()) << Dump(r.status().fields());
  EXPECT_EQ(r->restart.max_task_restarts, 5);
  EXPECT_EQ(r->ToJson()["restart"]["max_task_restarts"], 5);
  EXPECT_EQ(ParseSpec(ValidSpec())->restart.max_task_restarts, 3) << "the default";

  json no_ps = s;
  no_ps["cluster"] = {{"worker", 6}};
  EXPECT_TRUE(HasError(SpecErrors(no_ps), "restart.max_task_restarts",
                       "this spec has no ps: every worker takes part in each step"))
      << Dump(SpecErrors(no_ps));

  json torch = s;
  torch.erase("cluster");
  torch["framework"] = "pytorch";
  EXPECT_TRUE(HasError(SpecErrors(torch), "restart.max_task_restarts",
                       "framework pytorch: a rank cannot rejoin its peers alone"))
      << Dump(SpecErrors(torch));
  // Where it does not apply, the canonical spec does not carry it either, so
  // a stored spec parses again.
  torch["restart"].erase("max_task_restarts");
  auto parsed = ParseSpec(torch);
  ASSERT_TRUE(parsed.ok()) << Dump(parsed.status().fields());
  EXPECT_FALSE(parsed->ToJson()["restart"].contains("max_task_restarts"));
  EXPECT_TRUE(ParseSpec(parsed->ToJson()).ok());
}

}  // namespace
}  // namespace tfslurm
