# bench/api_latency.sh --tls: GET /experiments/{id} over plaintext and over
# TLS, side by side (sourced by api_latency.sh with its options set).
# shellcheck shell=bash

build_all
kv() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
work="$(mktemp -d /tmp/bench-api-tls-XXXX)"
chmod 755 "$work"
# Two services: the first's pid is kept here, the second is lib.sh's.
plain_pid=""
trap 'kill -TERM "$plain_pid" 2>/dev/null; wait "$plain_pid" 2>/dev/null; stop_tfslurmd; cancel_all_jobs; stop_cluster; rm -rf "$work"' EXIT
start_cluster
scontrol update PartitionName=debug State=DOWN
sed 's/"id": *"hello"/"id": "@ID@"/' "$REPO/examples/hello.json" >"$work/spec.json"

# start MODE: a tfslurmd with tokens, plaintext or TLS, and one experiment;
# sets PORT_<MODE>, HEADER_<MODE>, ID_<MODE>.
start() {
  local mode=$1 args=()
  if [[ $mode == tls ]]; then
    "$BUILD/bin/tfslurmd" tls init --dir "$work/pki" --name localhost --ip 127.0.0.1 >/dev/null
    args=(--tls-cert "$work/pki/server.pem" --tls-key "$work/pki/server.key" --tls-ca "$work/pki/ca.pem")
  fi
  TFSLURMD_AUTH=token start_tfslurmd "$work/$mode" "${args[@]}"
  local cacert=()
  [[ $mode == tls ]] && cacert=(--cacert "$work/pki/ca.pem")
  "$BENCH_BIN/bench_http_rate" --port "$HTTP_PORT" --path /experiments --method POST \
    --body-file "$work/spec.json" --id-prefix "api-$mode" --count 1 --connections 1 --rate 0 \
    --header "$AUTH_HEADER" "${cacert[@]}" >/dev/null || die "the $mode service refused the submission"
  printf -v "PORT_$mode" '%s' "$HTTP_PORT"
  printf -v "HEADER_$mode" '%s' "$AUTH_HEADER"
  printf -v "ID_$mode" '%s' "api-$mode-0"
}
start plain
plain_pid=$TFSLURMD_PID
start tls

out="$work/section.md"
{
  echo "### GET /experiments/{id}, plaintext and TLS side by side"
  echo
  echo "Two tfslurmd on one local cluster, each with an admin token and one experiment (examples/hello.json, pending on a DOWN partition); the TLS one with \`tfslurmd tls init\`'s ECDSA P-256 certificate, which the client verifies. bench_http_rate: $conns keep-alive connections, ${duration} s after 2 s of warm-up, latency from each request's scheduled time; $rounds alternating rounds per rate."
  echo
  echo "| target req/s | round | mode | load | achieved req/s | unsent | p50 ms | p90 ms | p99 ms | max ms | errors | reconnects |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
} >"$out"
IFS=, read -r -a rate_list <<<"$rates"
for r in "${rate_list[@]}"; do
  for ((k = 1; k <= rounds; k++)); do
    for mode in plain tls; do
      wait_quiet 300
      port_var="PORT_$mode" header_var="HEADER_$mode" id_var="ID_$mode"
      cacert=()
      [[ $mode == tls ]] && cacert=(--cacert "$work/pki/ca.pem")
      line="$("$BENCH_BIN/bench_http_rate" --port "${!port_var}" --path "/experiments/${!id_var}" --rate "$r" \
        --connections "$conns" --duration "$duration" --warmup 2 --header "${!header_var}" "${cacert[@]}")" ||
        die "bench_http_rate failed ($mode at $r/s): $line"
      log "$mode @ $r/s round $k (load $BENCH_LOAD_AT_START): $line"
      [[ $(kv errors "$line") == 0 ]] || die "$mode at $r/s: errors in $line"
      echo "$r $mode $(kv p99_ms "$line")" >>"$work/p99.txt"
      printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$r" "$k" "$mode" \
        "$BENCH_LOAD_AT_START" "$(kv achieved_rate "$line")" "$(kv unsent "$line")" "$(kv p50_ms "$line")" \
        "$(kv p90_ms "$line")" "$(kv p99_ms "$line")" "$(kv max_ms "$line")" "$(kv errors "$line")" \
        "$(kv reconnects "$line")" >>"$out"
    done
  done
done
{
  echo
  echo "Median of the rounds' p99 (ms):"
  echo
  echo "| target req/s | plaintext | TLS | target (TLS) |"
  echo "|---|---|---|---|"
  python3 - "$work/p99.txt" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    rate, mode, p99 = line.split()
    rows.setdefault(int(rate), {}).setdefault(mode, []).append(float(p99))
for rate in sorted(rows):
    plain, tls = statistics.median(rows[rate]["plain"]), statistics.median(rows[rate]["tls"])
    verdict = ("met" if tls <= 2.0 else "NOT met") if rate == 2000 else "-"
    print(f"| {rate} | {plain:.2f} | {tls:.2f} | {verdict} (p99 <= 2 ms at 2,000 req/s) |")
PY
  echo
} >>"$out"
results_append "API latency, TLS against plaintext (issue 45)" "$command_line" "$out"
cat "$out"
