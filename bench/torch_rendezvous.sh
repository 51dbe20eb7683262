#!/usr/bin/env bash
# PyTorch's TCPStore rendezvous against tfslurm's (issue 15), side by side in
# one run on one machine. For each N: the rendezvous storm of rendezvous.sh
# against tfslurmd's wiring (bench_rendezvous_server) and against the bare
# gRPC floor (bench_rendezvous_floor), then N ranks doing what
# torch.distributed.init_process_group does for its rendezvous against one
# TCPStore (bench_tcpstore_storm, libtorch 1.13 from Debian's libtorch-dev).
# See README.md, "TCPStore rendezvous".
#
#   bench/torch_rendezvous.sh [--sizes 64,512,4096] [--runs 20] [--runs-4096 10] [--warmup 2]
#                             [--order tfslurm,floor,tcpstore] [--tcpstore-arg ARG]...
#                             [-- extra bench_rendezvous_storm arguments]
#
# --order: which of the three goes first for each N (what runs second or
# third may meet a warmer or a busier machine). --tcpstore-arg passes ARG to
# bench_tcpstore_storm (e.g. --agent-store, --wait-barrier, --timeout-ms
# 120000).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

sizes="64,512,4096" runs=20 runs_big=10 warmup=2 order="tfslurm,floor,tcpstore"
tcpstore_args=()
while (($#)); do
  case "$1" in
    --sizes) sizes="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --runs-4096) runs_big="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --order) order="$2"; shift 2 ;;
    --tcpstore-arg) tcpstore_args+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) die "unknown argument $1" ;;
  esac
done
IFS=, read -r -a order_list <<<"$order"
[[ "$(printf '%s\n' "${order_list[@]}" | sort | tr '\n' ,)" == "floor,tcpstore,tfslurm," ]] ||
  die "--order takes tfslurm, floor and tcpstore once each, e.g. tcpstore,floor,tfslurm"
command_line="bench/torch_rendezvous.sh --sizes $sizes --runs $runs --runs-4096 $runs_big --warmup $warmup"
[[ "$order" != "tfslurm,floor,tcpstore" ]] && command_line+=" --order $order"
for a in "${tcpstore_args[@]}"; do command_line+=" --tcpstore-arg $a"; done
command_line+="${*:+ -- $*}"

need_packages libtorch-dev
build_all
build_optional bench_tcpstore_storm
tcpstore_version="$(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null || echo '?')"

work="$(mktemp -d /tmp/bench-torch-rdv-XXXX)"
trap 'rm -rf "$work"' EXIT

IFS=, read -r -a size_list <<<"$sizes"
extra=("$@")
loads=""
: >"$work/tfslurm.md"
: >"$work/floor.md"
: >"$work/tcpstore.md"
: >"$work/failures.md"
# append OUT TABLE: OUT's table (header the first time) goes to TABLE.
append() {
  if [[ -s "$2" ]]; then tail -n +3 "$1" >>"$2"; else cat "$1" >>"$2"; fi
  cat "$1" >&2
}
# CPU time of the whole machine (/proc/stat: all but idle and iowait) and of
# this script's finished children (the storms and their servers), in
# seconds; the difference over a phase is what other processes used while
# it measured (the load average at the start does not show work that
# begins later).
machine_cpu() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{print ($2+$3+$4+$7+$8+$9)/hz}' /proc/stat; }
# Sets OWN_CPU. `times` must run in this shell, not in a $(...) subshell.
own_cpu() {
  times >"$work/times.txt"
  OWN_CPU=$(awk 'NR==2{n=split($0,a," "); s=0; for(i=1;i<=n;i++){split(a[i],b,/[ms]/); s+=b[1]*60+b[2]} print s}' "$work/times.txt")
}
# run_one WHAT N RUNS: one of the three at one size.
run_one() {
  local what=$1 n=$2 r=$3 m0 o0 t0
  wait_quiet 600
  own_cpu
  m0=$(machine_cpu) o0=$OWN_CPU t0=$(date +%s.%N)
  case "$what" in
    tfslurm | floor)
      local server="$BENCH_BIN/bench_rendezvous_server" name="tfslurmd"
      [[ $what == floor ]] && server="$BENCH_BIN/bench_rendezvous_floor" name="the bare gRPC floor"
      log "storm of $n agents against $name, $r runs (+$warmup warm-up)"
      local status=0
      "$BENCH_BIN/bench_rendezvous_storm" --server "$server" --sizes "$n" --runs "$r" --warmup "$warmup" \
        --dir "$work/srv" --runs-csv "$work/$what-$n.csv" "${extra[@]}" >"$work/$what-$n.md" || status=$?
      ((status == 0)) || bench_error "the storm of $n agents against $name exited $status (its errors column and stderr say why)"
      [[ ! -s "$work/$what-$n.md" ]] || append "$work/$what-$n.md" "$work/$what.md"
      ;;
    tcpstore)
      log "$n ranks against one TCPStore, $r runs (+$warmup warm-up)"
      # It exits 1 after its table when a rank failed in a run: the table
      # is kept, and the failure listed beside it.
      if ! "$BENCH_BIN/bench_tcpstore_storm" --sizes "$n" --runs "$r" --warmup "$warmup" \
        --runs-csv "$work/tcpstore-$n.csv" "${tcpstore_args[@]}" >"$work/tcpstore-$n.md" 2>"$work/tcpstore-$n.err"; then
        log "TCPStore at $n ranks failed: $(tail -1 "$work/tcpstore-$n.err")"
        printf -- '- TCPStore, %s ranks: failed: `%s`\n' "$n" "$(tail -1 "$work/tcpstore-$n.err")" >>"$work/failures.md"
      fi
      [[ ! -s "$work/tcpstore-$n.md" ]] || append "$work/tcpstore-$n.md" "$work/tcpstore.md"
      grep -v '^bench_tcpstore_storm' "$work/tcpstore-$n.err" >&2 || true
      ;;
  esac
  own_cpu
  loads+="$(awk -v n="$n" -v w="$what" -v l="$BENCH_LOAD_AT_START" -v m="$(machine_cpu)" -v m0="$m0" \
    -v o="$OWN_CPU" -v o0="$o0" -v t="$(date +%s.%N)" -v t0="$t0" \
    'BEGIN{x=(m-m0)-(o-o0); printf "\n| %s | %s | %s | %.1f | %.1f |", n, w, l, t-t0, (x<0?0:x)}')"
}
for n in "${size_list[@]}"; do
  r=$runs
  ((n >= 4096)) && r=$runs_big
  for what in "${order_list[@]}"; do run_one "$what" "$n" "$r"; done
done

# The side-by-side table: nearest-rank percentiles over the measured runs
# (the warm-up runs are left out), from the per-run CSVs.
BENCH_WARMUP="$warmup" python3 - "$work" "${size_list[@]}" >"$work/summary.md" <<'EOF'
import csv, math, os, sys

work, sizes = sys.argv[1], sys.argv[2:]

def rows(name, n):
    path = os.path.join(work, f"{name}-{n}.csv")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))

def pct(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    return v[min(max(math.ceil(p / 100 * len(v)), 1), len(v)) - 1]

def measured(rs, warmup):
    return rs[warmup:]

def fmt(x):
    return "-" if math.isnan(x) else f"{x:.1f}"

def ratio(a, b):
    return "-" if math.isnan(a) or math.isnan(b) or b == 0 else f"{a / b:.2f}x"

warmup = int(os.environ.get("BENCH_WARMUP", "2"))
print("| N | tfslurm: last reg -> last assignment p50 / p99 (ms) | bare gRPC floor p50 / p99 (ms) "
      "| TCPStore: last entry -> last exit p50 / p99 (ms) | tfslurm / floor (p50, p99) "
      "| TCPStore / tfslurm (p50, p99) | whole, go -> last: tfslurm / floor / TCPStore p50 (ms) "
      "| server threads (max): tfslurmd / floor / TCPStore | server VmHWM (MB): tfslurmd / floor / TCPStore |")
print("|---|---|---|---|---|---|---|---|---|")
for n in sizes:
    t, f, s = (measured(rows(k, n), warmup) for k in ("tfslurm", "floor", "tcpstore"))
    tg = [float(r["gap_ms"]) for r in t]
    fg = [float(r["gap_ms"]) for r in f]
    sg = [float(r["gap_ms"]) for r in s if r["errors"] == "0"]
    tw = [float(r["last_assign_ms"]) for r in t]
    fw = [float(r["last_assign_ms"]) for r in f]
    sw = [float(r["last_exit_ms"]) for r in s if r["errors"] == "0"]
    all_runs = lambda name: rows(name, n)  # threads and RSS: warm-up runs too, as the storm's own table
    thr = [max((int(r["max_threads"]) for r in all_runs(k)), default=0) for k in ("tfslurm", "floor", "tcpstore")]
    hwm = [max((float(r["hwm_mb"]) for r in all_runs(k)), default=0) for k in ("tfslurm", "floor", "tcpstore")]
    failed = sum(1 for r in s if r["errors"] != "0")
    note = f" ({failed} of {len(s)} runs failed)" if failed else ""
    print(f"| {n} | {fmt(pct(tg, 50))} / {fmt(pct(tg, 99))} | {fmt(pct(fg, 50))} / {fmt(pct(fg, 99))} "
          f"| {fmt(pct(sg, 50))} / {fmt(pct(sg, 99))}{note} "
          f"| {ratio(pct(tg, 50), pct(fg, 50))}, {ratio(pct(tg, 99), pct(fg, 99))} "
          f"| {ratio(pct(sg, 50), pct(tg, 50))}, {ratio(pct(sg, 99), pct(tg, 99))} "
          f"| {fmt(pct(tw, 50))} / {fmt(pct(fw, 50))} / {fmt(pct(sw, 50))} "
          f"| {thr[0]} / {thr[1]} / {thr[2] or '-'} | {hwm[0]:.0f} / {hwm[1]:.0f} / {hwm[2]:.0f} |")
EOF

{
  echo "TCPStore: libtorch $tcpstore_version (Debian libtorch-dev; the library python3-torch calls)."
  echo "Order for each N: ${order//,/, then }."
  echo
  cat "$work/summary.md"
  if [[ -s "$work/failures.md" ]]; then
    echo
    cat "$work/failures.md"
  fi
  printf '\n| N | phase | load average at start | phase (s) | CPU used by other processes during it (s) |\n|---|---|---|---|---|%s\n' "$loads"
  cat <<'EOF'

"last reg -> last assignment" (tfslurmd, floor): at the load generator, the
last Register handed to gRPC -> the last Assignment received (each carries
the cluster's addresses, 9 KB at 4,096). "last entry -> last exit"
(TCPStore): the last rank's add(store_based_barrier_key, 1) issued -> the
last rank's add(key, 0) that returned N (ranks read the count every 10 ms,
as torch 1.13's _store_based_barrier does). "whole": from "go" to the last
assignment / the last barrier exit; for TCPStore it includes each rank's
check-in on "init/" and rank 0's reading of that count (TCPStore's
waitForWorkers) before rank 0 enters the barrier. Ratios are of the
percentiles. Connections are made before "go" and timed apart in all three
(TCPStore: two per rank, the client and the watch-key callback client, and
waited for until the store has accepted them all). Threads and VmHWM are
the server process's (one fresh server per N; warm-up runs included).

tfslurmd:

EOF
  cat "$work/tfslurm.md"
  printf '\nThe bare gRPC floor:\n\n'
  cat "$work/floor.md"
  printf '\nTCPStore (bench_tcpstore_storm%s):\n\n' "${tcpstore_args[*]:+ ${tcpstore_args[*]}}"
  cat "$work/tcpstore.md"
  for k in tfslurm floor tcpstore; do
    printf '\n<details><summary>%s, per-run rows (CSV)</summary>\n\n```\n' "$k"
    for n in "${size_list[@]}"; do [[ -f "$work/$k-$n.csv" ]] && cat "$work/$k-$n.csv"; done | awk 'NR==1 || !/^n,/'
    printf '```\n\n</details>\n'
  done
} >"$work/section.md"
# Failed TCPStore runs are figures too (they are in the section), but a run
# of this script that had any did not measure what it is for.
[[ ! -s "$work/failures.md" ]] || bench_error "TCPStore runs failed: $(tr '\n' ' ' <"$work/failures.md")"
results_append "PyTorch's TCPStore rendezvous against tfslurm's (issue 15)" "$command_line" "$work/section.md"
cat "$work/summary.md"
