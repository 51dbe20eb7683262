#!/usr/bin/env bash
# stop.sh DIR: stops the local Slurm cluster started by start.sh DIR: the
# slurmd and slurmctld daemons, the job steps (slurmstepd and their tasks)
# they left behind, slurmdbd and MariaDB (start.sh --accounting), and
# munged. Only processes named in DIR's pid files, or job steps holding
# DIR's slurmd logs open, are touched; with the hosts apart (start.sh
# --hosts-apart), also whatever is left on the cluster's hosts, whose
# network namespaces, links, addresses and /etc/hosts lines are then
# removed. Safe when nothing runs.
# State, config and logs stay in DIR for the next start and for debugging.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"

[[ $# -eq 1 ]] || die "usage: $0 DIR"
if ! DIR="$(resolve_dir "$1")"; then
  log "nothing to stop: $1 does not exist"
  exit 0
fi

# wait_gone SECONDS PID...: true once none of the pids exists.
wait_gone() {
  local deadline=$((SECONDS + $1)) p alive
  shift
  while :; do
    alive=0
    for p in "$@"; do
      if running "$p"; then alive=1; fi
    done
    ((alive)) || return 0
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# stop_pids NAME PID...: SIGTERM, wait, then SIGKILL what is left.
stop_pids() {
  local name="$1"
  shift
  (($#)) || return 0
  log "stopping $name (pid $*)"
  kill -TERM "$@" 2>/dev/null || true
  if ! wait_gone 20 "$@"; then
    log "$name ignored SIGTERM; sending SIGKILL"
    kill -KILL "$@" 2>/dev/null || true
    wait_gone 10 "$@" || die "$name (pid $*) still alive after SIGKILL"
  fi
}

export SLURM_CONF="$DIR/etc/slurm.conf"
# shellcheck source-path=SCRIPTDIR source=hosts_apart.sh
source "$here/hosts_apart.sh"
hosts_apart=0
if hosts_apart_enabled; then
  hosts_apart=1
  hosts_apart_load
fi
# client CMD...: a Slurm client where it reaches slurmctld (start.sh's).
client() { if [[ "$hosts_apart" == 1 ]]; then on_host login "$@"; else "$@"; fi; }
# The Slurm installation start.sh ran (--slurm-prefix), whose clients talk to
# its daemons; empty: the system's.
prefix="$(cat "$DIR/etc/slurm-prefix" 2>/dev/null || true)"
if [[ -n "$prefix" ]]; then export PATH="$prefix/bin:$prefix/sbin:$PATH"; fi

# End the jobs through Slurm first, while slurmctld and slurmd still run.
# Killing their processes behind Slurm's back instead leaves slurmctld's saved
# state saying RUNNING, and after the next start those ghost jobs hold their
# nodes' CPUs indefinitely (slurmctld does not notice the steps are gone).
# Pending jobs stay queued for the next start, as on a real cluster restart.
if [[ -n "$(daemon_pid "$DIR/run/slurmctld.pid" slurmctld)" ]] && client scontrol ping >/dev/null 2>&1; then
  active="$(client squeue -h -t RUNNING,SUSPENDED,CONFIGURING,COMPLETING -o %i 2>/dev/null || true)"
  if [[ -n "$active" ]]; then
    log "cancelling running jobs: $(tr '\n' ' ' <<<"$active")"
    for state in RUNNING SUSPENDED CONFIGURING; do
      client scancel --state="$state" 2>/dev/null || true
    done
    # KillWait=5 bounds how long a step may ignore SIGTERM.
    deadline=$((SECONDS + 30))
    while [[ -n "$(client squeue -h -t RUNNING,SUSPENDED,CONFIGURING,COMPLETING -o %i 2>/dev/null || true)" ]]; do
      if ((SECONDS >= deadline)); then
        log "jobs still active after 30s; killing their processes below"
        break
      fi
      sleep 0.5
    done
  fi
fi

# Then the Slurm daemons, before the leftover steps: a running slurmd would
# report the steps we kill as failed and slurmctld would requeue their jobs.
pids=()
for n in "${LOCAL_SLURM_NODES[@]}"; do
  p="$(daemon_pid "$DIR/run/slurmd-$n.pid" slurmd)"
  if [[ -n "$p" ]]; then pids+=("$p"); fi
done
stop_pids slurmd "${pids[@]+"${pids[@]}"}"

p="$(daemon_pid "$DIR/run/slurmctld.pid" slurmctld)"
stop_pids slurmctld ${p:+"$p"}

# start.sh --accounting's slurmdbd and MariaDB, after slurmctld, which
# sends them its last job records; nothing when they never ran.
# shellcheck source-path=SCRIPTDIR source=accounting.sh
source "$here/accounting.sh"
accounting_stop

# Job steps survive their slurmd (a safety net: normally none are left after
# the scancel above, unless slurmctld was already dead). Without cgroups, their tasks are only
# findable as descendants of slurmstepd, so collect the whole tree before
# killing anything (killed parents orphan their children to init).
mapfile -t steps < <(stepd_pids "$DIR")
if ((${#steps[@]})); then
  mapfile -t tree < <(
    printf '%s\n' "${steps[@]}"
    descendants "${steps[@]}"
  )
  log "killing ${#steps[@]} job step(s) and their tasks (pid ${tree[*]})"
  kill -KILL "${tree[@]}" 2>/dev/null || true
  wait_gone 10 "${tree[@]}" || die "job step processes still alive: ${tree[*]}"
fi

# munged last: every Slurm daemon above needed it to shut down cleanly.
p="$(daemon_pid "$DIR/munge/munged.pid" munged)"
stop_pids munged ${p:+"$p"}

rm -f "$DIR/run/slurmctld.pid" "$DIR"/run/slurmd-*.pid "$DIR/munge/munged.pid"
# The hosts' namespaces last: nothing of ours runs on them any more.
hosts_apart_down
log "stopped cluster in $DIR"
