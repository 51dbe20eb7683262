#!/usr/bin/env bash
# Real frameworks restarted in place against a requeue (issue 29): from a
# kill -9 of one program to the resumed first step of the next attempt, with
# restart.in_allocation true (the same Slurm job) and false (a new Slurm job,
# after restart.backoff_s), on the idle cluster and on one filled with other
# jobs, where the requeued job waits its turn. Two workloads, 6 tasks on 3
# nodes: TensorFlow parameter servers (examples/mnist_tf, the chief killed)
# and PyTorch DDP (examples/ddp, rank 3 killed). in_place.sh measures the
# same with no framework. Starts its own Slurm cluster and tfslurmd. See
# framework_restarts.py.
#
#   bench/framework_restarts.sh [--runs 5] [--busy-runs 3] [--floor-runs 3] [--backoff-s 10]
#                               [--filler-s 90] [--workloads tf,ddp] [--build DIR]
#
# --runs N: idle runs of each mode (one in place, one requeue), per workload.
# --busy-runs N: the same on the busy cluster.
# --floor-runs N: the floor, per workload: the same programs started by hand
# from a checkpoint, no Slurm, no tfslurm (framework_restarts.py says how).
# --build DIR: take tfslurmd and tfslurm-agent from DIR/bin as they are
# (e.g. the tree's own build/), instead of building $TFSLURM_BENCH_BUILD.
# TensorFlow: $TFSLURM_TF_PYTHON, else /opt/tfslurm/venv-tf/bin/python, else
# what deploy/install-tf.sh installs. PyTorch: Debian's, /usr/bin/python3.
# MNIST_NPZ naming a file: mnist_tf trains on it, else on --data synthetic.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

runs=5 busy_runs=3 floor_runs=3 backoff_s=10 filler_s=90 workloads=tf,ddp prebuilt=""
while (($#)); do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --busy-runs) busy_runs="$2"; shift 2 ;;
    --floor-runs) floor_runs="$2"; shift 2 ;;
    --backoff-s) backoff_s="$2"; shift 2 ;;
    --filler-s) filler_s="$2"; shift 2 ;;
    --workloads) workloads="$2"; shift 2 ;;
    --build) prebuilt="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
for n in "$runs" "$busy_runs" "$floor_runs" "$backoff_s" "$filler_s"; do
  [[ "$n" =~ ^[0-9]+$ ]] || die "--runs, --busy-runs, --floor-runs, --backoff-s and --filler-s take a whole number, not '$n'"
done
((runs + busy_runs > 0)) || die "nothing to run: --runs and --busy-runs are both 0"
[[ "$workloads" =~ ^(tf|ddp)(,(tf|ddp))*$ ]] || die "--workloads: tf, ddp or both (comma-separated), not '$workloads'"
command_line="bench/framework_restarts.sh --runs $runs --busy-runs $busy_runs --floor-runs $floor_runs --backoff-s $backoff_s --filler-s $filler_s --workloads $workloads${prebuilt:+ --build $prebuilt}"
log "$command_line"

tf_python=/opt/tfslurm/venv-tf/bin/python
if [[ ,$workloads, == *,tf,* ]]; then
  if [[ -n "${TFSLURM_TF_PYTHON:-}" ]]; then
    tf_python="$TFSLURM_TF_PYTHON"
  elif [[ ! -x "$tf_python" ]]; then
    tf_python="$("$REPO/deploy/install-tf.sh")" || die "deploy/install-tf.sh failed"
  fi
  [[ -x "$tf_python" ]] || die "no TensorFlow python at $tf_python (deploy/install-tf.sh makes one)"
fi
if [[ ,$workloads, == *,ddp,* ]]; then
  /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
    die "no torch with gloo for /usr/bin/python3: deploy/install-deps.sh installs python3-torch"
fi

use_binaries "$prebuilt"
wait_quiet 600
work="$(mktemp -d /tmp/bench-fw-restarts-XXXX)"
chmod 755 "$work"
clean_up_on_exit "$work"
start_cluster
start_tfslurmd "$work/svc"
started=$(date +%s)
status=0
PYTHONPATH="$BENCH_DIR" python3 "$BENCH_DIR/framework_restarts.py" --api "$API" --runs "$runs" --busy-runs "$busy_runs" \
  --floor-runs "$floor_runs" --work "$work" --backoff-s "$backoff_s" --filler-s "$filler_s" --workloads "$workloads" --tf-python "$tf_python" >"$work/table.md" || status=$?
title="Real frameworks restarted in place against a requeue (issue 29)"
((status == 0)) || title="$title -- FAILED RUNS"
{
  printf -- '- binaries: %s\n' "$binaries"
  [[ ,$workloads, == *,tf,* ]] &&
    printf -- '- TensorFlow %s (%s)\n' "$("$tf_python" -c 'import os; os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"; import tensorflow as tf; print(tf.__version__)' 2>/dev/null || echo '?')" "$tf_python"
  [[ ,$workloads, == *,ddp,* ]] &&
    printf -- '- PyTorch %s (/usr/bin/python3)\n' "$(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?')"
  printf -- '- measured in %d s; load average at the end %s\n\n' "$(($(date +%s) - started))" "$(cut -d' ' -f1-3 /proc/loadavg)"
  cat "$work/table.md"
  cat <<NOTE

"attempt 1 failed": the service's first \`exited\` event of attempt 1 (the
killed program's agent reports the exit at once). In place, the other five
programs are shut down, every agent comes back to wait in the job, the
service records attempt 2 in the same job ("attempt 2 recorded") and the
agents start the program again. A requeue waits for the job to end, for the
next poll of Slurm (2 s), for restart.backoff_s (${backoff_s} s), then for
Slurm to start the new job: on the busy cluster, behind the filler jobs that
were pending. Either way attempt 2's programs import the framework again,
form their cluster (TensorFlow's gRPC servers and coordinator; DDP's
TCPStore rendezvous and gloo) and restore the checkpoint: "attempt 2
start_step line" is when the reporting task logged where it starts, "first
step" its first step past it (the chief logs once per dispatch round of
steps, rank 0 at every step here), both read from its log of attempt 2 every
50 ms. tfslurmd and the local Slurm cluster (deploy/local-slurm, 3 nodes) on
this machine; every program shares its cores.
NOTE
} >"$work/section.md"
results_append "$title" "$command_line" "$work/section.md"
cat "$work/section.md"
((status == 0)) || die "some runs went wrong (see the problems column)"
