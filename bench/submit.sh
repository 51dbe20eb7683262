#!/usr/bin/env bash
# Submissions side by side (issue 8), one run, one cluster, one script:
#   - a loop of `sbatch SCRIPT` (what users do without tfslurm);
#   - bench_submit_libslurm: a bare slurm_submit_batch_job() loop, the job
#     description filled as tfslurmd fills it;
#   - POST /experiments to tfslurmd, one connection, each POST sent when the
#     last was answered.
# The script is the one tfslurmd renders for the spec (POST ?dry_run=true).
# The partition is DOWN, so jobs stay pending. Methods take turns, ROUNDS
# rounds of COUNT jobs each, so the growing job count affects all alike.
# tfslurmd's own time per submission: POST latency minus the time spent
# inside libslurm for it (bench_slurm_timing preloaded; submit_analyze.py).
# --state-on DIR puts tfslurmd's database and the jobs' output directories
# in a new directory under DIR (default /tmp): run once more with /dev/shm
# to see what the file system adds to tfslurmd's own time.
#
#   bench/submit.sh [--count 200] [--rounds 3] [--state-on /tmp]
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

count=200 rounds=3 state_on=/tmp
while (($#)); do
  case "$1" in
    --count) count="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --state-on) state_on="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
command_line="bench/submit.sh --count $count --rounds $rounds"
[[ "$state_on" == /tmp ]] || command_line+=" --state-on $state_on"
[[ -d "$state_on" ]] || die "--state-on: $state_on is not a directory"

build_all
work="$(mktemp -d /tmp/bench-sub-XXXX)"
state="$(mktemp -d "$state_on/bench-sub-state-XXXX")"
chmod 755 "$work" "$state"
clean_up_on_exit "$work" "$state"
start_cluster
scontrol update PartitionName=debug State=DOWN

# tfslurmd with the RPC timing shim.
BENCH_SLURM_TIMING_LOG="$work/rpc.log" TFSLURMD_PRELOAD="$BENCH_LIB/libbench_slurm_timing.so" TFSLURMD_AUTH=token \
  start_tfslurmd "$state/svc"
state_fs="$(df --output=fstype "$state" | tail -1)"

# The spec and the script tfslurmd renders for it.
sed 's/"id": *"hello"/"id": "@ID@"/' "$REPO/examples/hello.json" >"$work/spec.json"
sed 's/@ID@/render/' "$work/spec.json" |
  curl -sf -H "$AUTH_HEADER" -H 'Content-Type: application/json' --data-binary @- \
    "$API/experiments?dry_run=true" >"$work/dry.json" || die "dry run failed"
python3 - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
d = json.load(open(f"{w}/dry.json"))
open(f"{w}/job.sh", "w").write(d["sbatch"])
r = d["spec"]["resources"]
h, m, s = r["time_limit"].split(":")  # HH:MM:SS, as the spec's canonical form has it
minutes = int(h) * 60 + int(m) + (1 if int(s) else 0)
out = next((l.split("=", 1)[1] for l in d["sbatch"].splitlines() if l.startswith("#SBATCH --output=")), "/dev/null")
args = ["--name", d["job_name"], "--partition", r["partition"], "--nodes", str(r["nodes"]),
        "--ntasks-per-node", str(r["tasks_per_node"]), "--cpus-per-task", str(r["cpus_per_task"]),
        "--mem-per-cpu", str(d["mem_per_cpu_mb"]), "--time", str(minutes), "--workdir", w, "--output", out]
open(f"{w}/libslurm.args", "w").write("\n".join(args) + "\n")
EOF
mapfile -t lib_args <"$work/libslurm.args"
secret="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
for v in PATH HOME LANG USER SLURM_CONF; do [[ -n "${!v:-}" ]] && lib_args+=(--env "$v=${!v}"); done
lib_args+=(--env "TFSLURM_SECRET=$secret")

kv() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
wait_quiet 600
declare -A secs jobs
for m in sbatch libslurm post; do secs[$m]=0; jobs[$m]=0; done
: >"$work/lib-lat.txt"
for ((r = 0; r < rounds; r++)); do
  log "round $((r + 1))/$rounds: $count jobs per method ($(squeue -h | wc -l) jobs in Slurm)"
  # sbatch loop
  t0=$(date +%s%N)
  for ((i = 0; i < count; i++)); do sbatch --parsable "$work/job.sh" >/dev/null; done
  t1=$(date +%s%N)
  secs[sbatch]=$(awk -v a="${secs[sbatch]}" -v d=$((t1 - t0)) 'BEGIN{print a + d/1e9}')
  jobs[sbatch]=$((jobs[sbatch] + count))
  # bare libslurm loop
  line="$("$BENCH_BIN/bench_submit_libslurm" --count "$count" --script "$work/job.sh" "${lib_args[@]}" \
    --latencies "$work/lib-lat-$r.txt")"
  cat "$work/lib-lat-$r.txt" >>"$work/lib-lat.txt"
  secs[libslurm]=$(awk -v a="${secs[libslurm]}" -v d="$(kv seconds "$line")" 'BEGIN{print a + d}')
  jobs[libslurm]=$((jobs[libslurm] + count))
  # tfslurmd POST loop
  status=0
  line="$("$BENCH_BIN/bench_http_rate" --port "$HTTP_PORT" --path /experiments --method POST \
    --body-file "$work/spec.json" --id-prefix "sub-r$r" --count "$count" --connections 1 --rate 0 \
    --header "$AUTH_HEADER" --log "$work/posts-$r.log")" || status=$?
  check_http_rate "round $((r + 1)): POST /experiments" "$line" "$status"
  cat "$work/posts-$r.log" >>"$work/posts.log"
  secs[post]=$(awk -v a="${secs[post]}" -v d="$(kv seconds "$line")" 'BEGIN{print a + d}')
  jobs[post]=$((jobs[post] + $(kv requests "$line")))
done
in_slurm="$(squeue -h | wc -l)"
# Every job each method submitted is pending (the partition is DOWN): one
# missing was lost, or a submission answered as if it had been made.
expected=$((jobs[sbatch] + jobs[libslurm] + jobs[post]))
((in_slurm == expected)) || bench_error "$expected jobs submitted, $in_slurm in Slurm"

rate() { awk -v n="${jobs[$1]}" -v s="${secs[$1]}" 'BEGIN{printf "%.1f", n/s}'; }
ratio() { awk -v a="$(rate "$1")" -v b="$(rate "$2")" 'BEGIN{printf "%.2f", a/b}'; }
lat() { sort -n "$1" | awk -v p="$2" '{v[NR]=$1} END{r=int((p*NR+99)/100); if(r<1)r=1; printf "%.2f", v[r]}'; }
awk '{print ($2-$1)/1e6}' "$work/posts.log" >"$work/post-lat.txt"
own="$(python3 "$BENCH_DIR/submit_analyze.py" --requests "$work/posts.log" --rpcs "$work/rpc.log")" ||
  bench_error "submit_analyze.py failed"
# Each POST's own time needs its one slurm_submit_batch_job call in the
# shim's log: a POST without one (or with two) is left out of the figures.
[[ "$(kv posts "$own")" == "${jobs[post]}" && "$(kv unmatched "$own")" == 0 ]] ||
  bench_error "tfslurmd's own time: ${jobs[post]} POSTs, $(kv posts "$own") matched to one submission each, $(kv unmatched "$own") not"
{
  echo "$rounds rounds x $count jobs per method, taking turns; $in_slurm jobs pending in Slurm at the end."
  echo "tfslurmd's database and the jobs' output directories: under $state_on ($state_fs)."
  echo
  echo "| method | jobs | seconds | jobs/s | per job p50 ms | per job p99 ms | vs sbatch loop | vs bare libslurm |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '| `sbatch` loop | %s | %.2f | %s | %s | - | 1.00 | %s |\n' "${jobs[sbatch]}" "${secs[sbatch]}" "$(rate sbatch)" \
    "$(awk -v n="${jobs[sbatch]}" -v s="${secs[sbatch]}" 'BEGIN{printf "%.2f (mean)", 1000*s/n}')" "$(ratio sbatch libslurm)"
  printf '| bare libslurm loop | %s | %.2f | %s | %s | %s | %s | 1.00 |\n' "${jobs[libslurm]}" "${secs[libslurm]}" \
    "$(rate libslurm)" "$(lat "$work/lib-lat.txt" 50)" "$(lat "$work/lib-lat.txt" 99)" "$(ratio libslurm sbatch)"
  printf '| tfslurmd POST | %s | %.2f | %s | %s | %s | %s | %s |\n' "${jobs[post]}" "${secs[post]}" "$(rate post)" \
    "$(lat "$work/post-lat.txt" 50)" "$(lat "$work/post-lat.txt" 99)" "$(ratio post sbatch)" "$(ratio post libslurm)"
  echo
  echo "tfslurmd's own time per submission (POST latency minus its time inside libslurm for that POST):"
  echo
  echo "| POSTs | POST p50 / p99 ms | inside libslurm p50 / p99 ms | own time p50 / p99 / max ms | POSTs during a poll: n, own p50 / max ms | other POSTs: n, own p50 / p99 ms |"
  echo "|---|---|---|---|---|---|"
  printf '| %s | %s / %s | %s / %s | %s / %s / %s | %s, %s / %s | %s, %s / %s |\n' "$(kv posts "$own")" \
    "$(kv total_p50_ms "$own")" "$(kv total_p99_ms "$own")" "$(kv libslurm_p50_ms "$own")" \
    "$(kv libslurm_p99_ms "$own")" "$(kv own_p50_ms "$own")" "$(kv own_p99_ms "$own")" "$(kv own_max_ms "$own")" \
    "$(kv polled_posts "$own")" "$(kv polled_own_p50_ms "$own")" "$(kv polled_own_max_ms "$own")" \
    "$(kv quiet_posts "$own")" "$(kv quiet_own_p50_ms "$own")" "$(kv quiet_own_p99_ms "$own")"
  cat <<'EOF'

sbatch: `sbatch --parsable SCRIPT` per job, from a bash loop (per job = loop
time / jobs). Bare libslurm: bench_submit_libslurm, one process per round,
slurm_submit_batch_job() per job. tfslurmd: bench_http_rate --rate 0
--connections 1, every POST a new experiment (validation, intent in SQLite,
submission, answer with the experiment's view), with an API token. Own time
includes the loopback HTTP round trip and any wait for tfslurmd's own locks;
"during a poll" are the POSTs whose time overlapped one of its
slurm_load_jobs calls (the poll, every 2 s): the split shows whether the
poll holds submissions up. Targets (issue 8): own time <= 2 ms p99;
jobs/s >= 2x the sbatch loop and >= 0.5x the bare libslurm loop.
EOF
} >"$work/section.md"
results_append "Submissions side by side (issue 8)" "$command_line" "$work/section.md"
cat "$work/section.md"
