#include "service/sweeps/sweep_spec.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "service/sweeps/sweep_space.h"

namespace tfslurm::sweeps {
namespace {

using nlohmann::json;

json ValidSweep() {
  return json::parse(R"({
    "id": "lr",
    "experiment": {
      "command": ["python3", "train.py", "--steps=100"],
      "cluster": {"ps": 1, "worker": 1},
      "resources": {"nodes": 2, "time_limit": "10:00"}
    },
    "parameters": {
      "env.LR": {"log_range": [0.0001, 0.1], "count": 4},
      "arg.--batch": {"values": [32, 64]}
    },
    "max_concurrent": 2,
    "objective": {"tag": "loss", "goal": "min"},
    "early_stopping": {"rule": "asha", "rungs": [20, 40], "reduction_factor": 2}
  })");
}

std::string Dump(const Status& s) {
  std::string out = s.message() + "\n";
  for (const auto& e : s.fields()) out += e.field + ": " + e.reason + "\n";
  return out;
}

bool HasError(const Status& s, const std::string& field, const std::string& needle) {
  for (const auto& e : s.fields())
    if (e.field == field && e.reason.find(needle) != std::string::npos) return true;
  return false;
}

TEST(ParseSweepSpec, AcceptsAGridWithDefaults) {
  auto s = ParseSweepSpec(ValidSweep());
  ASSERT_TRUE(s.ok()) << Dump(s.status());
  EXPECT_EQ(s->search, SearchKind::kGrid);
  EXPECT_EQ(s->max_trials, 8) << "a grid's trials are its points: 4 x 2";
  EXPECT_EQ(s->max_concurrent, 2);
  EXPECT_EQ(s->early_stopping.rule, StoppingRule::kAsha);
  EXPECT_EQ(s->early_stopping.rungs, (std::vector<int64_t>{20, 40}));
  EXPECT_FALSE(s->objective.at_step);
}

TEST(ParseSweepSpec, RoundTripsThroughCanonicalJson) {
  json in = ValidSweep();
  in["search"] = {{"type", "random"}, {"seed", 7}};
  in["max_trials"] = 5;
  in["max_node_hours"] = 2.5;
  in["objective"]["at"] = 100;
  auto s = ParseSweepSpec(in);
  ASSERT_TRUE(s.ok()) << Dump(s.status());
  auto again = ParseSweepSpec(s->ToJson());
  ASSERT_TRUE(again.ok()) << Dump(again.status());
  EXPECT_EQ(again->ToJson(), s->ToJson());
  EXPECT_EQ(again->seed, 7u);
  EXPECT_EQ(*again->max_node_hours, 2.5);
}

TEST(ParseSweepSpec, NamesEveryBadFieldWithValueAndWhatIsAllowed) {
  json in = ValidSweep();
  in["max_concurrent"] = 0;
  in["objective"]["goal"] = "lowest";
  in["early_stopping"]["rungs"] = {40, 20};
  in["parameters"]["env.1X"] = {{"values", {1}}};
  in["parameters"]["resources.nodes"] = {{"range", {4, 1}}, {"count", 2}};
  in["experiment"]["resources"]["nodes"] = 0;
  in["experiment"]["id"] = "mine";
  in["colour"] = "blue";
  auto s = ParseSweepSpec(in);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasError(s.status(), "max_concurrent", "from 1 to 100, got 0")) << Dump(s.status());
  EXPECT_TRUE(HasError(s.status(), "objective.goal", "min | max, got \"lowest\""));
  EXPECT_TRUE(HasError(s.status(), "early_stopping.rungs[1]", "above the rung before it (40)"));
  EXPECT_TRUE(HasError(s.status(), "parameters.env.1X", "'1X'"));
  EXPECT_TRUE(HasError(s.status(), "parameters.resources.nodes.range", "low < high, got [4,1]"));
  EXPECT_TRUE(HasError(s.status(), "experiment.resources.nodes", "got 0"));
  EXPECT_TRUE(HasError(s.status(), "experiment.id", "set per trial"));
  EXPECT_TRUE(HasError(s.status(), "colour", "unknown field"));
}

TEST(ParseSweepSpec, RequiresWhatItCannotGuess) {
  auto s = ParseSweepSpec(json::object());
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(HasError(s.status(), "experiment", "is required")) << Dump(s.status());
  EXPECT_TRUE(HasError(s.status(), "parameters", "is required"));
  EXPECT_TRUE(HasError(s.status(), "objective", "is required"));
  json random = ValidSweep();
  random["search"] = {{"type", "random"}};
  EXPECT_TRUE(HasError(ParseSweepSpec(random).status(), "max_trials", "required for a random"));
  json grid = ValidSweep();
  grid["parameters"]["env.LR"].erase("count");
  EXPECT_TRUE(HasError(ParseSweepSpec(grid).status(), "parameters.env.LR.count", "grid"));
}

TEST(ParseSweepSpec, RefusesAGridCutShortByMaxTrials) {
  json in = ValidSweep();
  in["max_trials"] = 5;
  auto s = ParseSweepSpec(in);
  EXPECT_TRUE(HasError(s.status(), "max_trials", "is 5 but the grid has 8 points"))
      << Dump(s.status());
}

TEST(ParseSweepSpec, RefusesTargetsATrialCannotSet) {
  json in = ValidSweep();
  in["parameters"]["model_dir"] = {{"values", {"/x"}}};
  in["parameters"]["arg.lr"] = {{"values", {1}}};
  in["parameters"]["Resources.Nodes"] = {{"values", {1}}};
  auto s = ParseSweepSpec(in);
  EXPECT_TRUE(HasError(s.status(), "parameters.model_dir", "own directory")) << Dump(s.status());
  EXPECT_TRUE(HasError(s.status(), "parameters.arg.lr", "starting with '-'"));
  EXPECT_TRUE(HasError(s.status(), "parameters.Resources.Nodes", "env.NAME"));
}

// ValidSweep with its grid in the order listed (its early stopping would
// shuffle it otherwise).
json ListedSweep() {
  json in = ValidSweep();
  in["search"] = {{"type", "grid"}, {"order", "listed"}};
  return in;
}

TEST(SweepSpace, GridIsTheProductInOdometerOrderWithLogPoints) {
  auto s = ParseSweepSpec(ListedSweep());
  ASSERT_TRUE(s.ok());
  std::vector<json> points = SweepPoints(*s);
  ASSERT_EQ(points.size(), 8u);
  // Names sort: arg.--batch before env.LR; the last turns fastest.
  EXPECT_EQ(points[0], json::parse(R"({"arg.--batch": 32, "env.LR": 0.0001})"));
  EXPECT_EQ(points[1], json::parse(R"({"arg.--batch": 32, "env.LR": 0.001})"));
  EXPECT_EQ(points[3], json::parse(R"({"arg.--batch": 32, "env.LR": 0.1})"));
  EXPECT_EQ(points[4], json::parse(R"({"arg.--batch": 64, "env.LR": 0.0001})"));
}

TEST(SweepSpace, AGridWithEarlyStoppingIsShuffledFromItsSeed) {
  auto shuffled = ParseSweepSpec(ValidSweep());
  ASSERT_TRUE(shuffled.ok()) << Dump(shuffled.status());
  EXPECT_EQ(shuffled->order, GridOrder::kShuffled) << "the default with early stopping";
  EXPECT_EQ(shuffled->ToJson()["search"], json::parse(R"({"type": "grid", "order": "shuffled",
                                                           "seed": 0})"));
  auto listed = ParseSweepSpec(ListedSweep());
  ASSERT_TRUE(listed.ok());
  std::vector<json> a = SweepPoints(*shuffled), b = SweepPoints(*listed);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(a, b);
  std::set<std::string> as, bs;
  for (const json& p : a) as.insert(p.dump());
  for (const json& p : b) bs.insert(p.dump());
  EXPECT_EQ(as, bs) << "the same points, each once";
  EXPECT_EQ(SweepPoints(*shuffled), a) << "the same seed, the same order";
  // The whole order, fixed by this code's generator (SplitMix64 driving a
  // Fisher-Yates shuffle): the same on every platform, and the same as a
  // separate implementation of the two (a few lines of Python, run once)
  // gives for seeds 0 and 5. A sweep stored with a seed keeps its trials'
  // parameters only while this holds.
  auto point = [](int batch, double lr) { return json{{"arg.--batch", batch}, {"env.LR", lr}}; };
  EXPECT_EQ(
      a, (std::vector<json>{point(32, 0.01), point(64, 0.001), point(32, 0.0001), point(32, 0.1),
                            point(64, 0.0001), point(64, 0.01), point(32, 0.001), point(64, 0.1)}));
  json seeded = ValidSweep();
  seeded["search"] = {{"seed", 5}};
  auto other = ParseSweepSpec(seeded);
  ASSERT_TRUE(other.ok()) << Dump(other.status());
  EXPECT_EQ(
      SweepPoints(*other),
      (std::vector<json>{point(32, 0.0001), point(64, 0.1), point(32, 0.1), point(32, 0.001),
                         point(64, 0.0001), point(64, 0.01), point(64, 0.001), point(32, 0.01)}))
      << "another seed, another order";
  auto again = ParseSweepSpec(other->ToJson());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(SweepPoints(*again), SweepPoints(*other)) << "the canonical form keeps the order";

  json plain = ValidSweep();
  plain["early_stopping"] = {{"rule", "none"}};
  auto none = ParseSweepSpec(plain);
  ASSERT_TRUE(none.ok()) << Dump(none.status());
  EXPECT_EQ(none->order, GridOrder::kListed) << "the default without early stopping";
  EXPECT_EQ(SweepPoints(*none), b);
}

TEST(ParseSweepSpec, RefusesAnOrderOrSeedThatDoesNotApply) {
  json seeded = ListedSweep();
  seeded["search"]["seed"] = 3;
  auto s = ParseSweepSpec(seeded);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(HasError(s.status(), "search.seed", "a grid of order shuffled")) << Dump(s.status());
  json random = ValidSweep();
  random["search"] = {{"type", "random"}, {"order", "shuffled"}};
  random["max_trials"] = 4;
  auto r = ParseSweepSpec(random);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(HasError(r.status(), "search.order", "grid only")) << Dump(r.status());
  json bad = ValidSweep();
  bad["search"] = {{"order", "sorted"}};
  auto b = ParseSweepSpec(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(HasError(b.status(), "search.order", "listed")) << Dump(b.status());
}

TEST(SweepSpace, IntegerRangesGiveIntegers) {
  json in = ValidSweep();
  in["parameters"] = {{"resources.cpus_per_task", {{"log_range", {1, 8}}, {"count", 4}}}};
  auto s = ParseSweepSpec(in);
  ASSERT_TRUE(s.ok()) << Dump(s.status());
  std::vector<json> points = SweepPoints(*s);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[1]["resources.cpus_per_task"], 2);
  EXPECT_TRUE(points[1]["resources.cpus_per_task"].is_number_integer());
  EXPECT_EQ(points[3]["resources.cpus_per_task"], 8);
}

TEST(SweepSpace, RandomSearchIsFixedByItsSeedAndStaysInRange) {
  json in = ValidSweep();
  in["search"] = {{"type", "random"}, {"seed", 42}};
  in["max_trials"] = 20;
  in["parameters"]["env.LR"].erase("count");
  auto s = ParseSweepSpec(in);
  ASSERT_TRUE(s.ok()) << Dump(s.status());
  std::vector<json> a = SweepPoints(*s), b = SweepPoints(*s);
  ASSERT_EQ(a.size(), 20u);
  EXPECT_EQ(a, b) << "the same seed, the same trials";
  std::set<double> distinct;
  for (const json& p : a) {
    const double lr = p["env.LR"].get<double>();
    EXPECT_GE(lr, 0.0001);
    EXPECT_LE(lr, 0.1);
    distinct.insert(lr);
    EXPECT_TRUE(p["arg.--batch"] == 32 || p["arg.--batch"] == 64);
  }
  EXPECT_EQ(distinct.size(), 20u) << "a continuous log range draws new values";
  // The generator's output is this code's, not the standard library's: these
  // values are the same on every platform and release.
  EXPECT_EQ(a[0].dump(), R"({"arg.--batch":64,"env.LR":0.000301808299679})");
  s->seed = 43;
  EXPECT_NE(SweepPoints(*s), a) << "another seed, other trials";
}

TEST(SweepSpace, TrialsSetEnvArgsAndFieldsAndAreCheckedAsSpecs) {
  json in = ListedSweep();
  in["parameters"]["cluster.worker"] = {{"values", {1}}};
  in["parameters"]["arg.--steps"] = {{"values", {50}}};
  auto s = ParseSweepSpec(in);
  ASSERT_TRUE(s.ok()) << Dump(s.status());
  auto trials = ExpandTrials(*s);
  ASSERT_TRUE(trials.ok()) << Dump(trials.status());
  ASSERT_EQ(trials->size(), 8u);
  const TrialPlan& t = (*trials)[1];
  EXPECT_EQ(t.index, 2);
  EXPECT_EQ(t.id, "lr-2");
  EXPECT_EQ(t.spec["id"], "lr-2");
  EXPECT_EQ(t.spec["env"]["LR"], "0.001");
  EXPECT_EQ(t.spec["command"],
            json::parse(R"(["python3", "train.py", "--steps=50", "--batch=32"])"))
      << "an existing --steps=... is replaced, a new flag appended";
  EXPECT_EQ(t.spec["cluster"]["worker"], 1);
}

TEST(SweepSpace, AValueThatBreaksATrialNamesTheParameter) {
  json in = ListedSweep();
  in["parameters"]["resources.nodes"] = {{"values", {2, 3}}};  // cluster has 2 tasks
  auto s = ParseSweepSpec(in);
  ASSERT_TRUE(s.ok()) << Dump(s.status());
  auto trials = ExpandTrials(*s);
  ASSERT_FALSE(trials.ok());
  EXPECT_TRUE(HasError(trials.status(), "experiment.cluster", "in trial 2"))
      << Dump(trials.status());
  json env = ListedSweep();
  env["parameters"]["env.TF_CONFIG"] = {{"values", {"x"}}};
  auto s2 = ParseSweepSpec(env);
  ASSERT_TRUE(s2.ok());
  auto t2 = ExpandTrials(*s2);
  ASSERT_FALSE(t2.ok());
  EXPECT_TRUE(HasError(t2.status(), "parameters.env.TF_CONFIG", "trial 1 sets env.TF_CONFIG to"))
      << Dump(t2.status());
}

}  // namespace
}  // namespace tfslurm::sweeps
