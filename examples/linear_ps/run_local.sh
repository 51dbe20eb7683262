#!/usr/bin/env bash
# Runs linear_ps as a whole cluster of local processes on 127.0.0.1, set up the
# way the tfslurm agent sets up each Slurm task (TF_CONFIG, TFSLURM_*, a port
# held bound with SO_REUSEPORT), then runs it again on the same MODEL_DIR with
# a higher target to show that training resumes from the checkpoint.
#
# Exits 0 only if, in both runs, every trainer exited 0, the ps and evaluator
# ended with 143 on SIGTERM, the evaluator scored the final checkpoint and that
# checkpoint reached the target; the second run must also start past step 0.
#
# usage: run_local.sh [--ps N] [--workers N] [--chief] [--no-evaluator]
#                     [--steps N] [--resume-steps N] [--dir DIR] [--timeout S]
#                     [-- extra train.py arguments]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${PYTHON:-python3}
num_ps=2
num_workers=3
with_chief=0
with_evaluator=1
steps=200
resume_steps=300
dir=""
timeout=300
extra=()

while (($#)); do
  case $1 in
    --ps) num_ps=$2; shift 2 ;;
    --workers) num_workers=$2; shift 2 ;;
    --chief) with_chief=1; shift ;;
    --no-evaluator) with_evaluator=0; shift ;;
    --steps) steps=$2; shift 2 ;;
    --resume-steps) resume_steps=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_local.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if ((resume_steps <= steps)); then
  echo "run_local.sh: --resume-steps ($resume_steps) must exceed --steps ($steps) to show a resume" >&2
  exit 2
fi

dir=${dir:-$(mktemp -d "${TMPDIR:-/tmp}/linear_ps.XXXXXX")}
model_dir=$dir/model
mkdir -p "$dir"
started=()  # every process this script started, for the cleanup on exit
stop_started() {
  local pid
  for pid in "${started[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop_started EXIT

fail() {
  echo "run_local.sh: FAIL: $*" >&2
  exit 1
}

# Like the agent: bind free ports with SO_REUSEPORT, without listening, and
# keep them bound while the tasks run, so the ps must bind next to them.
# Prints the ports on one line, then sleeps until killed. Run in the
# background; exec makes $! the Python process itself, so that killing it
# frees the ports.
hold_ports() {
  exec "$python" -c '
import signal, socket, sys
held = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("0.0.0.0", 0))
    held.append(s)
print(" ".join(str(s.getsockname()[1]) for s in held), flush=True)
signal.pause()
' "$1"
}

checkpoint_step() {  # the step of the latest checkpoint in MODEL_DIR, or nothing
  sed -n 's/^model_checkpoint_path: "\(.*\/\)\{0,1\}model\.ckpt-\([0-9]*\)"$/\2/p' \
    "$model_dir/checkpoint" 2>/dev/null || true
}

# Waits for a process this script started and sets exit_code to its status.
# Fails the run once the overall deadline has passed. (Not called as $(...):
# a subshell cannot wait for its parent's children.)
wait_for() {
  local pid=$1
  while kill -0 "$pid" 2>/dev/null; do
    ((SECONDS < deadline)) || fail "still running after ${timeout}s: pid $pid (logs in $dir)"
    sleep 0.2
  done
  exit_code=0
  wait "$pid" || exit_code=$?
}

# run_cluster PHASE TARGET ATTEMPT: one complete run; fails the script on error.
run_cluster() {
  local phase=$1 target=$2 attempt=$3
  local logs=$dir/$phase
  mkdir -p "$logs"
  deadline=$((SECONDS + timeout))

  local roles=() indexes=()
  local i
  if ((with_chief)); then roles+=(chief); indexes+=(0); fi
  for ((i = 0; i < num_workers; i++)); do roles+=(worker); indexes+=("$i"); done
  for ((i = 0; i < num_ps; i++)); do roles+=(ps); indexes+=("$i"); done

  hold_ports "${#roles[@]}" >"$logs/ports" &
  local holder=$!
  started+=("$holder")
  until [[ -s $logs/ports ]]; do
    kill -0 "$holder" 2>/dev/null || fail "could not reserve ports"
    sleep 0.1
  done
  local ports
  read -ra ports <"$logs/ports"

  # TF_CONFIG's cluster: each task's address, in the same order as roles.
  local cluster="" job
  for job in chief worker ps; do
    local addresses=()
    for i in "${!roles[@]}"; do
      if [[ ${roles[i]} == "$job" ]]; then addresses+=("\"127.0.0.1:${ports[i]}\""); fi
    done
    ((${#addresses[@]})) || continue
    cluster+="${cluster:+, }\"$job\": [$(IFS=,; echo "${addresses[*]}")]"
  done
  cluster="{$cluster}"
  echo "== $phase: target step $target, attempt $attempt, cluster $cluster"

  # launch ROLE INDEX PORT: starts one task in the background, as the agent
  # would (the evaluator has no port: it is not in the cluster).
  local -A pids=()
  launch() {
    local port_env=()
    if [[ -n $3 ]]; then port_env=(TFSLURM_PORT="$3"); fi
    env TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"$1\", \"index\": $2}}" \
      TFSLURM_ROLE="$1" TFSLURM_INDEX="$2" TFSLURM_ATTEMPT="$attempt" "${port_env[@]}" \
      EXPERIMENT_ID=linear-ps-local MODEL_DIR="$model_dir" \
      "$python" "$here/train.py" --steps "$target" "${extra[@]}" >"$logs/$1-$2.log" 2>&1 &
    pids[$1-$2]=$!
    started+=("$!")
  }

  # Trainers first and the ps a second later: workers must wait for them.
  local trainers=()
  for i in "${!roles[@]}"; do
    if [[ ${roles[i]} != ps ]]; then
      launch "${roles[i]}" "${indexes[i]}" "${ports[i]}"
      trainers+=("${roles[i]}-${indexes[i]}")
    fi
  done
  if ((with_evaluator)); then launch evaluator 0 ""; fi
  sleep 1
  for i in "${!roles[@]}"; do
    if [[ ${roles[i]} == ps ]]; then launch ps "${indexes[i]}" "${ports[i]}"; fi
  done

  local ok=1 task
  for task in "${trainers[@]}"; do
    wait_for "${pids[$task]}"
    echo "   $task exited $exit_code: $(grep -E 'start_step=|done step=' "$logs/$task.log" | tr '\n' ' ')"
    ((exit_code == 0)) || ok=0
  done
  start_steps=()
  for task in "${trainers[@]}"; do
    start_steps+=("$(sed -n 's/.* start_step=\([0-9]*\)$/\1/p' "$logs/$task.log")")
  done

  local final
  final=$(checkpoint_step)
  echo "   latest checkpoint: step ${final:-none}"

  # The evaluator follows the checkpoints: give it time to score the last one.
  if ((with_evaluator)); then
    local until=$((SECONDS + 15))
    until grep -q "eval step=$final " "$logs/evaluator-0.log" || ((SECONDS >= until)); do
      sleep 0.2
    done
    grep -q "eval step=$final " "$logs/evaluator-0.log" || {
      echo "   evaluator did not score checkpoint $final"
      ok=0
    }
    echo "   $(grep 'eval step=' "$logs/evaluator-0.log" | tail -n 1)"
  fi

  # Training is over: reap the ps (and evaluator), as the orchestrator does.
  local servers=()
  for task in "${!pids[@]}"; do
    if [[ $task == ps-* || $task == evaluator-* ]]; then servers+=("$task"); fi
  done
  for task in "${servers[@]}"; do kill -TERM "${pids[$task]}" 2>/dev/null || true; done
  for task in "${servers[@]}"; do
    wait_for "${pids[$task]}"
    echo "   $task exited $exit_code (expected 143: reaped by SIGTERM)"
    ((exit_code == 143)) || ok=0
  done
  kill "$holder"
  wait "$holder" 2>/dev/null || true

  ((ok)) || fail "$phase: a task failed (logs in $logs)"
  if [[ -z $final ]] || ((final < target)); then
    fail "$phase: final checkpoint step ${final:-none} < $target"
  fi
}

run_cluster train "$steps" 1
run_cluster resume "$resume_steps" 2
for start in "${start_steps[@]}"; do
  ((${start:-0} > 0)) || fail "resume: a trainer started at step ${start:-?}, not from the checkpoint"
done
echo "run_local.sh: OK: trained to $steps, resumed to $resume_steps (logs and model in $dir)"
