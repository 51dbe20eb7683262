#include "service/slurm/default_memory.h"

#include <gtest/gtest.h>

namespace tfslurm::slurm {
namespace {

constexpr uint64_t PerCpu(uint64_t mb) { return mb | kMemPerCpuFlag; }

TEST(EffectiveDefMemPerCpu, PartitionDefMemPerCpuWins) {
  auto def = EffectiveDefMemPerCpu(PerCpu(1500), PerCpu(2000));
  ASSERT_TRUE(def.has_value());
  EXPECT_EQ(def->mb, 1500);
  EXPECT_FALSE(def->cluster_wide);
}

TEST(EffectiveDefMemPerCpu, PartitionWithoutDefaultTakesTheClusterWideOne) {
  // What slurm_load_partitions reports for a partition line with no
  // DefMemPerCPU under a slurm.conf with DefMemPerCPU=2000 at the top.
  auto def = EffectiveDefMemPerCpu(0, PerCpu(2000));
  ASSERT_TRUE(def.has_value());
  EXPECT_EQ(def->mb, 2000);
  EXPECT_TRUE(def->cluster_wide);
  def = EffectiveDefMemPerCpu(kNoVal64, PerCpu(2000));
  ASSERT_TRUE(def.has_value());
  EXPECT_EQ(def->mb, 2000);
}

TEST(EffectiveDefMemPerCpu, NoDefaultAnywhereIsNone) {
  EXPECT_FALSE(EffectiveDefMemPerCpu(0, 0).has_value());
  EXPECT_FALSE(EffectiveDefMemPerCpu(0, kNoVal64).has_value());
}

TEST(EffectiveDefMemPerCpu, PerNodeDefaultsAreNotPerCpu) {
  // DefMemPerNode: the value without the MEM_PER_CPU bit.
  EXPECT_FALSE(EffectiveDefMemPerCpu(0, 16000).has_value());
  // A partition's DefMemPerNode overrides the cluster's DefMemPerCPU, as in
  // slurmctld: no per-CPU default applies to its jobs.
  EXPECT_FALSE(EffectiveDefMemPerCpu(16000, PerCpu(2000)).has_value());
}

TEST(EffectiveDefMemPerCpu, UnlimitedIsNone) {
  // DefMemPerCPU=UNLIMITED (0 with the bit) set on the partition overrides
  // the cluster's value; set on the cluster it means no default.
  EXPECT_FALSE(EffectiveDefMemPerCpu(kMemPerCpuFlag, PerCpu(2000)).has_value());
  EXPECT_FALSE(EffectiveDefMemPerCpu(0, kMemPerCpuFlag).has_value());
}

TEST(EffectiveDefMemPerCpu, IsUsableAtCompileTime) {
  static_assert(EffectiveDefMemPerCpu(0, PerCpu(2000))->mb == 2000);
  static_assert(!EffectiveDefMemPerCpu(PerCpu(0), PerCpu(2000)).has_value());
}

}  // namespace
}  // namespace tfslurm::slurm
