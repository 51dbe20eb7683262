#!/usr/bin/env bash
# The rendezvous of a restart in place (issue 29): N simulated PyTorch ranks
# pass attempt 1's barrier, one is killed, the others are shut down and wait
# in the job, and all register again for attempt 2. The figure is the
# failing exit report -> the last attempt-2 Assignment, beside its target
# (1 s at 512 ranks) and attempt 1's rendezvous in the same run. No Slurm:
# bench_rendezvous_server (tfslurmd's wiring on a stand-in Slurm), as for
# rendezvous.sh. The anchor, right after each size: the same runs against
# bench_rendezvous_floor, the bare gRPC service that sends only the messages
# a restart in place needs (Shutdown, the acknowledgments, NextAttempt, the
# Assignments), and the ratio of their p50s. See README.md, "Rendezvous in
# place".
#
#   bench/in_place_rendezvous.sh [--sizes 64,512,4096] [--runs 20] [--runs-4096 10] [--warmup 2]
#                                [--poll-interval-ms 2000] [-- extra bench_in_place_storm arguments]
#
# The extra arguments, and the server arguments, go to tfslurmd's runs and
# the floor's alike (the floor ignores --poll-interval-ms), so that the
# ratio compares the same load. Issue 49's setting, each node's 8 ranks as
# lanes of one ConnectNode stream (as a node's relay carries them):
#
#   bench/in_place_rendezvous.sh --sizes 512,4096 --runs 5 --runs-4096 3 --warmup 1 \
#     --poll-interval-ms 2000 -- --agents-per-connection 8 --node-streams
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

sizes="64,512,4096" runs=20 runs_big=10 warmup=2 poll_ms=2000
while (($#)); do
  case "$1" in
    --sizes) sizes="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --runs-4096) runs_big="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --poll-interval-ms) poll_ms="$2"; shift 2 ;;
    --) shift; break ;;
    *) die "unknown argument $1" ;;
  esac
done
command_line="bench/in_place_rendezvous.sh --sizes $sizes --runs $runs --runs-4096 $runs_big --warmup $warmup --poll-interval-ms $poll_ms${*:+ -- $*}"

build_all
work="$(mktemp -d /tmp/bench-ipr-XXXX)"
trap 'rm -rf "$work"' EXIT

table="$work/table.md" floor_table="$work/floor.md" compare="$work/compare.md"
: >"$table"
: >"$floor_table"
{
  echo "| ranks | tfslurmd p50 / p99 (ms) | bare gRPC floor p50 / p99 (ms) | tfslurmd / floor (p50) |"
  echo "|---|---|---|---|"
} >"$compare"
# "p50 / p99 / max" of a bench_in_place_storm table's one row.
figure() { awk -F'|' 'NR == 3 { gsub(/[*]/, "", $4); print $4 }' "$1"; }
IFS=, read -r -a size_list <<<"$sizes"
loads="" ends=""
extra=("$@")
server_args=(--server-arg --poll-interval-ms --server-arg "$poll_ms")
for n in "${size_list[@]}"; do
  r=$runs
  ((n >= 4096)) && r=$runs_big
  wait_quiet 600
  loads+="${loads:+, }$n ranks: $BENCH_LOAD_AT_START"
  log "restart in place of $n ranks, $r runs (+$warmup warm-up)"
  status=0
  "$BENCH_BIN/bench_in_place_storm" --server "$BENCH_BIN/bench_rendezvous_server" --sizes "$n" \
    --runs "$r" --warmup "$warmup" --dir "$work/srv" --runs-csv "$work/runs-$n.csv" \
    "${server_args[@]}" "${extra[@]}" >"$work/out-$n.md" || status=$?
  cat "$work/out-$n.md" >&2
  ends+="${ends:+, }$n ranks: $(cut -d' ' -f1 /proc/loadavg)"
  if [[ -s "$table" ]]; then tail -n +3 "$work/out-$n.md" >>"$table"; else cat "$work/out-$n.md" >>"$table"; fi
  # A size whose runs went wrong (the storm exits 1; its errors column says
  # how many, warm-up runs aside) fails the script, and the smoke run.
  ((status == 0)) || bench_error "$n ranks: bench_in_place_storm exited $status (errors column; stderr says why)"
  awk -F'|' 'NR > 2 && $(NF-1) + 0 > 0 { exit 1 }' "$work/out-$n.md" ||
    bench_error "$n ranks: some runs went wrong (errors column; stderr says why)"

  log "the same $r runs against the bare gRPC floor"
  status=0
  "$BENCH_BIN/bench_in_place_storm" --server "$BENCH_BIN/bench_rendezvous_floor" --sizes "$n" \
    --runs "$r" --warmup "$warmup" --dir "$work/floor-srv" --runs-csv "$work/floor-runs-$n.csv" \
    "${server_args[@]}" "${extra[@]}" >"$work/floor-$n.md" || status=$?
  cat "$work/floor-$n.md" >&2
  if [[ -s "$floor_table" ]]; then tail -n +3 "$work/floor-$n.md" >>"$floor_table"; else cat "$work/floor-$n.md" >>"$floor_table"; fi
  ((status == 0)) || bench_error "$n ranks: bench_in_place_storm against the floor exited $status"
  read -r ours_p50 _ ours_p99 _ < <(figure "$work/out-$n.md")
  read -r floor_p50 _ floor_p99 _ < <(figure "$work/floor-$n.md")
  echo "| $n | $ours_p50 / $ours_p99 | $floor_p50 / $floor_p99 | $(awk -v a="$ours_p50" -v b="$floor_p50" 'BEGIN { printf "%.2fx", a / b }') |" >>"$compare"
done

{
  cat "$table"
  echo
  echo "The anchor, right after each size: the same runs against bench_rendezvous_floor, a bare"
  echo "gRPC service that sends only the messages a restart in place needs (each other rank's"
  echo "Shutdown, each exit report's acknowledgment, NextAttempt once all wait, attempt 2's"
  echo "Assignments at its barrier): no decision, store, record or lock."
  echo
  cat "$floor_table"
  echo
  cat "$compare"
  echo
  echo "Load average when each size started: $loads; when it ended: $ends (other work on a"
  echo "shared machine shows there, and in runs slower than their neighbours)."
  cat <<EOF

Per run, at the load generator: the failing exit is rank N/2's Exited
{signal 9}, timed when it is handed to gRPC. The service then fails the
attempt, sends the other ranks Shutdown, and acknowledges each exit report;
each agent registers again in standby ("all in standby": the last such
registration written). At its next Tick (the tick column: tfslurmd's ticker
runs core's timers that often, and polls Slurm at most every $poll_ms ms)
the service finds every agent waiting, records attempt 2 in the same job and
sends each NextAttempt ("last standby -> first NextAttempt" is mostly that
wait for the Tick); each agent cancels its standby stream and registers for
attempt 2 on a new stream and port, and the barrier sends attempt 2's
Assignments. "attempt 1" is the first rendezvous of the same run, for
comparison. Percentiles over the runs are nearest-rank (with 10-20 runs p99
is the slowest run). One fresh server per N; server and load generator share
the machine's CPUs, and each agent acts in its own streams' gRPC reactions.
With \`-- --agents-per-connection K\` K ranks share a connection; with
\`--node-streams\` as well, each connection carries one ConnectNode stream,
the node relay's, and each of a rank's streams (attempt 1, standby,
attempt 2) is a new lane of it. tfslurmd and the floor get the same
arguments.

Per-run rows (CSV):

\`\`\`
EOF
  for n in "${size_list[@]}"; do cat "$work/runs-$n.csv" 2>/dev/null; done | awk 'NR==1 || !/^n,/'
  echo '```'
  echo
  echo "The floor's rows:"
  echo
  echo '```'
  for n in "${size_list[@]}"; do cat "$work/floor-runs-$n.csv" 2>/dev/null; done | awk 'NR==1 || !/^n,/'
  echo '```'
} >"$work/section.md"
results_append "Rendezvous of a restart in place (issue 29)" "$command_line" "$work/section.md"
cat "$table"
echo "floor (bare gRPC):"
cat "$floor_table"
cat "$compare"
