// The Slurm adapter's release logic (release_window.h: pure) and the calls
// that go through this build's own libslurm without a cluster (hostlists),
// so that a build against any release runs them (tests/compat.sh).
#include <gtest/gtest.h>

#include "service/slurm/libslurm_client.h"
#include "service/slurm/release_window.h"

namespace tfslurm::slurm {
namespace {

SlurmRelease R(const char* text) {
  auto r = ParseSlurmRelease(text);
  EXPECT_TRUE(r.has_value()) << text;
  return r.value_or(SlurmRelease{});
}

TEST(SlurmRelease, ParsesReleasesAndRefusesTheRest) {
  EXPECT_EQ(R("26.05.3").ToString(), "26.05.3");
  EXPECT_EQ(R("22.05.8").Major(), "22.05");
  EXPECT_EQ(R("24.11").ToString(), "24.11");
  for (const char* bad : {"", "26", "26.", ".05", "26.13.1", "26.05.3.1", "26.x", "a.b.c", "26..3",
                          "2605.05", "26.05.3 "})
    EXPECT_FALSE(ParseSlurmRelease(bad).has_value()) << "'" << bad << "'";
}

// container.c at each tag: 22.05 replaces the bundle's root.path, 23.02 on
// keep it.
TEST(OciRunsAttemptBundles, From2302On) {
  EXPECT_FALSE(OciRunsAttemptBundles(R("22.05.8")));
  for (const char* release : {"23.02.1", "23.11", "24.11.7", "26.05.3"})
    EXPECT_TRUE(OciRunsAttemptBundles(R(release))) << release;
}

// Each pair as src/common/slurm_protocol_common.h at the release tags says:
// SLURM_MIN_PROTOCOL_VERSION is two releases back up to 24.05 and three
// from 24.11.
TEST(ReleaseMismatch, AClientTalksToItsOwnReleaseAndTheFewAfterIt) {
  struct Case {
    const char* client;
    const char* controller;
    bool talks;
  } cases[] = {
      {"22.05.8", "22.05.8", true},  {"22.05.8", "23.02.7", true},  {"22.05.8", "23.11.10", true},
      {"22.05.8", "24.05.8", false}, {"22.05.8", "24.11.7", false}, {"22.05.8", "26.05.3", false},
      {"23.02.7", "24.11.7", true},  {"23.11.1", "25.05.2", true},  {"24.05.1", "25.11.0", true},
      {"24.11.7", "26.05.3", true},  {"24.11.7", "25.05.8", true},  {"24.05.8", "26.05.3", false},
      {"26.05.3", "26.05.1", true},  {"26.05.3", "24.11.7", false}, {"24.11.7", "22.05.8", false},
      {"26.05.3", "27.05.0", true},  {"26.05.3", "28.05.0", false},
  };
  for (const Case& c : cases)
    EXPECT_EQ(!ReleaseMismatch(R(c.client), R(c.controller)).has_value(), c.talks)
        << c.client << " -> " << c.controller;
}

TEST(ReleaseMismatch, TheMessageNamesBothReleasesTheWindowAndTheFix) {
  auto old_client = ReleaseMismatch(R("22.05.8"), R("26.05.3"));
  ASSERT_TRUE(old_client.has_value());
  EXPECT_EQ(*old_client,
            "tfslurmd was built with libslurm 22.05.8, and slurmctld runs Slurm 26.05.3, which "
            "talks only to clients of 24.11 to 26.05 (its own release and the 3 before it); build "
            "tfslurmd against the cluster's own Slurm 26.05.3 (docs/site-deployment.md, \"Slurm "
            "releases\")");
  auto new_client = ReleaseMismatch(R("26.05.3"), R("22.05.8"));
  ASSERT_TRUE(new_client.has_value());
  EXPECT_NE(new_client->find("libslurm 26.05.3, a newer release than slurmctld's Slurm 22.05.8"),
            std::string::npos)
      << *new_client;
  auto two_back = ReleaseMismatch(R("22.05.8"), R("24.05.8"));
  ASSERT_TRUE(two_back.has_value());
  EXPECT_NE(two_back->find("clients of 23.02 to 24.05 (its own release and the 2 before it)"),
            std::string::npos)
      << *two_back;
}

TEST(ControllersReachableFrom, NamesTheReleasesWhoseWindowHoldsTheClient) {
  EXPECT_EQ(ControllersReachableFrom(R("22.05.8")), "22.05 to 23.11");
  EXPECT_EQ(ControllersReachableFrom(R("23.11.1")), "23.11 to 25.05");
  EXPECT_EQ(ControllersReachableFrom(R("24.05.8")), "24.05 to 25.11");
  EXPECT_EQ(ControllersReachableFrom(R("24.11.7")), "24.11 to 26.05");
  EXPECT_EQ(ControllersReachableFrom(R("26.05.3")), "26.05 to 27.11");
}

TEST(LibslurmRelease, IsTheReleaseOfTheHeadersThisWasBuiltWith) {
  auto r = ParseSlurmRelease(LibslurmRelease());
  ASSERT_TRUE(r.has_value()) << LibslurmRelease();
  EXPECT_GE(r->year, 22);
  EXPECT_GE(r->micro, 0);
}

TEST(ExpandHostlist, ExpandsThroughThisBuildsLibslurm) {
  EXPECT_EQ(ExpandHostlist("node[1-3],gpu01"),
            (std::vector<std::string>{"node1", "node2", "node3", "gpu01"}));
  EXPECT_EQ(ExpandHostlist("a[08-10]"), (std::vector<std::string>{"a08", "a09", "a10"}));
  EXPECT_TRUE(ExpandHostlist("").empty());
}

}  // namespace
}  // namespace tfslurm::slurm
