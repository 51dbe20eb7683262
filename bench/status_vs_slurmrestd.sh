#!/usr/bin/env bash
# Status compared with slurmrestd (issue 8): the same question, "what state
# is this job in", for the same N jobs, asked
#   - of slurmrestd (Debian's package, openapi/v0.0.38):
#     GET /slurm/v0.0.38/job/JOBID, over its unix socket with rest_auth/local
#     (slurmrestd refuses to run as root: it runs as user nobody, and so does
#     its client);
#   - of tfslurmd: GET /experiments/ID (the experiment's view, which carries
#     the job's Slurm state), over loopback TCP with an API token.
# Closed loops (bench_http_rate --rate 0) on 1 and 4 connections, cycling
# over the N jobs. slurmctld's RPCs per query are counted with sdiag.
#
#   bench/status_vs_slurmrestd.sh [--experiments 500] [--requests 2000]
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

experiments=500 requests=2000
while (($#)); do
  case "$1" in
    --experiments) experiments="$2"; shift 2 ;;
    --requests) requests="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
command_line="bench/status_vs_slurmrestd.sh --experiments $experiments --requests $requests"
need_packages slurmrestd

build_all
work="$(mktemp -d /tmp/bench-rest-XXXX)"
chmod 755 "$work"
restd_pid=""
cleanup() {
  [[ -n "$restd_pid" ]] && { kill "$restd_pid" 2>/dev/null || true; wait "$restd_pid" 2>/dev/null || true; }
  stop_tfslurmd
  cancel_all_jobs
  stop_cluster
  rm -rf "$work"
}
trap cleanup EXIT
# slurmrestd runs as nobody and asks about root's jobs: with the local
# cluster's PrivateData=jobs (deploy/local-slurm/start.sh) nobody would see
# none of them. The comparison is of the two services' speed, so this
# cluster shows every job to everyone, as a cluster without PrivateData does.
LOCAL_SLURM_PRIVATE_DATA="" start_cluster
scontrol update PartitionName=debug State=DOWN

TFSLURMD_AUTH=token start_tfslurmd "$work/svc"
sed 's/"id": *"hello"/"id": "@ID@"/' "$REPO/examples/hello.json" >"$work/spec.json"
log "creating $experiments experiments"
"$BENCH_BIN/bench_http_rate" --port "$HTTP_PORT" --path /experiments --method POST --body-file "$work/spec.json" \
  --id-prefix st --count "$experiments" --connections 1 --rate 0 --header "$AUTH_HEADER" >&2 ||
  die "creating experiments failed"
sleep 5  # a poll or two: tfslurmd has the jobs' Slurm state
curl -sf -H "$AUTH_HEADER" "$API/experiments?limit=1000" | python3 -c '
import json, sys
items = json.load(sys.stdin)["experiments"]
with open(sys.argv[1], "w") as a, open(sys.argv[2], "w") as b:
    for e in items:
        a.write("/experiments/%s\n" % e["id"])
        b.write("/slurm/v0.0.38/job/%s\n" % e["slurm_job_id"])
' "$work/paths-tfslurmd.txt" "$work/paths-restd.txt"
chmod 644 "$work"/paths-*.txt
# Both loops cycle over every job: one without a Slurm job id, or one missing
# from the list, would ask a different question of each server.
[[ $(wc -l <"$work/paths-tfslurmd.txt") == "$experiments" ]] ||
  bench_error "$experiments experiments created, $(wc -l <"$work/paths-tfslurmd.txt") listed"
! grep -qvx '/slurm/v0.0.38/job/[0-9][0-9]*' "$work/paths-restd.txt" ||
  bench_error "an experiment without a Slurm job id: $(grep -vx '/slurm/v0.0.38/job/[0-9][0-9]*' "$work/paths-restd.txt" | head -1)"

# slurmrestd as nobody on a unix socket in a directory nobody can reach.
mkdir -p "$work/restd"
chown nobody "$work/restd"  # slurmrestd binds its socket after setuid
slurmrestd -f "$SLURM_CONF" -a rest_auth/local -s openapi/v0.0.38 -u nobody "unix:$work/restd/sock" \
  >"$work/restd.log" 2>&1 &
restd_pid=$!
for ((i = 0; i < 50; i++)); do [[ -S "$work/restd/sock" ]] && break; sleep 0.1; done
[[ -S "$work/restd/sock" ]] || die "slurmrestd did not start: $(cat "$work/restd.log")"
runuser -u nobody -- curl -sf --unix-socket "$work/restd/sock" "http://localhost$(head -1 "$work/paths-restd.txt")" |
  python3 -c 'import json,sys; print("slurmrestd answers job_state =", json.load(sys.stdin)["jobs"][0]["job_state"])' >&2 ||
  die "slurmrestd does not answer: $(cat "$work/restd.log")"

out="$work/section.md"
kv() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
declare -A p50 rps
measure() { # label conns command...
  local label="$1" c="$2" line rpcs
  shift 2
  sdiag -r >/dev/null
  local status=0
  line="$("$@" --paths-file "$work/paths-$([[ $label == slurmrestd ]] && echo restd || echo tfslurmd).txt" \
    --count "$((requests * c))" --connections "$c" --rate 0)" || status=$?
  check_http_rate "$label, $c connections" "$line" "$status"
  rpcs="$(sdiag | sed -n '/by message type/,/by user/p' | awk -v n="$((requests * c))" '
    /count:/ && !/REQUEST_STATS_INFO/ {split($0, a, "count:"); split(a[2], b, " "); s += b[1]}
    END {printf "%.2f", s / n}')"
  log "$label c=$c: $line (slurmctld RPCs per query: $rpcs)"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$c" "$(kv requests "$line")" \
    "$(kv achieved_rate "$line")" "$(kv p50_ms "$line")" "$(kv p90_ms "$line")" "$(kv p99_ms "$line")" \
    "$(kv max_ms "$line")" "$rpcs" >>"$work/rows.md"
  p50["$label/$c"]="$(kv p50_ms "$line")"
  rps["$label/$c"]="$(kv achieved_rate "$line")"
}

wait_quiet 300
: >"$work/rows.md"
for c in 1 4; do
  measure slurmrestd "$c" runuser -u nobody -- "$BENCH_BIN/bench_http_rate" --unix "$work/restd/sock"
  measure tfslurmd "$c" "$BENCH_BIN/bench_http_rate" --port "$HTTP_PORT" --header "$AUTH_HEADER"
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a / b; else print "-" }'; }
{
  echo "| server | connections | queries | queries/s | p50 ms | p90 ms | p99 ms | max ms | slurmctld RPCs per query |"
  echo "|---|---|---|---|---|---|---|---|---|"
  cat "$work/rows.md"
  echo
  echo "Ratios (slurmrestd / tfslurmd for latency p50; tfslurmd / slurmrestd for queries/s):"
  echo
  echo "| connections | latency p50 ratio | throughput ratio |"
  echo "|---|---|---|"
  for c in 1 4; do
    printf '| %s | %s | %s |\n' "$c" "$(ratio "${p50[slurmrestd/$c]}" "${p50[tfslurmd/$c]}")" \
      "$(ratio "${rps[tfslurmd/$c]}" "${rps[slurmrestd/$c]}")"
  done
  cat <<EOF

$experiments experiments = $experiments pending jobs (partition debug DOWN);
each loop cycles over all of them. A ratio above 1 means tfslurmd is faster.
slurmrestd asks slurmctld for every query; tfslurmd answers from its own store,
kept current by its one poll per cycle. Transports differ as deployed:
slurmrestd over a unix socket with rest_auth/local, tfslurmd over loopback
TCP with a bearer token. Target (issue 8): status answers faster than
slurmrestd for the same question.
EOF
} >"$out"
results_append "Status: tfslurmd vs slurmrestd (issue 8)" "$command_line" "$out"
cat "$out"
