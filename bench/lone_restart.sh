#!/usr/bin/env bash
# A TF worker restarted alone (issue 29, point 3): examples/mnist_tf under
# parameter servers, worker 1's program killed -9 while the chief trains;
# tfslurm starts only that program again, on its node and port. Measures the
# time until TensorFlow's coordinator has the worker back, and the chief's
# steps per second before, during and after. Starts its own Slurm cluster
# and tfslurmd; the TensorFlow python is deploy/install-tf.sh's. See
# lone_restart.py.
#
#   bench/lone_restart.sh [--runs 3] [--warmup-s 20] [--after-s 20] [--build DIR]
#
# --build DIR: take tfslurmd and tfslurm-agent from DIR/bin as they are.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

runs=3 warmup_s=20 after_s=20 prebuilt=""
while (($#)); do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --warmup-s) warmup_s="$2"; shift 2 ;;
    --after-s) after_s="$2"; shift 2 ;;
    --build) prebuilt="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
command_line="bench/lone_restart.sh --runs $runs --warmup-s $warmup_s --after-s $after_s${prebuilt:+ --build $prebuilt}"

use_binaries "$prebuilt"
tf_python="$("$REPO/deploy/install-tf.sh")" || die "deploy/install-tf.sh failed"
work="$(mktemp -d /tmp/bench-lone-XXXX)"
chmod 755 "$work"
clean_up_on_exit "$work"
start_cluster
start_tfslurmd "$work/svc"
started=$(date +%s)
status=0
PYTHONPATH="$BENCH_DIR" python3 "$BENCH_DIR/lone_restart.py" --api "$API" --tf-python "$tf_python" \
  --runs "$runs" --warmup-s "$warmup_s" --after-s "$after_s" >"$work/table.md" || status=$?
title="A TF worker restarted alone while the chief trains on (issue 29)"
((status == 0)) || title="$title -- FAILED RUNS"
{
  printf -- '- binaries: %s\n' "$binaries"
  printf -- '- measured in %d s; load average at the end %s\n\n' "$(($(date +%s) - started))" "$(cut -d' ' -f1-3 /proc/loadavg)"
  cat "$work/table.md"
  cat <<NOTE

"restarted_alone event": tfslurmd's decision, once worker 1's agent
reported the kill and came back to wait. "serving again": worker 1's new
program has started its tf.distribute.Server on the same port (the agent
holds it). "recovered": the chief's ClusterCoordinator says so itself
(cluster_coordinator.py's WorkerPreemptionHandler, which calls
update_server_def until the worker answers). Meanwhile the chief trains on
worker 0 alone, and its closures for worker 1 go back into the queue. No
second attempt and no new Slurm job in any run. tfslurmd and the local Slurm
cluster (deploy/local-slurm, 3 nodes) on this machine, with TensorFlow on
its 2 cores.
NOTE
} >"$work/section.md"
results_append "$title" "$command_line" "$work/section.md"
cat "$work/section.md"
((status == 0)) || die "some runs went wrong (see the problems column)"
