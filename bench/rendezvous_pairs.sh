#!/usr/bin/env bash
# tfslurmd's rendezvous storm against the bare gRPC floor's in alternating
# pairs (issues 3 and 15): in rendezvous.sh and torch_rendezvous.sh each
# server runs all its runs in one block, and whichever block runs later may
# meet a warmer or a busier machine; here every pair runs both, one measured
# run each after a warm-up, on a fresh server, the first of the pair
# alternating. Per invocation it records the load average at its start and
# the CPU other processes used while it ran. Prints the pairs and the ratio.
#
#   bench/rendezvous_pairs.sh [--size 4096] [--pairs 20]
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

size=4096 pairs=20
while (($#)); do
  case "$1" in
    --size) size="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
command_line="bench/rendezvous_pairs.sh --size $size --pairs $pairs"

build_all
work="$(mktemp -d /tmp/bench-pairs-XXXX)"
trap 'rm -rf "$work"' EXIT

# As torch_rendezvous.sh: the machine's CPU time, and this shell's finished
# children's (`times` must run in this shell, not in a $(...) subshell).
machine_cpu() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{print ($2+$3+$4+$7+$8+$9)/hz}' /proc/stat; }
own_cpu() {
  times >"$work/times.txt"
  OWN_CPU=$(awk 'NR==2{n=split($0,a," "); s=0; for(i=1;i<=n;i++){split(a[i],b,/[ms]/); s+=b[1]*60+b[2]} print s}' "$work/times.txt")
}

echo "pair,server,load,others_cpu_s,gap_ms,last_assign_ms,server_cpu_ms,client_cpu_ms,errors" >"$work/pairs.csv"
for ((pair = 1; pair <= pairs; pair++)); do
  order="tfslurm floor"
  ((pair % 2 == 0)) && order="floor tfslurm"
  for which in $order; do
    server="$BENCH_BIN/bench_rendezvous_server"
    [[ $which == floor ]] && server="$BENCH_BIN/bench_rendezvous_floor"
    wait_quiet 300
    own_cpu
    m0=$(machine_cpu) o0=$OWN_CPU
    rm -f "$work/run.csv"
    # The storm exits 1 when a run (the warm-up too) had an error: an agent
    # refused, a stream broken, an assignment missing. The pair is kept
    # (its errors column says how many) and the script fails at its end.
    "$BENCH_BIN/bench_rendezvous_storm" --server "$server" --sizes "$size" --runs 1 --warmup 1 \
      --dir "$work/srv" --runs-csv "$work/run.csv" >/dev/null 2>"$work/run.err" ||
      bench_error "pair $pair: the storm against $which failed: $(tail -3 "$work/run.err" | tr '\n' ' ')"
    own_cpu
    others=$(awk -v m0="$m0" -v m1="$(machine_cpu)" -v o0="$o0" -v o1="$OWN_CPU" \
      'BEGIN{x=(m1-m0)-(o1-o0); printf "%.1f", x<0?0:x}')
    # The measured run is run 1 (run 0 is the warm-up).
    row="$(awk -F, -v p="$pair" -v w="$which" -v l="$BENCH_LOAD_AT_START" -v o="$others" \
      '$2=="1"{print p","w","l","o","$7","$6","$16","$17","$10+$11+$12}' "$work/run.csv" 2>/dev/null)"
    if [[ -z "$row" ]]; then
      bench_error "pair $pair: no measured run against $which"
      continue
    fi
    echo "$row" >>"$work/pairs.csv"
    [[ ${row##*,} == 0 ]] || bench_error "pair $pair: ${row##*,} errors against $which"
    log "pair $pair: $row"
  done
done

python3 - "$work/pairs.csv" >"$work/section.md" <<'EOF'
import csv, math, statistics, sys

rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    by.setdefault(int(r["pair"]), {})[r["server"]] = r
# A pair with a side missing (its storm failed: the script fails too) is
# left out of the figures.
by = {p: sides for p, sides in by.items() if len(sides) == 2}
if not by:
    print("No complete pair: nothing measured.")
    sys.exit(0)

def pct(v, p):
    v = sorted(v)
    return v[min(max(math.ceil(p / 100 * len(v)), 1), len(v)) - 1]

def ratio(a, b):
    return f"{a / b:.2f}x" if b else "-"

t = [float(by[p]["tfslurm"]["gap_ms"]) for p in sorted(by)]
f = [float(by[p]["floor"]["gap_ms"]) for p in sorted(by)]
ratios = [a / b for a, b in zip(t, f) if b]
tw = [float(by[p]["tfslurm"]["last_assign_ms"]) for p in sorted(by)]
fw = [float(by[p]["floor"]["last_assign_ms"]) for p in sorted(by)]
tc = [float(by[p]["tfslurm"]["server_cpu_ms"]) for p in sorted(by)]
fc = [float(by[p]["floor"]["server_cpu_ms"]) for p in sorted(by)]
others = [float(r["others_cpu_s"]) for r in rows]
loads = [float(r["load"]) for r in rows]
print("| | tfslurmd | floor | tfslurmd / floor |")
print("|---|---|---|---|")
print(f"| last reg -> last assignment p50 / p99 (ms) | {pct(t, 50):.1f} / {pct(t, 99):.1f} "
      f"| {pct(f, 50):.1f} / {pct(f, 99):.1f} | {ratio(pct(t, 50), pct(f, 50))} / {ratio(pct(t, 99), pct(f, 99))} |")
print(f"| whole storm p50 (ms) | {pct(tw, 50):.1f} | {pct(fw, 50):.1f} | {ratio(pct(tw, 50), pct(fw, 50))} |")
print(f"| server CPU per storm p50 (ms) | {pct(tc, 50):.0f} | {pct(fc, 50):.0f} | {ratio(pct(tc, 50), pct(fc, 50))} |")
print()
print(f"{len(ratios)} pairs; per pair, tfslurmd / floor: median {statistics.median(ratios):.2f}x, "
      f"{sum(x <= 1.15 for x in ratios)} of {len(ratios)} at or under 1.15x, tfslurmd faster in "
      f"{sum(x < 1 for x in ratios)}; sorted: {' '.join(f'{x:.2f}' for x in sorted(ratios))}.")
print(f"Errors (refused, broken or missing assignments): {sum(int(r['errors']) for r in rows)}. "
      f"Load average at the start of each invocation {min(loads):.2f} to {max(loads):.2f}; "
      f"CPU used by other processes during one: at most {max(others):.1f} s.")
print()
print("<details><summary>Pairs (CSV)</summary>")
print()
print("```")
print(open(sys.argv[1]).read().rstrip())
print("```")
print()
print("</details>")
EOF
results_append "Rendezvous in alternating pairs, $size agents: tfslurmd and the bare gRPC floor" "$command_line" "$work/section.md"
cat "$work/section.md"
