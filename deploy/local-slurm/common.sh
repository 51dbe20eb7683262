# Shared helpers for start.sh and stop.sh; sourced, never executed.
# shellcheck shell=bash

# Node names of the local cluster; slurm.conf, start.sh and stop.sh agree on them.
# shellcheck disable=SC2034 # used by the scripts that source this file
LOCAL_SLURM_NODES=(node1 node2 node3)
# GPUs (gres/gpu, device files under DIR/dev/NODE) each node has; start.sh
# writes them into slurm.conf and gres.conf.
# shellcheck disable=SC2034 # used by the scripts that source this file
LOCAL_SLURM_GPUS_PER_NODE=4

log() { printf 'local-slurm: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# resolve_dir DIR [create]: prints the absolute, symlink-free path of DIR.
# Slurm and munge both choke on relative paths and on whitespace in paths
# (slurm.conf has no quoting), and the caller `eval`s our output, so refuse
# anything but a plain path.
resolve_dir() {
  local d="$1" create="${2:-}"
  [[ -n "$d" ]] || die "usage: $0 DIR"
  if [[ -n "$create" ]]; then
    mkdir -p -- "$d"
  fi
  [[ -d "$d" ]] || return 1
  d="$(cd -- "$d" && pwd -P)"
  [[ "$d" =~ ^[A-Za-z0-9_./+-]+$ ]] ||
    die "DIR must contain only [A-Za-z0-9_./+-] (slurm.conf cannot quote): $d"
  printf '%s\n' "$d"
}

# detached CMD...: runs CMD with stdin from /dev/null and every inherited
# file descriptor above 2 closed. Daemons keep what they inherit (munged
# does): an inherited pipe, e.g. the caller's $(start.sh) stdout, would stay
# open for the daemon's lifetime and hang the caller.
detached() {
  (
    for fd in /proc/self/fd/*; do
      fd="${fd##*/}"
      if ((fd > 2)); then eval "exec ${fd}>&-" 2>/dev/null || true; fi
    done
    # A shell function (start.sh's on_daemon_host) cannot be exec'd.
    if declare -F "$1" >/dev/null; then
      "$@" </dev/null
    else
      exec "$@" </dev/null
    fi
  )
}

# pid_from_file FILE: prints the pid recorded in FILE, or nothing.
pid_from_file() {
  local f="$1" pid=""
  if [[ -r "$f" ]]; then
    read -r pid <"$f" || true
  fi
  if [[ "$pid" =~ ^[0-9]+$ ]]; then printf '%s\n' "$pid"; fi
}

# alive_as PID COMM: true when PID runs and its command name is COMM. The
# name check guards against a pid recycled by an unrelated process after a
# crash (kill -0 alone would report it as "our" daemon).
alive_as() {
  local pid="$1" comm="$2" actual=""
  [[ -n "$pid" ]] || return 1
  running "$pid" || return 1
  read -r actual 2>/dev/null <"/proc/$pid/comm" || return 1
  [[ "$actual" == "$comm" ]]
}

# running PID: true while PID exists and is not a zombie. Daemons and job
# steps are reparented to pid 1, which here may reap them only seconds later;
# kill -0 alone would count such a dead process as running.
running() {
  local stat=""
  kill -0 "$1" 2>/dev/null || return 1
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  # Field 3 is the state; field 2 (comm) is parenthesised and may hold spaces.
  stat="${stat##*) }"
  [[ "${stat:0:1}" != Z ]]
}

# daemon_pid PIDFILE COMM: prints the pid when the daemon is running.
daemon_pid() {
  local pid
  pid="$(pid_from_file "$1")"
  if alive_as "$pid" "$2"; then printf '%s\n' "$pid"; fi
}

# stepd_pids DIR: slurmstepd processes spawned by this DIR's slurmd daemons.
# They outlive slurmd and have no pid file. Their environment is useless for
# telling clusters apart (slurmstepd overwrites it with its process title),
# but each keeps its node's SlurmdLogFile open, and that file is under DIR.
stepd_pids() {
  local dir="$1" p comm fd target
  for p in /proc/[0-9]*; do
    read -r comm 2>/dev/null <"$p/comm" || continue
    [[ "$comm" == slurmstepd ]] || continue
    for fd in "$p"/fd/*; do
      target="$(readlink "$fd" 2>/dev/null)" || continue
      if [[ "$target" == "$dir/log/slurmd-"* ]]; then
        printf '%s\n' "${p#/proc/}"
        break
      fi
    done
  done
}

# descendants PID...: all (transitive) children of the given pids. Job tasks
# are children of slurmstepd; without cgroups nothing else reaps them.
descendants() {
  local frontier=("$@") next p child
  while ((${#frontier[@]})); do
    next=()
    for p in "${frontier[@]}"; do
      # /proc/PID/task/*/children needs CONFIG_PROC_CHILDREN; ps works anywhere.
      for child in $(ps -o pid= --ppid "$p" 2>/dev/null); do
        printf '%s\n' "$child"
        next+=("$child")
      done
    done
    frontier=("${next[@]+"${next[@]}"}")
  done
}
