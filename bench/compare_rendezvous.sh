#!/usr/bin/env bash
# Measures a proposed service change on the rendezvous storm: the working
# tree as it is against the same tree with PATCH... applied, built side by
# side in a copy under /tmp (the checkout is not touched), storms taking turns
# so that a busy machine weighs on both alike.
#
#   bench/compare_rendezvous.sh [--sizes 4096] [--runs 3] [--rounds 3] bench/proposals/X.patch...
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

sizes=4096 runs=3 rounds=3 patches=()
while (($#)); do
  case "$1" in
    --sizes) sizes="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    -*) die "unknown argument $1" ;;
    *) patches+=("$(realpath "$1")"); shift ;;
  esac
done
((${#patches[@]})) || die "usage: $0 [--sizes N,...] [--runs R] [--rounds K] PATCH..."
command_line="bench/compare_rendezvous.sh --sizes $sizes --runs $runs --rounds $rounds ${patches[*]#"$REPO/"}"

build_all  # the load generator
work="$(mktemp -d /tmp/bench-cmp-XXXX)"
trap 'rm -rf "$work"' EXIT
log "copying the tree to $work/tree"
mkdir "$work/tree"
tar -C "$REPO" --exclude=./build --exclude=./.git --exclude=node_modules -cf - . | tar -C "$work/tree" -xf -
cmake -S "$work/tree" -B "$work/build" -G Ninja -DCMAKE_PROJECT_INCLUDE="$work/tree/bench/standalone.cmake" \
  >"$work/build.log" 2>&1 || die "cmake failed: $(tail -5 "$work/build.log")"
log "building the tree as it is (log: $work/build.log)"
ninja -C "$work/build" -j2 bench_rendezvous_server >>"$work/build.log" 2>&1 || die "build failed: $(tail -20 "$work/build.log")"
cp "$work/build/bin/bench_rendezvous_server" "$work/server-tree"
for p in "${patches[@]}"; do
  (cd "$work/tree" && patch -p1 --quiet <"$p") || die "$p does not apply to the working tree"
done
log "building the tree + patches"
ninja -C "$work/build" -j2 bench_rendezvous_server >>"$work/build.log" 2>&1 || die "build failed: $(tail -20 "$work/build.log")"
cp "$work/build/bin/bench_rendezvous_server" "$work/server-patched"

wait_quiet 600
for ((r = 0; r < rounds; r++)); do
  for v in tree patched; do
    log "round $((r + 1))/$rounds: $v"
    "$BENCH_BIN/bench_rendezvous_storm" --server "$work/server-$v" --sizes "$sizes" --runs "$runs" --warmup 1 \
      --dir "$work/srv" --runs-csv "$work/$v-$r.csv" >/dev/null
  done
done

python3 - "$work" "$rounds" >"$work/section.md" <<'EOF'
import csv, sys
work, rounds = sys.argv[1], int(sys.argv[2])

def pct(v, p):
    v = sorted(v)
    r = min(len(v), max(1, -(-len(v) * p // 100)))
    return v[int(r) - 1]

print("| build | agents | runs | last reg -> last assignment p50 / p99 (ms) | whole storm p50 / p99 (ms) "
      "| server CPU per storm p50 (ms) | threads max | VmHWM max (MB) | errors |")
print("|---|---|---|---|---|---|---|---|---|")
for v, label in (("tree", "working tree"), ("patched", "tree + patches")):
    rows = []
    for r in range(rounds):
        rows += [x for x in csv.DictReader(open(f"{work}/{v}-{r}.csv")) if int(x["run"]) > 0]
    for n in sorted({int(x["n"]) for x in rows}):
        rs = [x for x in rows if int(x["n"]) == n]
        f = lambda k: [float(x[k]) for x in rs]
        errors = sum(int(x["refused"]) + int(x["broken"]) + int(x["missing"]) for x in rs)
        print(f"| {label} | {n} | {len(rs)} | {pct(f('gap_ms'), 50):.0f} / {pct(f('gap_ms'), 99):.0f} "
              f"| {pct(f('last_assign_ms'), 50):.0f} / {pct(f('last_assign_ms'), 99):.0f} "
              f"| {pct(f('server_cpu_ms'), 50):.0f} | {max(f('max_threads')):.0f} | {max(f('hwm_mb')):.0f} | {errors} |")
EOF
{
  echo
  echo "Patches: $(printf '`%s` ' "${patches[@]#"$REPO/"}"). Both builds come from the same copy of the working"
  echo "tree; storms take turns, one warm-up run per round is left out. See the rendezvous section for how"
  echo "each figure is taken."
} >>"$work/section.md"
results_append "Rendezvous: working tree vs working tree + proposed patches" "$command_line" "$work/section.md"
cat "$work/section.md"
