// Which Slurm releases can talk to which: a client built with one release's
// libslurm (tfslurmd) and a slurmctld of another. Plain logic, without
// slurm.h, so that it is unit-tested without a cluster; libslurm_client.cc
// feeds it the two releases.
//
// The rule, from the source at each release tag: slurmctld unpacks a
// message whose header carries its own protocol version or one of the few
// before it, and closes the connection on any other (unpack_header,
// src/common/slurm_protocol_pack.c; the versions in
// src/common/slurm_protocol_common.h). Up to 24.05 that is two releases back
// (SLURM_MIN_PROTOCOL_VERSION at slurm-22-05-8-1: 20.11 for 22.05), from
// 24.11 three (slurm-24-11-7-1: 23.02 for 24.11; slurm-26-05-3-1: 24.11 for
// 26.05, "the current RPC version, plus three prior"). A client always
// speaks its own release's version, so it never talks to an older
// slurmctld.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tfslurm::slurm {

// A Slurm release, "YY.MM" with an optional ".micro" ("26.05.3").
struct SlurmRelease {
  int year = 0;    // 26
  int month = 0;   // 5
  int micro = -1;  // 3; -1 when not given
  // "26.05.3", or "26.05" without a micro.
  std::string ToString() const;
  // "26.05".
  std::string Major() const;
};

// "26.05.3", "24.11", "22.05.8"; nullopt for anything else.
std::optional<SlurmRelease> ParseSlurmRelease(std::string_view text);

// Why a client built with libslurm `client` cannot talk to a slurmctld of
// `controller`, as a sentence naming both releases and the fix; nullopt
// when it can. Releases Slurm never made (22.11) are treated as the next
// one it made, and releases after 26.05 are assumed to follow its
// twice-yearly .05/.11 rhythm with three releases back.
std::optional<std::string> ReleaseMismatch(const SlurmRelease& client,
                                           const SlurmRelease& controller);

// Whether slurmstepd's OCI support (srun --container) can run the bundle
// tfslurm writes for an attempt, whose root.path is the image's rootfs
// elsewhere. 22.05's _modify_config writes BUNDLE/rootfs into root.path
// whatever it said and runs one task per node per step
// (src/slurmd/slurmstepd/container.c, slurm-22-05-8-1); 23.02 keeps an
// absolute root.path (container.c at slurm-23-02-1-1, through 26.05.3) and
// gives each task its own container.
bool OciRunsAttemptBundles(const SlurmRelease& slurmd);

// The slurmctld releases a client built with `client` can talk to,
// "22.05 to 23.11", for a message when slurmctld could not be asked.
std::string ControllersReachableFrom(const SlurmRelease& client);

}  // namespace tfslurm::slurm
