#!/usr/bin/env bash
# Runs benchmarks on an older revision and on this tree, side by side in one
# run: for each benchmark command, REV's then this tree's, so both meet the
# same machine at nearly the same time. Each side builds in its own
# directory (REV in a git worktree). Both sides' figures go to one file.
#
#   bench/before_after.sh REV OUT.md "rendezvous.sh --runs 5" "reaping.sh --runs 3" ...
#
# BENCH_ORDER=after-first runs this tree first, to see whether the order of
# the two (a machine warming up, or slowing down) is in the difference.
# BENCH_AFTER_BUILD names this tree's build directory (default
# /tmp/bench-build), BENCH_BEFORE_BUILD REV's (default beside its worktree):
# on a machine others share, each engineer's own, or an existing build of
# REV (configured with -DTFSLURM_BUILD_BENCH=ON) instead of a new one.
#
# Root, as the benchmarks that start a local Slurm cluster need.
set -uo pipefail
here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd -- "$here/.." && pwd)"
(($# >= 3)) || { sed -n '2,9p' "$0" >&2; exit 2; }
rev=$1 out=$2
shift 2
before_tree="${TMPDIR:-/tmp}/tfslurm-before-$(git -C "$repo" rev-parse --short "$rev")"
if [[ ! -d $before_tree ]]; then
  git -C "$repo" worktree add --detach "$before_tree" "$rev" >/dev/null || exit 1
fi
: >"$out"
failed=()
for command in "$@"; do
  sides=(before after)
  [[ ${BENCH_ORDER:-} == after-first ]] && sides=(after before)
  for side in "${sides[@]}"; do
    if [[ $side == before ]]; then
      tree=$before_tree build="${BENCH_BEFORE_BUILD:-$before_tree-build}"
    else
      tree=$repo build="${BENCH_AFTER_BUILD:-/tmp/bench-build}"
    fi
    echo "=== $side ($([[ $side == before ]] && echo "$rev" || echo work tree)): bench/$command" >&2
    printf '\n# %s: bench/%s\n' "$side" "$command" >>"$out"
    # shellcheck disable=SC2086
    TFSLURM_BENCH_BUILD="$build" TFSLURM_BENCH_RESULTS="$out" BENCH_MAX_WAIT="${BENCH_MAX_WAIT:-120}" \
      "$tree"/bench/$command || failed+=("$side: $command")
  done
done
((${#failed[@]} == 0)) || { printf 'before_after: failed: %s\n' "${failed[@]}" >&2; exit 1; }
echo "before_after: figures in $out" >&2
