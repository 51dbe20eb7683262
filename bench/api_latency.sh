#!/usr/bin/env bash
# API latency (issue 8) over keep-alive connections:
#   POST /experiments with real submission (partition debug set DOWN, so the
#   jobs stay pending), closed loop on 1 and 4 connections, creating the
#   1,000 experiments the list needs;
#   GET /experiments/{id} at rising fixed rates (bench_http_rate, latency
#   from each request's scheduled time) and with wrk at saturation;
#   GET /experiments?limit=1000 (the whole list of 1,000) and the default
#   page (50) with 1,000 experiments in the store, the same way.
# Starts its own Slurm cluster and tfslurmd; cancels every job at the end.
#
#   bench/api_latency.sh [--rates 250,500,1000,2000,4000,8000] [--list-rates 25,50,100,200]
#                        [--page-rates 500,1000,2000,4000] [--connections 8] [--duration 10]
#                        [--experiments 1000]
#   bench/api_latency.sh --tls [--rates 2000] [--rounds 3] [--connections 8] [--duration 10]
#
# --tls (issue 45): GET /experiments/{id} over plaintext and over TLS, side by
# side: two tfslurmd on the same cluster, one of them with `tfslurmd tls
# init`'s certificate (clients verify it, as tfctl does), each with an
# experiment submitted to the DOWN partition; at each rate, ROUNDS
# alternating runs of each. Keep-alive connections: each handshakes once.
# Target: p99 <= 2 ms at 2,000 req/s over TLS.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

rates="250,500,1000,2000,4000,8000" list_rates="25,50,100,200" page_rates="500,1000,2000,4000" conns=8 duration=10
experiments=1000 tls=0 rounds=3
while (($#)); do
  case "$1" in
    --rates) rates="$2"; shift 2 ;;
    --list-rates) list_rates="$2"; shift 2 ;;
    --page-rates) page_rates="$2"; shift 2 ;;
    --connections) conns="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --experiments) experiments="$2"; shift 2 ;;
    --tls) tls=1; shift ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
command_line="bench/api_latency.sh --rates $rates --list-rates $list_rates --page-rates $page_rates --connections $conns --duration $duration --experiments $experiments"
if ((tls)); then
  command_line="bench/api_latency.sh --tls --rates $rates --rounds $rounds --connections $conns --duration $duration"
  # shellcheck source=api_latency_tls.sh
  source "$BENCH_DIR/api_latency_tls.sh"
  exit 0
fi
need_packages wrk

build_all
work="$(mktemp -d /tmp/bench-api-XXXX)"
chmod 755 "$work"
clean_up_on_exit "$work"
start_cluster
scontrol update PartitionName=debug State=DOWN
TFSLURMD_AUTH=token start_tfslurmd "$work/svc"
export BENCH_DIR

# The spec: examples/hello.json (2 ps + 4 workers on 3 nodes), a new id each.
sed 's/"id": *"hello"/"id": "@ID@"/' "$REPO/examples/hello.json" >"$work/spec.json"
grep -q '@ID@' "$work/spec.json" || die "examples/hello.json has no \"id\": \"hello\" to replace"

out="$work/section.md"
svc_status() { awk '/^(Threads|VmRSS|VmHWM)/ {printf "%s %s %s  ", $1, $2, $3}' "/proc/$TFSLURMD_PID/status"; }
kv() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
row_wrk() { # label line
  local l="$2"
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$(kv rps "$l")" "$(kv p50_ms "$l")" "$(kv p90_ms "$l")" \
    "$(kv p99_ms "$l")" "$(kv max_ms "$l")" "$(($(kv socket_errors "$l" | grep . || echo 0) + $(kv non2xx "$l" | grep . || echo 0)))"
}
row_rate() { # line
  local l="$1"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$(kv target_rate "$l")" "$(kv achieved_rate "$l")" \
    "$(kv unsent "$l")" "$(kv p50_ms "$l")" "$(kv p90_ms "$l")" "$(kv p99_ms "$l")" "$(kv max_ms "$l")" "$(kv errors "$l")" \
    "$(kv reconnects "$l")"
}
count_experiments() { curl -sf -H "$AUTH_HEADER" "$API/experiments?limit=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])'; }

wait_quiet 600
{
  echo "### POST /experiments (real submission to a DOWN partition), closed loop"
  echo
  echo "bench_http_rate --rate 0: each connection sends its next POST when the last is answered."
  echo
  echo "| connections | experiments created | submissions/s | p50 ms | p90 ms | p99 ms | max ms | errors |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$out"
# 1 connection: 40% of the experiments; 4 connections: the rest.
first=$((experiments * 2 / 5))
for c in 1 4; do
  n=$((c < 2 ? first : experiments - first))
  status=0
  line="$("$BENCH_BIN/bench_http_rate" --port "$HTTP_PORT" --path /experiments --method POST \
    --body-file "$work/spec.json" --id-prefix "post-c$c" --count "$n" --connections "$c" --rate 0 \
    --header "$AUTH_HEADER")" || status=$?
  log "POST c=$c: $line"
  check_http_rate "POST /experiments, $c connections" "$line" "$status"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$c" "$(kv requests "$line")" "$(kv achieved_rate "$line")" \
    "$(kv p50_ms "$line")" "$(kv p90_ms "$line")" "$(kv p99_ms "$line")" "$(kv max_ms "$line")" "$(kv errors "$line")" >>"$out"
done
total="$(count_experiments)"
pending="$(squeue -h -t PD | wc -l)"
# Every POST answered 201 made one experiment and one pending job; the
# lists below are measured with that many.
((total == experiments)) || bench_error "$experiments POSTs answered, but the store has $total experiments"
((pending == experiments)) || bench_error "$experiments experiments, but Slurm has $pending pending jobs"
{
  echo
  echo "Store after the POST phase: $total experiments; Slurm: $pending pending jobs (partition debug DOWN)."
  echo "tfslurmd: $(svc_status)"
  echo
} >>"$out"

id="$(curl -sf -H "$AUTH_HEADER" "$API/experiments?limit=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["experiments"][0]["id"])')"
bytes_one="$(curl -sf -H "$AUTH_HEADER" "$API/experiments/$id" | wc -c)"
bytes_list="$(curl -sf -H "$AUTH_HEADER" "$API/experiments?limit=1000" | wc -c)"
bytes_page="$(curl -sf -H "$AUTH_HEADER" "$API/experiments" | wc -c)"

measure() { # title path rates
  local title="$1" path="$2" rates_csv="$3" r line
  {
    echo "### $title"
    echo
    echo "Fixed rates, $conns keep-alive connections, ${duration} s each after 2 s of warm-up (bench_http_rate; latency from each request's scheduled time):"
    echo
    echo "| target req/s | achieved req/s | unsent (behind schedule at the end) | p50 ms | p90 ms | p99 ms | max ms | errors | server-closed connections |"
    echo "|---|---|---|---|---|---|---|---|---|"
  } >>"$out"
  IFS=, read -r -a rl <<<"$rates_csv"
  for r in "${rl[@]}"; do
    status=0
    line="$("$BENCH_BIN/bench_http_rate" --port "$HTTP_PORT" --path "$path" --rate "$r" --connections "$conns" \
      --duration "$duration" --warmup 2 --header "$AUTH_HEADER")" || status=$?
    log "$path @ $r/s: $line"
    check_http_rate "GET $path at $r/s" "$line" "$status"
    row_rate "$line" >>"$out"
  done
  {
    echo
    echo "wrk at saturation (${duration} s):"
    echo
    echo "| connections | requests/s | p50 ms | p90 ms | p99 ms | max ms | errors |"
    echo "|---|---|---|---|---|---|---|"
  } >>"$out"
  for c in 1 "$conns"; do
    line="$(wrk -t"$((c < 2 ? 1 : 2))" -c"$c" -d"${duration}s" -H "$AUTH_HEADER" -s "$BENCH_DIR/wrk/get.lua" "$API$path" | grep '^wrk:')" ||
      bench_error "GET $path, wrk with $c connections: no figures"
    log "$path wrk c=$c: $line"
    check_wrk "GET $path, $c connections" "$line"
    row_wrk "$c" "$line" >>"$out"
  done
  echo "" >>"$out"
  echo "tfslurmd after: $(svc_status)" >>"$out"
  echo "" >>"$out"
}

wait_quiet 300
measure "GET /experiments/{id} ($bytes_one bytes: one experiment, 1 attempt, 6 tasks, its events)" "/experiments/$id" "$rates"
wait_quiet 300
measure "GET /experiments?limit=1000 (the whole list: $bytes_list bytes, $total experiments in the store)" "/experiments?limit=1000" "$list_rates"
wait_quiet 300
measure "GET /experiments (default page of 50: $bytes_page bytes, $total experiments in the store)" "/experiments" "$page_rates"

curl -sf -H "$AUTH_HEADER" "$API/experiments?limit=1000" |
  python3 -c 'import json,sys; [print("/experiments/" + e["id"]) for e in json.load(sys.stdin)["experiments"]]' \
    >"$work/ids.txt"

# Lists are cached until a write changes what they show, and the store
# above does not change while they are measured. Here it changes at twice
# the list's rate: experiments are cancelled (DELETE) at 50/s while the list
# is asked for at 25/s, so nearly every list is computed afresh. Each cancel
# is of another open experiment (a second cancel of one is refused, 409):
# the cancels over the warm-up, the window and its extra second must not
# outnumber the experiments, so with few (--experiments 10) the rate is less.
list_churn_rate=25 churn_rate=50
((churn_rate * (duration + 3) <= total)) || churn_rate=$((total / (duration + 3)))
((churn_rate > 0)) || bench_error "$total experiments are too few to cancel some while the list is measured"
wait_quiet 300
churn_status=0
"$BENCH_BIN/bench_http_rate" --port "$HTTP_PORT" --method DELETE --paths-file "$work/ids.txt" \
  --rate "$churn_rate" --connections 1 --duration "$((duration + 1))" --warmup 2 --header "$AUTH_HEADER" \
  >"$work/churn.txt" 2>"$work/churn.err" &
churn_pid=$!
status=0
line="$("$BENCH_BIN/bench_http_rate" --port "$HTTP_PORT" --path "/experiments?limit=1000" --rate "$list_churn_rate" \
  --connections "$conns" --duration "$duration" --warmup 2 --header "$AUTH_HEADER")" || status=$?
wait "$churn_pid" || churn_status=$?
log "list of 1000 @ $list_churn_rate/s while cancelling at $churn_rate/s: $line; cancels: $(cat "$work/churn.txt")"
check_http_rate "GET /experiments?limit=1000 while cancelling" "$line" "$status"
check_http_rate "DELETE at $churn_rate/s beside the list ($(tr '\n' ' ' <"$work/churn.err"))" "$(cat "$work/churn.txt")" "$churn_status"
{
  echo "### GET /experiments?limit=1000 while experiments are cancelled at $churn_rate/s (lists computed afresh)"
  echo
  echo "The list at $list_churn_rate req/s, $conns connections, ${duration} s after 2 s of warm-up, while another connection cancels open experiments at $churn_rate/s: each cancel changes what the list shows, so the cache rarely answers."
  echo
  echo "| target req/s | achieved req/s | unsent (behind schedule at the end) | p50 ms | p90 ms | p99 ms | max ms | errors | server-closed connections |"
  echo "|---|---|---|---|---|---|---|---|---|"
  row_rate "$line"
  echo
  echo "Cancels: $(kv achieved_rate "$(cat "$work/churn.txt")")/s achieved, p50 $(kv p50_ms "$(cat "$work/churn.txt")") ms, errors $(kv errors "$(cat "$work/churn.txt")")."
  echo
} >>"$out"

# A list made afresh reads the page's ids, then the summaries of the
# experiments whose kept item is stale, then the task counts of those still
# open (finished ones are answered from their row alone). The same list once
# every experiment is cancelled shows what the task counts cost: the ones
# still open are cancelled now, and then none may be left open.
open_experiments() {
  curl -sf -H "$AUTH_HEADER" "$API/experiments?limit=1000" | python3 -c '
import json, sys
ended = ("succeeded", "failed", "cancelled")
[print("/experiments/" + e["id"]) for e in json.load(sys.stdin)["experiments"] if e["state"] not in ended]'
}
open_experiments >"$work/open.txt" || bench_error "cannot list the open experiments"
if [[ -s "$work/open.txt" ]]; then
  status=0
  line="$("$BENCH_BIN/bench_http_rate" --port "$HTTP_PORT" --method DELETE --paths-file "$work/open.txt" \
    --count "$(wc -l <"$work/open.txt")" --connections 1 --rate 0 --header "$AUTH_HEADER")" || status=$?
  check_http_rate "DELETE of the $(wc -l <"$work/open.txt") experiments still open" "$line" "$status"
fi
still_open="$(open_experiments | wc -l)"
((still_open == 0)) || bench_error "$still_open experiments still open after every one was cancelled"
{
  echo "### GET /experiments?limit=1000 once all $total experiments are cancelled (no open experiment: no task counts)"
  echo
  echo "| connections | requests/s | p50 ms | p90 ms | p99 ms | max ms | errors |"
  echo "|---|---|---|---|---|---|---|"
} >>"$out"
wait_quiet 300
for c in 1 "$conns"; do
  line="$(wrk -t"$((c < 2 ? 1 : 2))" -c"$c" -d"${duration}s" -H "$AUTH_HEADER" -s "$BENCH_DIR/wrk/get.lua" \
    "$API/experiments?limit=1000" | grep '^wrk:')" || bench_error "the list of cancelled, wrk with $c connections: no figures"
  log "list of cancelled, wrk c=$c: $line"
  check_wrk "the list of cancelled, $c connections" "$line"
  row_wrk "$c" "$line" >>"$out"
done
echo >>"$out"

# The list made in-process after each change, with no HTTP, load generator
# or cluster beside it: what the two ways of making it cost by themselves.
wait_quiet 300
{
  echo "### GET /experiments?limit=1000 made in-process after each change (bench_list_page)"
  echo
  echo "\`bench_list_page --experiments 1000 --runs 300 --changes 1\`: a SQLite store of its own under /tmp with 1,000 queued experiments; after each change (one experiment's reason), the list body is made both ways, taking turns."
  echo
  echo "| way | runs | p50 ms | p99 ms | max ms | body bytes |"
  echo "|---|---|---|---|---|---|"
} >>"$out"
"$BENCH_BIN/bench_list_page" --experiments 1000 --runs 300 --changes 1 >"$work/list_page.txt" ||
  bench_error "bench_list_page exited $?"
[[ $(grep -c '^way=' "$work/list_page.txt") == 2 ]] || bench_error "bench_list_page: not both ways measured"
while read -r line; do
  log "bench_list_page: $line"
  printf '| %s | %s | %s | %s | %s | %s |\n' "$(kv way "$line" | tr _ ' ')" "$(kv runs "$line")" "$(kv p50_ms "$line")" \
    "$(kv p99_ms "$line")" "$(kv max_ms "$line")" "$(kv body_bytes "$line")" >>"$out"
done <"$work/list_page.txt"
echo >>"$out"

cat >>"$out" <<'EOF'
tfslurmd runs with its defaults and an admin API token (every request is
authenticated, as in a deployment). The load generators run on the
same machine as tfslurmd. Targets (issue 8): GET /experiments/{id} p99 <= 2 ms
at 2,000 req/s; list of 1,000 p99 <= 10 ms.
EOF
results_append "API latency (issue 8)" "$command_line" "$out"
cat "$out"
