#!/usr/bin/env bash
# How fast a sweep's stopped trial really stops (issue 48, point 4): from the
# rule's decision to the trial's programs gone, against Slurm's own cancel
# (scancel --signal=KILL, the call tfslurmd's cancel makes) of a job of the
# same shape, in the same run. Starts its own Slurm cluster and tfslurmd
# (--poll-interval-ms 500, as the sweep benchmark). See sweep_stop.py.
#
#   bench/sweep_stop.sh [--runs 5] [--rung 20] [--build DIR]
#
# --build DIR: take tfslurmd and tfslurm-agent from DIR/bin as they are
# (e.g. the tree's own build/), instead of building $TFSLURM_BENCH_BUILD.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

runs=5 rung=20 prebuilt=""
while (($#)); do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --rung) rung="$2"; shift 2 ;;
    --build) prebuilt="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
command_line="bench/sweep_stop.sh --runs $runs --rung $rung${prebuilt:+ --build $prebuilt}"

use_binaries "$prebuilt"
work="$(mktemp -d /tmp/bench-sweep-stop-XXXX)"
chmod 755 "$work"
clean_up_on_exit "$work"
start_cluster
start_tfslurmd "$work/svc" --poll-interval-ms 500
wait_quiet 300
status=0
python3 "$BENCH_DIR/sweep_stop.py" --api "$API" --repo "$REPO" --runs "$runs" --rung "$rung" >"$work/table.md" || status=$?
title="A sweep's stopped trial: decision to programs gone (issue 48)"
((status == 0)) || title="$title -- FAILED RUNS"
{
  printf -- '- binaries: %s\n' "$binaries"
  printf -- '- load average at the end %s\n\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
  cat "$work/table.md"
  cat <<NOTE

Each run: a sweep of two linear_ps trials (1 ps + 1 worker on one node,
0.05 s a step, a loss point every step), one at a time, ASHA at step ${rung};
trial 1 passes the rung and is cancelled, trial 2 (a learning rate far too
small) is stopped there. "Decision": the time of trial 2's stopped_early
event. "Programs gone": both its train.py processes have left /proc
(watched every 2 ms). The anchor is a plain experiment of the same shape
whose job is cancelled with scancel --signal=KILL, timed from scancel's
return. "Rung reached": the wall_time train.py wrote with its first point
at or past the rung; to the decision that is the sweep's 500 ms poll and
the agent's scalar batching, not the stop.
NOTE
} >"$work/section.md"
results_append "$title" "$command_line" "$work/section.md"
cat "$work/section.md"
((status == 0)) || die "some runs went wrong"
