#!/usr/bin/env bash
# Sweeps (issue 33): a 16-trial grid of linear_ps (8 learning rates x 2 batch
# sizes, one node per trial, 3 at a time) run to the end, against the same
# grid under ASHA, listed in both orders and shuffled (ASHA decides as trials
# arrive, so the order of the grid matters). Reports each run's best
# objective (linear_ps's held_out_loss), the
# node-seconds its trials used (tfslurm's record of each attempt's job
# start and end, times its nodes) and its wall time. Starts its own Slurm
# cluster and tfslurmd. See sweep.py.
#
#   bench/sweep.sh [--steps 800] [--step-sleep 0.05] [--lr-schedule cosine]
#                  [--rungs 20,80,320] [--reduction-factor 4] [--shuffle-seeds 0,1]
#                  [--build DIR]
#
# --build DIR: take tfslurmd and tfslurm-agent from DIR/bin as they are
# (e.g. the tree's own build/), instead of building $TFSLURM_BENCH_BUILD.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

steps=800 step_sleep=0.05 schedule=cosine rungs=20,80,320 factor=4 seeds=0,1 prebuilt=""
while (($#)); do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --step-sleep) step_sleep="$2"; shift 2 ;;
    --lr-schedule) schedule="$2"; shift 2 ;;
    --rungs) rungs="$2"; shift 2 ;;
    --reduction-factor) factor="$2"; shift 2 ;;
    --shuffle-seeds) seeds="$2"; shift 2 ;;
    --build) prebuilt="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
command_line="bench/sweep.sh --steps $steps --step-sleep $step_sleep --lr-schedule $schedule --rungs $rungs --reduction-factor $factor --shuffle-seeds $seeds${prebuilt:+ --build $prebuilt}"

use_binaries "$prebuilt"
work="$(mktemp -d /tmp/bench-sweep-XXXX)"
chmod 755 "$work"
clean_up_on_exit "$work"
start_cluster
start_tfslurmd "$work/svc" --poll-interval-ms 500
started=$(date +%s)
status=0
python3 "$BENCH_DIR/sweep.py" --api "$API" --steps "$steps" --step-sleep "$step_sleep" --lr-schedule "$schedule" --rungs "$rungs" \
  --reduction-factor "$factor" --shuffle-seeds "$seeds" >"$work/table.md" || status=$?
title="Sweeps: a 16-trial grid to the end against ASHA (issue 33)"
((status == 0)) || title="$title -- FAILED RUNS"
{
  printf -- '- binaries: %s\n' "$binaries"
  printf -- '- measured in %d s; load average at the end %s\n\n' "$(($(date +%s) - started))" "$(cut -d' ' -f1-3 /proc/loadavg)"
  cat "$work/table.md"
  cat <<NOTE

Each trial is linear_ps with 1 ps and 1 worker on one node, ${steps} steps
(${step_sleep} s each) at a ${schedule} learning rate, its held_out_loss (the
objective) reported every 10 steps; 3 trials at a time on the local 3-node
cluster. ASHA: rungs at steps ${rungs}, the best 1/${factor} at each rung go
on. Node-seconds: each attempt's job start to end as tfslurm
recorded it, times its nodes (startup included: about 3 s of each trial is
Slurm starting the job and Python importing before the first step).
NOTE
} >"$work/section.md"
results_append "$title" "$command_line" "$work/section.md"
cat "$work/section.md"
((status == 0)) || die "some runs went wrong"
