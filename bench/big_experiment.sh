#!/usr/bin/env bash
# An experiment of 16,384 tasks in the store (issue 49, point 5): what
# GET /experiments/{id} costs at that size. Seeds tfslurmd's database with
# one ended PyTorch experiment of N ranks (tests/e2e/programs/
# seed_big_experiment.py: its rows as after a rank was killed and the
# others reaped; no cluster could run it) and one of 6 ranks, the anchor
# (issue 8's GET figures are of a 6-task experiment). Then, in one run,
# at a fixed rate (bench_http_rate, latency from each request's scheduled
# time): the 6-task experiment, the big one whole, and the big one as the
# dashboard asks for it (a page of 100 tasks, ?tasks_limit=100); each
# answer's size, tfslurmd's CPU and RSS. Starts its own Slurm cluster (the
# daemon needs one to start) and tfslurmd.
#
# The whole answer is asked at --whole-rate only (2/s): at 16,384 tasks it
# costs about 0.4 s of CPU, so at 100 req/s no answer would come back within
# the run, and its latency would be the queue's.
#
#   bench/big_experiment.sh [--tasks 16384] [--rate 100] [--whole-rate 2] [--duration 10]
#                           [--connections 4]
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

tasks=16384 rate=100 whole_rate=2 duration=10 conns=4
while (($#)); do
  case "$1" in
    --tasks) tasks="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --whole-rate) whole_rate="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --connections) conns="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
command_line="bench/big_experiment.sh --tasks $tasks --rate $rate --whole-rate $whole_rate --duration $duration --connections $conns"

build_all
work="$(mktemp -d /tmp/bench-big-XXXX)"
chmod 755 "$work"
clean_up_on_exit "$work"
start_cluster
mkdir -p "$work/svc"
"$BENCH_BIN/tfslurmd" token create --user bench-seed --db "$work/svc/tfslurm.db" >/dev/null 2>&1 ||
  die "tfslurmd could not make the database"
seed="$REPO/tests/e2e/programs/seed_big_experiment.py"
started=$SECONDS
/usr/bin/python3 "$seed" "$work/svc/tfslurm.db" big "$tasks" || die "seeding $tasks tasks failed"
seed_s=$((SECONDS - started))
/usr/bin/python3 "$seed" "$work/svc/tfslurm.db" small 6 || die "seeding the 6-task experiment failed"
start_tfslurmd "$work/svc"
wait_quiet 600

kv() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
cpu_ms() { awk '{print ($14 + $15) * 10}' "/proc/$TFSLURMD_PID/stat"; }
out="$work/section.md"
{
  echo "| GET | answer (bytes) | tasks in it | target req/s | achieved req/s | unsent | p50 ms | p90 ms | p99 ms | max ms | tfslurmd CPU per request (ms) | errors |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
} >"$out"
# The whole answer last: when tfslurmd cannot keep up, the requests it still
# has queued would be counted against the next GET's.
for path in /experiments/small "/experiments/big?tasks_limit=100" "/experiments/big?task_state=failed" /experiments/big; do
  bytes="$(curl -s -o "$work/body.json" -w '%{size_download}' "$API$path")" || bench_error "GET $path failed"
  n="$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["tasks"]))' "$work/body.json" 2>/dev/null || echo '?')"
  before="$(cpu_ms)"
  status=0
  r=$rate
  [[ $path == /experiments/big ]] && r=$whole_rate
  line="$("$BENCH_BIN/bench_http_rate" --port "$HTTP_PORT" --path "$path" --rate "$r" --connections "$conns" \
    --duration "$duration" --warmup 2)" || status=$?
  after="$(cpu_ms)"
  log "$path @ $r/s: $line"
  check_http_rate "GET $path at $r/s" "$line" "$status"
  answered="$(kv requests "$line")"
  per="$(awk -v c=$((after - before)) -v n="${answered:-0}" 'BEGIN { if (n > 0) printf "%.2f", c / n; else print "?" }')"
  printf '| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$path" "$bytes" "$n" "$(kv target_rate "$line")" \
    "$(kv achieved_rate "$line")" "$(kv unsent "$line")" "$(kv p50_ms "$line")" "$(kv p90_ms "$line")" \
    "$(kv p99_ms "$line")" "$(kv max_ms "$line")" "$per" "$(kv errors "$line")" >>"$out"
done
rss="$(awk '/^VmHWM/ {print $2 / 1024}' "/proc/$TFSLURMD_PID/status")"
{
  echo
  echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg). tfslurmd's peak RSS (VmHWM): ${rss} MB."
  cat <<EOF2

The store holds two ended PyTorch experiments, seeded before tfslurmd
started: \`big\`, $tasks ranks (one failed, the others reaped; seeded in
${seed_s} s by tests/e2e/programs/seed_big_experiment.py), and \`small\`, 6
ranks, the anchor. Each GET runs ${duration} s after 2 s of warm-up at
${rate} req/s (the whole big answer at ${whole_rate} req/s) over ${conns}
keep-alive connections (bench_http_rate;
latency from each request's scheduled time, so an answer that comes late
delays those queued behind it). "tfslurmd CPU per request" is its user +
system time over the run (/proc/PID/stat) divided by the requests
answered. \`?tasks_limit=100\` is what the dashboard asks for every 1.5 s;
\`?task_state=failed\` is its filter's.
EOF2
} >>"$out"
results_append "An experiment of $tasks tasks: GET /experiments/{id} (issue 49)" "$command_line" "$out"
cat "$out"
