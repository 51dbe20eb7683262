// Which DefMemPerCPU applies to a partition's jobs, decoded from the raw
// values libslurm returns, without slurm.h (libslurm_client.cc checks the
// constants below against it), so that it is unit-tested without a cluster.
//
// Slurm keeps DefMemPerCPU and DefMemPerNode in one uint64_t, both in
// partition_info_t.def_mem_per_cpu (slurm_load_partitions) and in
// slurm_conf_t.def_mem_per_cpu (slurm_load_ctl_conf); max_mem_per_cpu is
// encoded the same way:
//   0                      neither is set (scontrol: DefMemPerNode=UNLIMITED)
//   MEM_PER_CPU | mb       DefMemPerCPU=mb (MEM_PER_CPU alone: UNLIMITED)
//   mb, bit clear          DefMemPerNode=mb
// A partition line without DefMemPerCPU/DefMemPerNode (and no
// PartitionName=DEFAULT giving one) leaves the partition's value 0, even when
// slurm.conf sets DefMemPerCPU at the top: slurmctld applies that cluster-wide
// default at job time, so the partition record never shows it.
//
// Thread safety: a pure (constexpr) function.
#pragma once

#include <cstdint>
#include <optional>

namespace tfslurm::slurm {

inline constexpr uint64_t kMemPerCpuFlag = uint64_t{1} << 63;  // slurm.h MEM_PER_CPU
inline constexpr uint64_t kNoVal64 = 0xfffffffffffffffe;       // slurm.h NO_VAL64

struct DefMemPerCpu {
  int64_t mb = 0;
  bool cluster_wide = false;  // from slurm.conf's top level, not the partition's line
};

// The DefMemPerCPU Slurm gives a job of the partition that asks for no
// memory: the partition's own default when it sets one, else the cluster's.
// nullopt when that default is not a per-CPU amount: none at all, a
// DefMemPerNode, or DefMemPerCPU=UNLIMITED.
constexpr std::optional<DefMemPerCpu> EffectiveDefMemPerCpu(uint64_t partition_value,
                                                            uint64_t cluster_value) {
  auto per_cpu_mb = [](uint64_t v) -> std::optional<int64_t> {
    if (!(v & kMemPerCpuFlag) || v == kNoVal64) return std::nullopt;
    uint64_t mb = v & ~kMemPerCpuFlag;
    if (mb == 0) return std::nullopt;  // DefMemPerCPU=UNLIMITED
    return static_cast<int64_t>(mb);
  };
  // The partition decides whenever it sets anything, even a per-node or an
  // unlimited default: Slurm looks at the cluster's value only when it is 0.
  if (partition_value != 0 && partition_value != kNoVal64) {
    if (auto mb = per_cpu_mb(partition_value)) return DefMemPerCpu{*mb, false};
    return std::nullopt;
  }
  if (auto mb = per_cpu_mb(cluster_value)) return DefMemPerCpu{*mb, true};
  return std::nullopt;
}

}  // namespace tfslurm::slurm
