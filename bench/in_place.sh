#!/usr/bin/env bash
# Restarts inside the allocation against a requeue (issue 29): from a kill -9
# of one task's program (6 tasks on 3 nodes) to the next attempt's first
# step, with restart.in_allocation true (the same Slurm job) and false (a new
# Slurm job, after restart.backoff_s), on the idle cluster and on one filled
# with other jobs, where the requeued job waits its turn. Then the same for a
# node's failure, with a spare node (resources.spare_nodes) against a
# requeue. Starts its own Slurm cluster and tfslurmd. See in_place.py.
#
#   bench/in_place.sh [--runs 5] [--busy-runs 3] [--node-runs 5] [--node-busy-runs 3]
#                     [--backoff-s 10] [--filler-s 60] [--build DIR]
#
# --build DIR: take tfslurmd and tfslurm-agent from DIR/bin as they are
# (e.g. the tree's own build/), instead of building $TFSLURM_BENCH_BUILD.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

runs=5 busy_runs=3 node_runs=5 node_busy_runs=3 backoff_s=10 filler_s=60 prebuilt=""
while (($#)); do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --busy-runs) busy_runs="$2"; shift 2 ;;
    --node-runs) node_runs="$2"; shift 2 ;;
    --node-busy-runs) node_busy_runs="$2"; shift 2 ;;
    --backoff-s) backoff_s="$2"; shift 2 ;;
    --filler-s) filler_s="$2"; shift 2 ;;
    --build) prebuilt="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
command_line="bench/in_place.sh --runs $runs --busy-runs $busy_runs --node-runs $node_runs --node-busy-runs $node_busy_runs --backoff-s $backoff_s --filler-s $filler_s${prebuilt:+ --build $prebuilt}"

use_binaries "$prebuilt"
work="$(mktemp -d /tmp/bench-in-place-XXXX)"
chmod 755 "$work"
clean_up_on_exit "$work"
start_cluster
start_tfslurmd "$work/svc"
started=$(date +%s)
status=0
PYTHONPATH="$BENCH_DIR" python3 "$BENCH_DIR/in_place.py" --api "$API" --work "$work" --runs "$runs" \
  --busy-runs "$busy_runs" --node-runs "$node_runs" --node-busy-runs "$node_busy_runs" --backoff-s "$backoff_s" --filler-s "$filler_s" >"$work/table.md" || status=$?
title="Restarts in place against a requeue (issue 29)"
((status == 0)) || title="$title -- FAILED RUNS"
{
  printf -- '- binaries: %s\n' "$binaries"
  printf -- '- measured in %d s; load average at the end %s\n\n' "$(($(date +%s) - started))" "$(cut -d' ' -f1-3 /proc/loadavg)"
  cat "$work/table.md"
  cat <<NOTE

"attempt 1 failed": the service's \`exited\` event for the killed program
(its agent reports the exit at once). In place, the other five programs are
shut down, every agent comes back to wait in the job, and the service records
attempt 2 in the same job ("attempt 2 recorded") and sends each agent
NextAttempt; the agents register on fresh ports, pass the barrier, and start
the program again. A requeue waits for the job to end, for the next poll of
Slurm (2 s), for restart.backoff_s (${backoff_s} s), then for Slurm to start
the new job: on the busy cluster, behind the filler jobs that were pending.
A node's failure with a spare: Slurm takes node2 out of the job, which runs
on (--no-kill); the service sees it at its next poll (2 s), ends attempt 1
node_fail once node1's agents wait, and starts attempt 2 in the job with
node3's agents in node2's place. Without a spare, Slurm ends the job
NODE_FAIL, and the new job leaves node2 out.
tfslurmd and the local Slurm cluster (deploy/local-slurm, 3 nodes) on this
machine.
NOTE
} >"$work/section.md"
results_append "$title" "$command_line" "$work/section.md"
cat "$work/section.md"
((status == 0)) || die "some runs went wrong (see the problems column)"
