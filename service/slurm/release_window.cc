#include "service/slurm/release_window.h"

#include <charconv>
#include <vector>

namespace tfslurm::slurm {
namespace {

std::string TwoDigits(int n) { return (n < 10 ? "0" : "") + std::to_string(n); }

// The protocol generation of a release: the high byte of its
// SLURM_<YY>_<MM>_PROTOCOL_VERSION (src/common/slurm_protocol_common.h).
// 20.11 is 36, 22.05 is 38, 23.02 is 39, 23.11 is 40, and from 24.05 (41)
// Slurm releases in May and November, one generation each.
int Generation(const SlurmRelease& r) {
  struct Known {
    int year, month, generation;
  };
  static const Known kBefore2024[] = {
      {20, 11, 36}, {21, 8, 37}, {22, 5, 38}, {23, 2, 39}, {23, 11, 40}};
  if (r.year >= 24) return 41 + 2 * (r.year - 24) + (r.month >= 11 ? 1 : 0);
  // The first known release at or after this one.
  for (const Known& k : kBefore2024)
    if (r.year < k.year || (r.year == k.year && r.month <= k.month)) return k.generation;
  return 40;
}

// How many releases before its own a slurmctld of this generation accepts.
int ReleasesBack(int generation) { return generation >= 42 ? 3 : 2; }

// The release of a generation, "24.11", for messages.
std::string ReleaseOf(int generation) {
  static const char* kBefore2024[] = {"20.11", "21.08", "22.05", "23.02", "23.11"};
  if (generation >= 41) {
    int offset = generation - 41;
    return std::to_string(24 + offset / 2) + (offset % 2 ? ".11" : ".05");
  }
  if (generation >= 36) return kBefore2024[generation - 36];
  return "an older release";
}

}  // namespace

std::string SlurmRelease::Major() const { return std::to_string(year) + "." + TwoDigits(month); }

std::string SlurmRelease::ToString() const {
  return micro < 0 ? Major() : Major() + "." + std::to_string(micro);
}

bool OciRunsAttemptBundles(const SlurmRelease& slurmd) {
  return slurmd.year > 23 || (slurmd.year == 23 && slurmd.month >= 2);
}

std::optional<SlurmRelease> ParseSlurmRelease(std::string_view text) {
  std::vector<int> parts;
  size_t at = 0;
  while (at <= text.size() && parts.size() < 4) {
    size_t dot = text.find('.', at);
    std::string_view piece = text.substr(at, dot == std::string_view::npos ? dot : dot - at);
    int value = 0;
    auto [end, ec] = std::from_chars(piece.data(), piece.data() + piece.size(), value);
    if (piece.empty() || piece.size() > 3 || ec != std::errc() ||
        end != piece.data() + piece.size())
      return std::nullopt;
    parts.push_back(value);
    if (dot == std::string_view::npos) break;
    at = dot + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) return std::nullopt;
  SlurmRelease r{parts[0], parts[1], parts.size() == 3 ? parts[2] : -1};
  if (r.year < 1 || r.month < 1 || r.month > 12) return std::nullopt;
  return r;
}

std::optional<std::string> ReleaseMismatch(const SlurmRelease& client,
                                           const SlurmRelease& controller) {
  int mine = Generation(client), theirs = Generation(controller);
  int back = ReleasesBack(theirs);
  const std::string fix = "; build tfslurmd against the cluster's own Slurm " +
                          controller.ToString() + " (docs/site-deployment.md, \"Slurm releases\")";
  if (mine > theirs)
    return "tfslurmd was built with libslurm " + client.ToString() +
           ", a newer release than slurmctld's Slurm " + controller.ToString() +
           ", and a slurmctld never talks to clients of a newer release" + fix;
  if (theirs - mine > back)
    return "tfslurmd was built with libslurm " + client.ToString() + ", and slurmctld runs Slurm " +
           controller.ToString() + ", which talks only to clients of " + ReleaseOf(theirs - back) +
           " to " + controller.Major() + " (its own release and the " + std::to_string(back) +
           " before it)" + fix;
  return std::nullopt;
}

std::string ControllersReachableFrom(const SlurmRelease& client) {
  int mine = Generation(client), last = mine;
  while (last + 1 - ReleasesBack(last + 1) <= mine) ++last;
  return client.Major() + " to " + ReleaseOf(last);
}

}  // namespace tfslurm::slurm
