#!/usr/bin/env bash
# Rendezvous storm (issue 3): N simulated agents register at once; figures
# per N over several runs. See README.md, "Rendezvous storm".
#
#   bench/rendezvous.sh [--sizes 64,512,4096] [--runs 20] [--runs-4096 10] [--warmup 2]
#                       [--tls] [--rounds 2] [-- extra bench_rendezvous_storm arguments]
#
# tfslurmd and its anchor, the bare gRPC floor, run in ROUNDS alternating
# rounds of RUNS/ROUNDS runs each (each round a fresh server), so that both
# see the same machine: a shared machine's speed drifts by more than the
# difference between them (the floor's storm of 16,384 agents took 1.6 s and
# 2.3 s an hour apart). bench/storm_compare.py puts them side by side with
# their ratio, and issue 49's targets at 16,384 agents. The extra arguments
# go to every storm, tfslurmd's and the floor's alike, so that the ratio
# compares the same load: issue 49's setting, each node's 8 agents as lanes
# of one ConnectNode stream (as a node's relay carries them), is
#
#   bench/rendezvous.sh --sizes 16384 --runs 6 --runs-4096 6 --warmup 1 --rounds 3 \
#     -- --framework tensorflow --agents-per-connection 8 --node-streams
#
# --tls (issue 45): each size runs plaintext and TLS (agents verifying the
# service's certificate, as real ones do) in alternating rounds of runs/ROUNDS
# each, each round a fresh server, and prints them side by side with the
# ratio TLS/plaintext of the whole storm and of connect + storm (with TLS
# the connections include the handshakes); the target is at most 1.3x at
# 4,096 agents (bench/tls_compare.py). The same rounds then run against the
# bare gRPC floor with gRPC's own static TLS: the anchor, what TLS costs any
# gRPC service on this machine.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

sizes="64,512,4096" runs=20 runs_big=10 warmup=2 tls=0 rounds=2
while (($#)); do
  case "$1" in
    --sizes) sizes="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --runs-4096) runs_big="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --tls) tls=1; shift ;;
    --rounds) rounds="$2"; shift 2 ;;
    --) shift; break ;;
    *) die "unknown argument $1" ;;
  esac
done
tls_words=""
((tls)) && tls_words=" --tls"
command_line="bench/rendezvous.sh --sizes $sizes --runs $runs --runs-4096 $runs_big --warmup $warmup --rounds $rounds$tls_words${*:+ -- $*}"

build_all
work="$(mktemp -d /tmp/bench-rdv-XXXX)"
trap 'rm -rf "$work"' EXIT

table="$work/table.md" floor_table="$work/floor.md"
: >"$table"
: >"$floor_table"
IFS=, read -r -a size_list <<<"$sizes"
loads=""
extra=("$@")
# storm SERVER N RUNS OUT TABLE CSV: one size against one server; its row is
# appended to TABLE (with the header the first time). A storm with an error
# (an agent refused, a stream broken, an assignment missing: the storm exits
# 1 after its table) fails the script once the section is written.
storm() {
  local status=0
  "$BENCH_BIN/bench_rendezvous_storm" --server "$1" --sizes "$2" --runs "$3" --warmup "$warmup" \
    --dir "$work/srv" --runs-csv "$6" "${extra[@]}" >"$4" || status=$?
  ((status == 0)) || bench_error "the storm of $2 agents against $(basename "$1") exited $status (its errors column and stderr say why)"
  [[ -s "$4" ]] || return 0
  if [[ -s "$5" ]]; then tail -n +3 "$4" >>"$5"; else cat "$4" >>"$5"; fi
  cat "$4" >&2
}
# tls_rounds N R SERVER NAME: plaintext and TLS in alternating rounds against
# fresh SERVERs (tfslurmd's, or the bare gRPC floor), each mode's per-run rows
# gathered in one CSV, NAME-MODE-N.csv.
tls_rounds() {
  local n=$1 r=$2 server=$3 name=$4 k per=$(($2 / rounds > 0 ? $2 / rounds : 1))
  : >"$work/$name-plain-$n.csv"
  : >"$work/$name-tls-$n.csv"
  for ((k = 0; k < rounds; k++)); do
    for mode in plain tls; do
      wait_quiet 600
      tls_loads+="${tls_loads:+, }$n $name $mode round $((k + 1)): $BENCH_LOAD_AT_START"
      log "storm of $n agents against $name, $mode, round $((k + 1)) of $rounds: $per runs (+$warmup warm-up)"
      local tls_args=()
      [[ $mode == tls ]] && tls_args=(--tls "$work/pki")
      "$BENCH_BIN/bench_rendezvous_storm" --server "$server" --sizes "$n" \
        --runs "$per" --warmup "$warmup" --dir "$work/srv" --runs-csv "$work/round.csv" \
        "${tls_args[@]}" "${extra[@]}" >"$work/round.md"
      awk -v w="$warmup" -F, 'NR > 1 && $2 >= w' "$work/round.csv" >>"$work/$name-$mode-$n.csv"
    done
  done
}

# append_rows ROUND.csv ALL.csv: a round's per-run rows, the header once.
append_rows() {
  [[ -s "$1" ]] || return 0 # a storm that failed before writing any (bench_error says why)
  if [[ -s "$2" ]]; then tail -n +2 "$1" >>"$2"; else cat "$1" >>"$2"; fi
}

tls_loads=""
for n in "${size_list[@]}"; do
  r=$runs
  ((n >= 4096)) && r=$runs_big
  if ((tls)); then
    # tfslurmd, then the anchor: the bare gRPC floor, plaintext against its
    # own TLS (gRPC's static SSL credentials), what TLS costs any gRPC
    # service on this machine.
    tls_rounds "$n" "$r" "$BENCH_BIN/bench_rendezvous_server" tfslurmd
    tls_rounds "$n" "$r" "$BENCH_BIN/bench_rendezvous_floor" floor
    python3 "$REPO/bench/tls_compare.py" "$n" "$work/tfslurmd-plain-$n.csv" "$work/tfslurmd-tls-$n.csv" \
      "$work/floor-plain-$n.csv" "$work/floor-tls-$n.csv" >>"$work/tls.md" ||
      die "bench/tls_compare.py failed"
    continue
  fi
  per=$((r / rounds > 0 ? r / rounds : 1))
  : >"$work/runs-$n.csv"
  : >"$work/floor-runs-$n.csv"
  for ((k = 1; k <= rounds; k++)); do
    wait_quiet 600
    loads+="${loads:+, }$n agents round $k: $BENCH_LOAD_AT_START"
    log "storm of $n agents against tfslurmd, round $k of $rounds: $per runs (+$warmup warm-up)"
    rm -f "$work/round.csv"
    storm "$BENCH_BIN/bench_rendezvous_server" "$n" "$per" "$work/out-$n.md" "$table" "$work/round.csv"
    append_rows "$work/round.csv" "$work/runs-$n.csv"
    # The floor right after, the same way: what this machine allows at all.
    wait_quiet 600
    log "storm of $n agents against the bare gRPC floor, round $k of $rounds: $per runs (+$warmup warm-up)"
    rm -f "$work/round.csv"
    storm "$BENCH_BIN/bench_rendezvous_floor" "$n" "$per" "$work/floor-$n.md" "$floor_table" "$work/round.csv"
    append_rows "$work/round.csv" "$work/floor-runs-$n.csv"
  done
  python3 "$REPO/bench/storm_compare.py" "$n" "$warmup" "$work/runs-$n.csv" "$work/floor-runs-$n.csv" \
    >>"$work/compare.md" || die "bench/storm_compare.py failed"
done

if ((tls)); then
  {
    echo "TLS against plaintext, side by side ($rounds alternating rounds per size, each a fresh"
    echo "server; warm-up runs left out). Load average when each round started: $tls_loads."
    echo
    cat "$work/tls.md"
  } >"$work/section.md"
  results_append "Rendezvous storm, TLS against plaintext (issue 45)" "$command_line" "$work/section.md"
  cat "$work/tls.md"
  exit 0
fi

{
  echo "tfslurmd and the bare gRPC floor side by side ($rounds alternating rounds per size, each a"
  echo "fresh server; warm-ups left out):"
  echo
  cat "$work/compare.md"
  echo "Each round's own rows, tfslurmd's:"
  echo
  cat "$table"
  echo
  echo "Load average when each round started: $loads."
  cat <<EOF

Per run, N = agents: "last reg -> last assignment" is, at the load generator,
the time from the last Register handed to gRPC (OnWriteDone) to the last
Assignment received; "whole storm" from the first stream opened to the last
Assignment; registrations/s = N / whole storm. Percentiles over the runs are
nearest-rank (with 10-20 runs p99 is the slowest run). "per agent" pools
every agent of every run. Connections (one TCP connection per agent, or
with \`-- --agents-per-connection K\` one per K agents: the agents of a node
sharing one, issue 49) are opened before the storm and timed apart
("connect"); with \`--node-streams\` as well, each connection carries one
ConnectNode stream, the node relay's, its K agents lanes of it (the
per-run lines on stderr say how many streams of which kind). Threads and RSS are the
server process's (/proc/PID/status sampled every 2 ms; VmHWM after the run),
one fresh server per round. Server and load generator share the machine's CPUs.

The floor: the same storm, in the rounds between tfslurmd's, against bench_rendezvous_floor, a
bare gRPC server with nothing but the streams (no store, no lifecycle, no
lock held while sending) that writes every stream an Assignment of the same
shape and size once all N have registered. Its figures bound what any
service speaking the agent protocol can reach on this machine with the load
generator beside it:

EOF
  cat "$floor_table"
  echo
  echo "Per-run rows (CSV):"
  echo
  echo '```'
  for n in "${size_list[@]}"; do cat "$work/runs-$n.csv" 2>/dev/null; done | awk 'NR==1 || !/^n,/'
  echo '```'
  echo
  echo "Floor, per-run rows (CSV):"
  echo
  echo '```'
  for n in "${size_list[@]}"; do cat "$work/floor-runs-$n.csv" 2>/dev/null; done | awk 'NR==1 || !/^n,/'
  echo '```'
} >"$work/section.md"
results_append "Rendezvous storm (issue 3)" "$command_line" "$work/section.md"
cat "$work/compare.md"
