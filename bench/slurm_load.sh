#!/usr/bin/env bash
# Slurm load (issue 8): with N active experiments (pending jobs, partition
# DOWN), the RPCs tfslurmd sends to slurmctld per poll cycle, counted by
# slurmctld itself (sdiag, reset with sdiag -r), against what a user checking
# the same jobs with squeue sends: squeue once per experiment, and one squeue
# for all of them.
#
#   bench/slurm_load.sh [--experiments 500] [--cycles 10]
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

experiments=500 cycles=10 poll_ms=2000
while (($#)); do
  case "$1" in
    --experiments) experiments="$2"; shift 2 ;;
    --cycles) cycles="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
command_line="bench/slurm_load.sh --experiments $experiments --cycles $cycles"

build_all
work="$(mktemp -d /tmp/bench-load-XXXX)"
chmod 755 "$work"
clean_up_on_exit "$work"
start_cluster
scontrol update PartitionName=debug State=DOWN
ctld_pid="$(cat "$CLUSTER_DIR/run/slurmctld.pid")"

# tfslurmd with its default poll interval; the RPC timing shim counts its
# slurm_load_jobs calls (= poll cycles).
BENCH_SLURM_TIMING_LOG="$work/rpc.log" TFSLURMD_PRELOAD="$BENCH_LIB/libbench_slurm_timing.so" TFSLURMD_AUTH=token \
  start_tfslurmd "$work/svc" --poll-interval-ms "$poll_ms"
sed 's/"id": *"hello"/"id": "@ID@"/' "$REPO/examples/hello.json" >"$work/spec.json"
log "creating $experiments experiments"
"$BENCH_BIN/bench_http_rate" --port "$HTTP_PORT" --path /experiments --method POST --body-file "$work/spec.json" \
  --id-prefix load --count "$experiments" --connections 1 --rate 0 --header "$AUTH_HEADER" >&2 ||
  die "creating experiments failed"
sleep $((2 * poll_ms / 1000 + 1))  # every experiment seen by at least one poll
mapfile -t job_ids < <(squeue -h -o %i)
((${#job_ids[@]} == experiments)) || die "expected $experiments jobs in Slurm, found ${#job_ids[@]}"

cpu_ms() { awk '{printf "%.0f", ($14 + $15) * 1000 / '"$(getconf CLK_TCK)"'}' "/proc/$1/stat"; }
now_ns() { date +%s%N; }
# sdiag's "by message type" section as "TYPE COUNT AVE_US TOTAL_US" lines.
sdiag_types() {
  sdiag | sed -n '/by message type/,/by user/p' |
    sed -n 's/^[[:space:]]*\([A-Z_]*\)[[:space:]]*([ 0-9]*)[[:space:]]*count:\([0-9]*\)[[:space:]]*ave_time:\([0-9]*\)[[:space:]]*total_time:\([0-9]*\).*/\1 \2 \3 \4/p'
}

wait_quiet 300
out="$work/section.md"
: >"$out"
scenario() { # title file seconds ctld_cpu_ms cycles
  local title="$1" file="$2" secs="$3" cpu="$4" n="$5"
  {
    echo "**$title** ($secs s, slurmctld CPU $cpu ms):"
    echo
    echo "| RPC type (sdiag) | count | per cycle | slurmctld ave time (µs) | total (ms) |"
    echo "|---|---|---|---|---|"
    awk -v n="$n" '$1 != "REQUEST_STATS_INFO" {printf "| %s | %d | %.2f | %d | %.1f |\n", $1, $2, $2 / n, $3, $4 / 1000}' "$file"
    awk -v n="$n" '$1 ~ /^REQUEST_JOB_(INFO|INFO_SINGLE|USER_INFO)$/ {j += $2} $1 != "REQUEST_STATS_INFO" {a += $2}
      END {printf "\nJob-information RPCs per cycle: %.2f; all RPCs per cycle: %.2f (cycles: %d; sdiag'"'"'s own REQUEST_STATS_INFO not counted).\n\n", j / n, a / n, n}' "$file"
  } >>"$out"
}

# 1. tfslurmd alone, CYCLES poll cycles.
log "tfslurmd: $cycles poll cycles with $experiments active experiments"
# tfslurmd's calls of slurm_load_jobs so far, as the timing shim logged them.
load_jobs_calls() {
  if [[ -f "$work/rpc.log" ]]; then awk '/^slurm_load_jobs /{n++} END{print n+0}' "$work/rpc.log"; else echo 0; fi
}
before_calls="$(load_jobs_calls)"
c0="$(cpu_ms "$ctld_pid")" s0="$(cpu_ms "$TFSLURMD_PID")" t0="$(now_ns)"
sdiag -r >/dev/null
sleep "$(awk -v c="$cycles" -v p="$poll_ms" 'BEGIN{print c * p / 1000}')"
sdiag_types >"$work/tfslurmd.txt"
t1="$(now_ns)" c1="$(cpu_ms "$ctld_pid")" s1="$(cpu_ms "$TFSLURMD_PID")"
polls=$(($(load_jobs_calls) - before_calls))
# Per-cycle figures divide by the polls counted: with none (the shim not
# loaded, or tfslurmd not polling) there is nothing to divide by.
if ((polls <= 0)); then
  bench_error "no slurm_load_jobs call of tfslurmd's in the ${cycles}-cycle window (the timing shim's log has none)"
  polls=1
fi
load_ms="$({ grep -s '^slurm_load_jobs ' "$work/rpc.log" || true; } | tail -n "$polls" | awk '{s += ($3 - $2) / 1e6} END {if (NR) printf "%.1f", s / NR; else printf "-"}')"
scenario "tfslurmd polling ($poll_ms ms interval), $experiments experiments" "$work/tfslurmd.txt" \
  "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", (b - a) / 1e9}')" $((c1 - c0)) "$polls"
echo "tfslurmd made $polls slurm_load_jobs calls in the window (mean $load_ms ms each, as tfslurmd waited for them); tfslurmd CPU in the window: $((s1 - s0)) ms." >>"$out"
echo >>"$out"

# 2. squeue once per experiment: one "cycle" checks every job once.
stop_tfslurmd  # only squeue talks to slurmctld now
log "squeue -j once per experiment ($experiments jobs)"
c0="$(cpu_ms "$ctld_pid")" t0="$(now_ns)"
sdiag -r >/dev/null
for j in "${job_ids[@]}"; do squeue -h -j "$j" -o %T >/dev/null; done
sdiag_types >"$work/squeue-each.txt"
t1="$(now_ns)" c1="$(cpu_ms "$ctld_pid")"
scenario "\`squeue -h -j JOBID -o %T\` once per experiment ($experiments calls = one cycle)" "$work/squeue-each.txt" \
  "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", (b - a) / 1e9}')" $((c1 - c0)) 1

# 3. One squeue for all the user's jobs, CYCLES times.
log "squeue -u once for all, $cycles times"
c0="$(cpu_ms "$ctld_pid")" t0="$(now_ns)"
sdiag -r >/dev/null
for ((i = 0; i < cycles; i++)); do squeue -h -u "$(id -un)" -o '%i %T' >/dev/null; done
sdiag_types >"$work/squeue-all.txt"
t1="$(now_ns)" c1="$(cpu_ms "$ctld_pid")"
scenario "\`squeue -h -u USER\` once for all jobs, $cycles times" "$work/squeue-all.txt" \
  "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", (b - a) / 1e9}')" $((c1 - c0)) "$cycles"

cat >>"$out" <<EOF
Counts are slurmctld's (sdiag "Remote Procedure Call statistics by message
type", reset with sdiag -r before each scenario); node traffic from the three
slurmd, if any, is in the tables too. $experiments experiments = $experiments
pending jobs (partition debug DOWN); tfslurmd runs with its defaults apart from
the preloaded timing shim. Target (issue 8): at most one job-information RPC
per poll cycle, whatever the number of experiments.
EOF
results_append "Slurm load with $experiments active experiments (issue 8)" "$command_line" "$out"
cat "$out"
