#!/usr/bin/env bash
# Hang detection on the local cluster (issue 18): a program that makes
# progress (TensorFlow's `checkpoint` state file in MODEL_DIR), then hangs
# while its agent keeps heartbeating. From the hang to the service's
# `stalled` event, and to the restarted attempt's first step, for each
# progress.stall_timeout_s S; set beside NCCL's watchdog (1,800 s; 600 s
# since torch 2.2) and NVRx's 300 s (NeMo's default heartbeat timeout; where
# each comes from: RESULTS.md). Starts its own Slurm cluster and tfslurmd.
# See hang.py.
#
#   bench/hang.sh [--runs 5] [--stall-timeouts 10,30] [--poll-interval-ms 2000]
#                 [--heartbeat-ms 5000] [--backoff-s 10] [--build DIR]
#
# --build DIR: take tfslurmd and tfslurm-agent from DIR/bin as they are
# (e.g. the tree's own build/), instead of building $TFSLURM_BENCH_BUILD.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

runs=5 stalls=10,30 poll_ms=2000 heartbeat_ms=5000 backoff_s=10 prebuilt=""
while (($#)); do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --stall-timeouts) stalls="$2"; shift 2 ;;
    --poll-interval-ms) poll_ms="$2"; shift 2 ;;
    --heartbeat-ms) heartbeat_ms="$2"; shift 2 ;;
    --backoff-s) backoff_s="$2"; shift 2 ;;
    --build) prebuilt="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
command_line="bench/hang.sh --runs $runs --stall-timeouts $stalls --poll-interval-ms $poll_ms --heartbeat-ms $heartbeat_ms --backoff-s $backoff_s${prebuilt:+ --build $prebuilt}"

if [[ -n "$prebuilt" ]]; then
  BUILD="$(cd -- "$prebuilt" && pwd)"
  [[ -x "$BUILD/bin/tfslurmd" && -x "$BUILD/bin/tfslurm-agent" ]] || die "no tfslurmd and tfslurm-agent in $BUILD/bin"
  binaries="$BUILD/bin/tfslurmd as built $(date -u -r "$BUILD/bin/tfslurmd" '+%Y-%m-%d %H:%M UTC'), tfslurm-agent $(date -u -r "$BUILD/bin/tfslurm-agent" '+%H:%M UTC')"
else
  build_all
  binaries="built in $BUILD (RelWithDebInfo)"
fi
work="$(mktemp -d /tmp/bench-hang-XXXX)"
chmod 755 "$work"
clean_up_on_exit "$work"
start_cluster
start_tfslurmd "$work/svc" --poll-interval-ms "$poll_ms" --heartbeat-ms "$heartbeat_ms"
log "load average before waiting: $(cut -d' ' -f1-3 /proc/loadavg)"
wait_quiet 600
loaded=""
if awk -v l="$BENCH_LOAD_AT_START" 'BEGIN{exit !(l > 2.5)}'; then
  loaded="Note: the 1-minute load average was $BENCH_LOAD_AT_START (> 2.5) when measuring started: other work was using the CPUs; the \"load\" column gives it at each run's start."
  log "$loaded"
fi

started=$(date +%s)
status=0
python3 "$BENCH_DIR/hang.py" --api "$API" --work "$work" --runs "$runs" --stall-timeouts "$stalls" \
  --poll-interval-ms "$poll_ms" --heartbeat-ms "$heartbeat_ms" --backoff-s "$backoff_s" >"$work/table.md" || status=$?
title="Hang detection against NCCL's watchdog and NVRx (issue 18)"
((status == 0)) || title="$title -- FAILED RUNS"
{
  printf -- '- binaries: %s\n' "$binaries"
  printf -- '- measured in %d s; load average at the end %s\n\n' "$(($(date +%s) - started))" "$(cut -d' ' -f1-3 /proc/loadavg)"
  [[ -z "$loaded" ]] || printf '%s\n\n' "$loaded"
  cat "$work/table.md"
  cat <<NOTE

"last step seen": the service's \`checkpoint\` event for the step the program
hung after: the agent reads MODEL_DIR/checkpoint at each heartbeat (every
${heartbeat_ms} ms), so this comes 0 to one heartbeat after the hang (each run
hangs at another point of the heartbeat period). "stalled": the \`stalled\`
event's time. tfslurmd checks its timers every 200 ms (its ticker), so it
comes S to S + 0.2 s after the last step was seen ("seen -> stalled"), and S
to S + one heartbeat + 0.2 s after the hang; the poll interval does not
enter. "attempt 1 ended": when the service saw the Slurm job end: the tasks
are told to stop at the stall, and the job's end is seen at the next poll of
Slurm (every ${poll_ms} ms). "attempt 2 submitted": restart.backoff_s
(${backoff_s} s) after that. Program start and first step: what attempt 2's
program recorded in MODEL_DIR (it resumes from the checkpoint; its first
step is written at once). One worker, one node; tfslurmd and the local
Slurm cluster (deploy/local-slurm, 3 nodes) on this machine.
NOTE
} >"$work/section.md"
results_append "$title" "$command_line" "$work/section.md"
cat "$work/section.md"
((status == 0)) || die "some runs went wrong (see the problems column)"
