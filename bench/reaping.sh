#!/usr/bin/env bash
# Reaping on the local cluster (issue 3): linear_ps with 2 ps + 4 workers;
# from the last worker's exit to the ps processes gone and to the Slurm job
# COMPLETED. Starts its own Slurm cluster and tfslurmd (default settings).
#
#   bench/reaping.sh [--runs 10] [--steps 300]
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

runs=10 steps=300
while (($#)); do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
command_line="bench/reaping.sh --runs $runs --steps $steps"

build_all
work="$(mktemp -d /tmp/bench-reap-XXXX)"
chmod 755 "$work"
clean_up_on_exit "$work"
start_cluster
# tfslurmd's defaults: poll 2 s, heartbeat 5 s, shutdown grace 10 s.
start_tfslurmd "$work/svc"
wait_quiet 300

python3 "$BENCH_DIR/reaping.py" --api "$API" --repo "$REPO" --runs "$runs" --steps "$steps" >"$work/table.md" || {
  cat "$work/table.md"
  results_append "Reaping on the local cluster (issue 3) -- FAILED RUNS" "$command_line" "$work/table.md"
  die "some runs went wrong (see the problems column)"
}
{
  cat "$work/table.md"
  cat <<'NOTE'

Times are from the last worker's train.py process leaving /proc (watched
every 2 ms). "ps gone": both ps train.py processes have left /proc. "job
COMPLETED": end of the first `scontrol -o show job` call (polled back to back)
that answered COMPLETED. The service columns are the tasks' ended_at as
GET /experiments/{id} shows them (when the agent's Exited report was
handled). tfslurmd runs with its defaults (poll 2 s, heartbeat 5 s, grace
10 s); the Slurm cluster is deploy/local-slurm (3 nodes on this machine).
NOTE
} >"$work/section.md"
results_append "Reaping on the local cluster (issue 3)" "$command_line" "$work/section.md"
cat "$work/section.md"
