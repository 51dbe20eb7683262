#!/usr/bin/env bash
# Chaos soak (issue 17): M experiments of examples/linear_ps on a local Slurm
# cluster of its own, with faults injected at random times from a seed
# (tfslurmd killed -9 and restarted, agents and programs killed, an agent
# stopped past the heartbeat timeout, a node failure, the output root full,
# slow and refused connections to the service; on the cluster's hosts apart,
# a node cut off from the service host or from everything, and a slow,
# lossy link), then checks: every
# experiment ended with a reason, none lost, exactly one Slurm job per
# attempt, no task left running, PRAGMA integrity_check ok. About 20 minutes
# with the defaults on 2 cores. Not part of CI (tests/integration/
# test_soak.py runs a small one there). Run as root.
#
#   bench/soak.sh [--experiments 20] [--daemon-kills 20] [--seed 1] [--steps 8000]
#                 [--fault-interval 5] [--disk-faults 2]
#                 [--faults daemon,agent,program,stop,node,disk,slow,refuse,partition,isolate,link]
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

experiments=20 kills=20 seed=1 steps=8000 interval=5 disk=2
faults=daemon,agent,program,stop,node,disk,slow,refuse,partition,isolate,link
while (($#)); do
  case "$1" in
    --experiments) experiments="$2"; shift 2 ;;
    --daemon-kills) kills="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --fault-interval) interval="$2"; shift 2 ;;
    --disk-faults) disk="$2"; shift 2 ;;
    --faults) faults="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
[[ $(id -u) -eq 0 ]] || die "run as root: the soak mounts a tmpfs and kills Slurm daemons"
command_line="bench/soak.sh --experiments $experiments --daemon-kills $kills --seed $seed --steps $steps --fault-interval $interval --disk-faults $disk --faults $faults"

build_all
work="$(mktemp -d /tmp/bench-soak-XXXX)"
chmod 755 "$work"
cleanup() {
  cancel_all_jobs
  stop_cluster
}
trap cleanup EXIT
# The hosts apart (deploy/local-slurm/start.sh --hosts-apart), for the
# network faults; soak.py moves itself onto the service host.
LOCAL_SLURM_HOSTS_APART=1 start_cluster
wait_quiet 120

set +e
python3 "$BENCH_DIR/soak.py" --slurm-conf "$SLURM_CONF" --bin "$BENCH_BIN" --experiments "$experiments" \
  --daemon-kills "$kills" --seed "$seed" --steps "$steps" --fault-interval "$interval" --disk-faults "$disk" --faults "$faults" \
  --deadline 3600 --workdir "$work" | tee "$work/soak.out"
rc=${PIPESTATUS[0]}
set -e
{
  sed -n '/^| check | value |/,$p' "$work/soak.out"
  cat <<NOTE

The workload is examples/linear_ps (2 ps + 4 workers on 3 nodes, $steps
global steps, restart.max_restarts 8 on every class). The soak's workdir,
with tfslurmd's log and a copy of every job's output, is kept in $work.
NOTE
} >"$work/table.md"
results_append "Chaos soak (issue 17)$([[ $rc -eq 0 ]] || echo ' -- FAILED')" "$command_line" "$work/table.md"
exit "$rc"
