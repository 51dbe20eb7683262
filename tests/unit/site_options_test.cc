// The site's sbatch options in the spec (resources.account, qos,
// reservation, exclude: job-wide; constraint, nodelist, exclusive: per
// component, in roles.<role> too): parsing, refusals that name the field,
// the value and what is allowed, what reaches the SubmitRequest, and the
// script's #SBATCH lines.
#include <gtest/gtest.h>

#include "service/core/sbatch_script.h"
#include "service/core/spec.h"
#include "service/core/spec_checker.h"
#include "tests/unit/job_plans.h"
#include "tests/unit/spec_parsing.h"

namespace tfslurm {
namespace {

using testing::Dump;
using testing::ParsedSpec;
using testing::SpecErrors;

using nlohmann::json;

json SiteSpec(const json& resources) {
  json s = json::parse(R"({"id": "site-1", "command": ["python3", "train.py"],
    "cluster": {"ps": 1, "worker": 3},
    "resources": {"nodes": 2, "tasks_per_node": 2}})");
  s["resources"].update(resources);
  return s;
}

// True when some error is about `field` and mentions every one of `needles`.
bool HasError(const json& spec, const std::string& field,
              std::initializer_list<std::string> needles) {
  std::vector<FieldError> errors = SpecErrors(spec);
  for (const auto& e : errors) {
    if (e.field != field) continue;
    bool all = true;
    for (const auto& n : needles) all = all && e.reason.find(n) != std::string::npos;
    if (all) return true;
  }
  ADD_FAILURE() << "no error on " << field << " with the expected words; got:\n" << Dump(errors);
  return false;
}

SubmitRequest Request(const ExperimentSpec& s, const std::vector<std::string>& bad = {}) {
  MemoryPlan mem{1000, 1000, "test"};
  std::vector<MemoryPlan> more(4, mem);
  return BuildSubmitRequest(s, testing::PlanOf(s, mem, more),
                            {1, {"/out/site-1/logs/attempt-1"}, "secret", bad},
                            {"/usr/bin/tfslurm-agent", "svc:7070"}, {"PATH=/usr/bin"});
}

const json kAll = {{"account", "tfs-research"}, {"qos", "tfs-high"},
                   {"constraint", "ib&a100"},   {"exclude", "node3"},
                   {"nodelist", "node[1-2]"},   {"reservation", "maint,train_2"},
                   {"exclusive", true}};

TEST(SiteOptions, ParsedRoundTripAndAbsentByDefault) {
  ExperimentSpec s = ParsedSpec(SiteSpec(kAll));
  EXPECT_EQ(s.resources.account, "tfs-research");
  EXPECT_EQ(s.resources.qos, "tfs-high");
  EXPECT_EQ(s.resources.constraint, "ib&a100");
  EXPECT_EQ(s.resources.exclude, "node3");
  EXPECT_EQ(s.resources.nodelist, "node[1-2]");
  EXPECT_EQ(s.resources.reservation, "maint,train_2");
  EXPECT_TRUE(s.resources.exclusive);
  for (const auto& [key, value] : kAll.items()) EXPECT_EQ(s.ToJson()["resources"][key], value);
  EXPECT_EQ(ParsedSpec(s.ToJson()).ToJson(), s.ToJson());

  ExperimentSpec plain = ParsedSpec(SiteSpec(json::object()));
  EXPECT_TRUE(plain.resources.account.empty());
  EXPECT_FALSE(plain.resources.exclusive);
  for (const char* key :
       {"account", "qos", "constraint", "exclude", "nodelist", "reservation", "exclusive"})
    EXPECT_FALSE(plain.ToJson()["resources"].contains(key))
        << key << ": a spec without it reads as before";
}

TEST(SiteOptions, NamesRefuseWhatBreaksTheScriptLine) {
  for (const char* field : {"account", "qos", "reservation"}) {
    const std::string path = std::string("resources.") + field;
    EXPECT_TRUE(HasError(SiteSpec({{field, ""}}), path, {"empty string", "letters, digits"}));
    for (const char* bad : {"a b", "a\nb", "x\ty", "a'b", "$(id)", "a#b", "a\"b", "a;b", "é"})
      EXPECT_TRUE(HasError(SiteSpec({{field, bad}}), path, {"letters, digits and _ . - + @"}))
          << bad;
    EXPECT_TRUE(HasError(SiteSpec({{field, 7}}), path, {"must be a string", "7"}));
    EXPECT_TRUE(HasError(SiteSpec({{field, std::string(256, 'a')}}), path, {"1 to 255"}));
  }
  // Only a reservation is a list; an account or a QOS is one name.
  EXPECT_TRUE(HasError(SiteSpec({{"account", "a,b"}}), "resources.account",
                       {"\"a,b\"", "no spaces or commas"}));
  EXPECT_TRUE(HasError(SiteSpec({{"qos", "normal,high"}}), "resources.qos", {"\"normal,high\""}));
  EXPECT_EQ(ParsedSpec(SiteSpec({{"reservation", "r1,r2"}})).resources.reservation, "r1,r2");
  EXPECT_TRUE(HasError(SiteSpec({{"reservation", "r1,"}}), "resources.reservation",
                       {"\"r1,\"", "several joined by ','"}));
  EXPECT_TRUE(
      HasError(SiteSpec({{"reservation", "r1, r2"}}), "resources.reservation", {"\"r1, r2\""}));
}

TEST(SiteOptions, NodeListsAreSlurmHostlists) {
  using spec_internal::CountHostlist;
  EXPECT_EQ(CountHostlist("node1"), 1);
  EXPECT_EQ(CountHostlist("gpu[01-04],cpu7"), 5);
  EXPECT_EQ(CountHostlist("n[1-2,5]x[1-3]"), 9);
  for (const char* bad : {"", ",", "a,", ",a", "a b", "n[1-", "n[2-1]", "n[a]", "[1-2]", "a;b",
                          "n[1-2000000]", "$(x)"})
    EXPECT_FALSE(CountHostlist(bad).has_value()) << bad;

  for (const char* field : {"exclude", "nodelist"}) {
    const std::string path = std::string("resources.") + field;
    EXPECT_TRUE(HasError(SiteSpec({{field, ""}}), path, {"empty string", "node[1-4],gpu7"}));
    EXPECT_TRUE(HasError(SiteSpec({{field, "node1 node2"}}), path,
                         {"\"node1 node2\"", "a Slurm node list"}));
    EXPECT_TRUE(HasError(SiteSpec({{field, "node[1-"}}), path, {"\"node[1-\""}));
  }
  // Slurm gives the job every required node: more than `nodes` cannot fit.
  EXPECT_TRUE(HasError(SiteSpec({{"nodelist", "node[1-3]"}}), "resources.nodelist",
                       {"names 3 nodes", "resources.nodes is 2"}));
  EXPECT_EQ(ParsedSpec(SiteSpec({{"nodelist", "node2"}})).resources.nodelist, "node2");
}

TEST(SiteOptions, ExclusiveIsABoolean) {
  EXPECT_TRUE(HasError(SiteSpec({{"exclusive", "yes"}}), "resources.exclusive",
                       {"must be true", "a string \"yes\""}));
  EXPECT_TRUE(HasError(SiteSpec({{"exclusive", 1}}), "resources.exclusive", {"an integer 1"}));
  EXPECT_FALSE(ParsedSpec(SiteSpec({{"exclusive", false}})).resources.exclusive);
}

TEST(SiteOptions, ConstraintHasOneParserForResourcesAndRoles) {
  EXPECT_TRUE(HasError(SiteSpec({{"constraint", "a b"}}), "resources.constraint",
                       {"Slurm feature expression", "\"a b\""}));
  json j = SiteSpec(json::object());
  j["roles"] = {{"ps", {{"constraint", "a b"}}}};
  EXPECT_TRUE(HasError(j, "roles.ps.constraint", {"Slurm feature expression", "\"a b\""}));
}

TEST(SiteOptions, JobWideOptionsAreNotAllowedInRoleBlocks) {
  for (const char* field : {"account", "qos", "reservation", "exclude"}) {
    json j = SiteSpec(json::object());
    j["roles"] = {{"ps", {{field, "x"}}}};
    EXPECT_TRUE(HasError(j, std::string("roles.ps.") + field, {"unknown field"})) << field;
  }
}

// A role block does not inherit constraint, nodelist or exclusive (sbatch
// resets them per component); the job-wide ones apply to every component.
TEST(SiteOptions, PerComponentAndJobWideInAHeterogeneousJob) {
  json j = SiteSpec({{"account", "tfs-research"},
                     {"qos", "tfs-high"},
                     {"reservation", "r1"},
                     {"exclude", "node9"},
                     {"constraint", "cpu"},
                     {"nodelist", "node1"},
                     {"exclusive", true}});
  j["resources"]["nodes"] = 2;
  j["resources"]["tasks_per_node"] = 1;
  j["cluster"] = {{"ps", 1}, {"worker", 2}};
  j["roles"] = {{"ps", {{"nodelist", "node3"}, {"constraint", "ib"}}}};
  ExperimentSpec s = ParsedSpec(j);
  const RoleResources& ps = s.roles.at("ps");
  EXPECT_EQ(ps.nodelist, "node3");
  EXPECT_EQ(ps.constraint, "ib");
  EXPECT_FALSE(ps.exclusive) << "not inherited from resources";
  EXPECT_EQ(ParsedSpec(s.ToJson()).ToJson(), s.ToJson());

  SubmitRequest r = Request(s, {"node7"});
  ASSERT_EQ(r.more_components.size(), 1u);
  EXPECT_EQ(r.nodelist, "node1");
  EXPECT_TRUE(r.exclusive);
  EXPECT_EQ(r.constraint, "cpu");
  EXPECT_EQ(r.more_components[0].nodelist, "node3");
  EXPECT_EQ(r.more_components[0].constraint, "ib");
  EXPECT_FALSE(r.more_components[0].exclusive);
  EXPECT_EQ(r.account, "tfs-research");
  EXPECT_EQ(r.exclude_nodes, "node9,node7") << "the user's exclude, then the bad nodes";
  // The job-wide lines once, before the first `hetjob` separator.
  const size_t het = r.script.find("#SBATCH hetjob");
  ASSERT_NE(het, std::string::npos);
  EXPECT_LT(r.script.find("#SBATCH --account=tfs-research\n"), het);
  EXPECT_EQ(r.script.find("#SBATCH --account=", het), std::string::npos);
  EXPECT_NE(r.script.find("#SBATCH --nodelist=node3\n", het), std::string::npos);
  EXPECT_EQ(r.script.find("#SBATCH --exclusive\n", het), std::string::npos);

  // Every role named: there is no `resources` component for its
  // per-component options to reach.
  j["cluster"] = {{"ps", 1}, {"worker", 1}};
  j["roles"]["worker"] = json::object();
  EXPECT_TRUE(HasError(j, "resources.nodelist", {"every role with tasks has a block in roles"}));
  EXPECT_TRUE(HasError(j, "resources.exclusive", {"set exclusive in those blocks"}));
}

TEST(SiteOptions, SubmitRequestAndScriptCarryEveryOption) {
  SubmitRequest r = Request(ParsedSpec(SiteSpec(kAll)));
  EXPECT_EQ(r.account, "tfs-research");
  EXPECT_EQ(r.qos, "tfs-high");
  EXPECT_EQ(r.reservation, "maint,train_2");
  EXPECT_EQ(r.constraint, "ib&a100");
  EXPECT_EQ(r.nodelist, "node[1-2]");
  EXPECT_TRUE(r.exclusive);
  EXPECT_EQ(r.exclude_nodes, "node3");
  for (const char* line :
       {"#SBATCH --account=tfs-research\n", "#SBATCH --qos=tfs-high\n",
        "#SBATCH --reservation=maint,train_2\n", "#SBATCH --constraint=ib&a100\n",
        "#SBATCH --nodelist=node[1-2]\n", "#SBATCH --exclusive\n", "#SBATCH --exclude=node3\n"})
    EXPECT_NE(r.script.find(line), std::string::npos) << line << "in\n" << r.script;

  SubmitRequest plain = Request(ParsedSpec(SiteSpec(json::object())), {"node4", "node5"});
  EXPECT_EQ(plain.exclude_nodes, "node4,node5");
  for (const char* opt :
       {"--account", "--qos", "--reservation", "--nodelist", "--exclusive", "--constraint"})
    EXPECT_EQ(plain.script.find(opt), std::string::npos) << opt;
}

}  // namespace
}  // namespace tfslurm
