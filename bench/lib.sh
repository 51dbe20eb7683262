# Shared by the bench/*.sh scripts: paths, building, the local Slurm cluster,
# tfslurmd, and appending figures to RESULTS.md. Source it; do not run it.
# shellcheck shell=bash

BENCH_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd -- "$BENCH_DIR/.." && pwd)"
# One build directory for everything measured: tfslurmd, the agent and the
# bench programs, configured with -DTFSLURM_BUILD_BENCH=ON (RelWithDebInfo).
BUILD="${TFSLURM_BENCH_BUILD:-/tmp/bench-build}"
RESULTS="${TFSLURM_BENCH_RESULTS:-$BENCH_DIR/RESULTS.md}"

log() { printf 'bench: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# bench_error MESSAGE: an error or a wrong result met while measuring (a
# request refused, a count that does not add up). The script goes on, so
# that the rest of its figures are still seen, but results_append marks
# its section failed, lists the errors in it, and exits 1: a benchmark
# that met an error fails (and so does bench/run.sh --smoke in CI).
BENCH_ERRORS=()
bench_error() {
  log "error: $*"
  BENCH_ERRORS+=("$*")
}

# check_http_rate WHAT LINE STATUS: bench_http_rate's key=value LINE and exit
# STATUS; an error unless it exited 0 having answered requests with none
# refused (non-2xx or a broken connection, warm-up included).
check_http_rate() {
  local what="$1" line="$2" status="$3"
  if ((status != 0)) || ! grep -q ' errors=0 ' <<<"$line" || grep -q ' requests=0 ' <<<"$line"; then
    bench_error "$what: bench_http_rate exited $status: ${line:-no figures}"
  fi
}

# check_wrk WHAT LINE: wrk's line from wrk/report.lua; an error unless it
# has one with no socket error and no answer outside 2xx/3xx.
check_wrk() {
  local what="$1" line="$2"
  if [[ -z "$line" ]] || ! grep -q ' socket_errors=0 non2xx=0$' <<<"$line" || grep -q 'requests=0 ' <<<"$line"; then
    bench_error "$what: wrk: ${line:-no figures}"
  fi
}

# use_binaries DIR: with DIR (a script's --build), takes tfslurmd and
# tfslurm-agent from DIR/bin as they are; without, build_all. Sets BUILD and
# `binaries`, the line saying which, for the script's section.
use_binaries() {
  if [[ -n "$1" ]]; then
    BUILD="$(cd -- "$1" && pwd)"
    [[ -x "$BUILD/bin/tfslurmd" && -x "$BUILD/bin/tfslurm-agent" ]] || die "no tfslurmd and tfslurm-agent in $BUILD/bin"
    binaries="$BUILD/bin/tfslurmd as built $(date -u -r "$BUILD/bin/tfslurmd" '+%Y-%m-%d %H:%M UTC')"
  else
    build_all
    binaries="built in $BUILD (RelWithDebInfo)"
  fi
}

# Configures $BUILD (TFSLURM_BUILD_BENCH=ON, RelWithDebInfo) and builds
# tfslurmd, the agent and the bench programs with 2 jobs (the machines this
# runs on are small). Sets BENCH_BIN and BENCH_LIB.
build_all() {
  # BENCH_SKIP_BUILD=1: the binaries in $BUILD/bin as they are (a build made
  # before, kept aside while the tree moves on; bench/before_after.sh's
  # BENCH_AFTER_BUILD).
  if [[ ${BENCH_SKIP_BUILD:-} == 1 ]]; then
    [[ -x "$BUILD/bin/tfslurmd" ]] || die "BENCH_SKIP_BUILD: no tfslurmd in $BUILD/bin"
    log "using the binaries in $BUILD/bin as they are (BENCH_SKIP_BUILD)"
    BENCH_BIN="$BUILD/bin" BENCH_LIB="$BUILD/lib"
    export BENCH_BIN BENCH_LIB
    return
  fi
  local blog="${TMPDIR:-/tmp}/bench-build.log"
  log "building in $BUILD (log: $blog)"
  : >"$blog"
  # Configured once (ninja re-runs cmake when a CMakeLists.txt changes): a
  # configure costs ~20 s of CPU, which the load average then shows.
  if [[ ! -f "$BUILD/build.ninja" ]] || ! grep -qx 'TFSLURM_BUILD_BENCH:BOOL=ON' "$BUILD/CMakeCache.txt"; then
    cmake -S "$REPO" -B "$BUILD" -G Ninja -DTFSLURM_BUILD_BENCH=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >>"$blog" 2>&1 ||
      { tail -30 "$blog" >&2; die "cmake failed"; }
  fi
  ninja -C "$BUILD" -j2 tfslurmd tfslurm-agent bench_rendezvous_server bench_rendezvous_floor bench_rendezvous_storm bench_in_place_storm \
    bench_submit_libslurm bench_http_rate bench_slurm_timing bench_list_page >>"$blog" 2>&1 || { tail -30 "$blog" >&2; die "building failed"; }
  BENCH_BIN="$BUILD/bin"
  BENCH_LIB="$BUILD/lib"
  export BENCH_BIN BENCH_LIB
}

# need_packages PKG...: the Debian packages one benchmark alone needs (wrk,
# slurmrestd, libtorch-dev), installed when missing, as deploy/install-deps.sh
# installs the rest (as root; a benchmark that cannot have them stops here,
# naming them, rather than half-way through).
need_packages() {
  local p missing=()
  for p; do
    [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  [[ $(id -u) -eq 0 ]] || die "needs ${missing[*]}: apt-get install ${missing[*]} (as root)"
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; } ||
    die "could not install ${missing[*]}"
}

# build_optional TARGET: builds a bench program that the configure step
# leaves out when its library is missing (bench_tcpstore_storm without
# libtorch). A configure that found nothing is not repeated by ninja, so
# when the target is unknown the build is configured again: CMake searches
# anew for every library it recorded as NOTFOUND.
build_optional() {
  local blog="${TMPDIR:-/tmp}/bench-build.log"
  # (grep reads all of ninja's list: with -q it could exit first, and
  # pipefail would take ninja's SIGPIPE for "not found")
  if ! ninja -C "$BUILD" -t targets all | grep "^$1:" >/dev/null; then
    log "$1 is not in $BUILD's targets: configuring again to look for its libraries"
    cmake "$BUILD" >>"$blog" 2>&1 || { tail -30 "$blog" >&2; die "cmake failed"; }
  fi
  ninja -C "$BUILD" -j2 "$1" >>"$blog" 2>&1 || { tail -30 "$blog" >&2; die "$1 did not build; see $blog"; }
}

# Benchmarks on a shared 2-core machine are only as good as its idleness:
# wait (up to $1 s, default 600, at most BENCH_MAX_WAIT s if set) for the
# 1-minute load average to drop below BENCH_MAX_LOAD (default 1.0), and say
# what it was.
wait_quiet() {
  local max_wait="${1:-600}" limit="${BENCH_MAX_LOAD:-1.0}" waited=0 load
  if [[ -n "${BENCH_MAX_WAIT:-}" ]] && ((BENCH_MAX_WAIT < max_wait)); then max_wait="$BENCH_MAX_WAIT"; fi
  while :; do
    load="$(cut -d' ' -f1 /proc/loadavg)"
    if awk -v l="$load" -v m="$limit" 'BEGIN{exit !(l < m)}'; then break; fi
    if ((waited >= max_wait)); then
      log "warning: load average still $load after ${waited}s (limit $limit); measuring anyway"
      break
    fi
    ((waited == 0)) && log "waiting for the machine to quieten (load $load, limit $limit)"
    sleep 10
    waited=$((waited + 10))
  done
  BENCH_LOAD_AT_START="$load"
}

# Whether the checkout is exactly its HEAD commit: no change to a tracked
# file, staged or not, and no untracked file that is not ignored. The whole
# tree, not the service's folders alone: a benchmark's own script, the
# example program it runs, the deploy script that starts its cluster all
# shape its figures. Build directories are ignored (.gitignore), and so is
# RESULTS.md, which holds figures and shapes none: a second benchmark of one
# session is measured on the same tree as the first, whose section it finds
# appended.
results_file_spec=":(exclude)bench/RESULTS.md"
tree_is_clean() {
  git -C "$REPO" diff --quiet HEAD -- . "$results_file_spec" 2>/dev/null &&
    [[ -z "$(git -C "$REPO" ls-files --others --exclude-standard 2>/dev/null)" ]]
}

# The files that make the tree differ from its HEAD (at most 8 named).
tree_changes() {
  {
    git -C "$REPO" diff --name-only HEAD -- . "$results_file_spec"
    git -C "$REPO" ls-files --others --exclude-standard
  } 2>/dev/null |
    sort -u | awk 'NR <= 8 {printf "%s%s", (NR > 1 ? ", " : ""), $0} END {if (NR > 8) printf ", and %d more", NR - 8}'
}

machine_line() {
  local tree
  tree="$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')"
  tree_is_clean || tree+=" + uncommitted changes: $(tree_changes)"
  printf '%s, %s CPUs, %s MB RAM; load average at start %s; tree %s' \
    "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" "$(nproc)" \
    "$(awk '/MemTotal/ {printf "%d", $2/1024}' /proc/meminfo)" "${BENCH_LOAD_AT_START:-?}" "$tree"
}

# results_append TITLE COMMAND FILE: appends a section to RESULTS.md with the
# date, the command that produced it, the machine, and FILE's contents. On a
# tree with changes not committed, the title says so: the command alone
# cannot reproduce what a commit does not hold (the machine line names the
# files). With errors met (bench_error), the title says FAILED, the section
# lists them, and the script exits 1 once it is written.
results_append() {
  local title="$1" command="$2" body="$3" machine
  tree_is_clean || title+=" (uncommitted changes)"
  # Before the section is written: RESULTS.md is part of the tree.
  machine="$(machine_line)"
  ((${#BENCH_ERRORS[@]} == 0)) || title+=" -- FAILED: ${#BENCH_ERRORS[@]} errors"
  {
    printf '\n## %s\n\n' "$title"
    printf -- '- date: %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    printf -- '- command: `%s`\n' "$command"
    printf -- '- machine: %s\n\n' "$machine"
    if ((${#BENCH_ERRORS[@]})); then
      printf 'Errors met while measuring (the figures below are not to be trusted):\n\n'
      printf -- '- %s\n' "${BENCH_ERRORS[@]}"
      printf '\n'
    fi
    cat "$body"
  } >>"$RESULTS"
  log "appended \"$title\" to $RESULTS"
  if ((${#BENCH_ERRORS[@]})); then
    cat "$body" >&2
    die "${#BENCH_ERRORS[@]} errors while measuring: $(printf '%s; ' "${BENCH_ERRORS[@]}")"
  fi
}

# ------------------------------------------------------------ cluster ----

# Starts a local Slurm cluster in a new short directory; exports SLURM_CONF
# and CLUSTER_DIR. stop_cluster (registered by the caller's trap) ends it.
start_cluster() {
  CLUSTER_DIR="$(mktemp -d /tmp/tfs-bench-XXXX)"
  chmod 755 "$CLUSTER_DIR"
  local line
  line="$("$REPO/deploy/local-slurm/start.sh" "$CLUSTER_DIR")" || die "local Slurm did not start"
  export "${line?}"
  export CLUSTER_DIR
  log "Slurm cluster in $CLUSTER_DIR ($line)"
}

stop_cluster() {
  if [[ -n "${CLUSTER_DIR:-}" ]]; then
    "$REPO/deploy/local-slurm/stop.sh" "$CLUSTER_DIR" >&2 || true
    rm -rf "$CLUSTER_DIR"
    CLUSTER_DIR=""
  fi
}

# ----------------------------------------------------------- tfslurmd ----

# start_tfslurmd WORKDIR [extra args...]: starts tfslurmd against SLURM_CONF;
# sets TFSLURMD_PID, HTTP_PORT, AGENT_PORT, API. TFSLURMD_PRELOAD: a library
# to LD_PRELOAD into it (bench_slurm_timing).
start_tfslurmd() {
  local dir="$1"
  shift
  mkdir -p "$dir"
  rm -f "$dir/ready.json"
  # Authentication: with TFSLURMD_AUTH=token an admin token is created first
  # (exported as TOKEN, with AUTH_HEADER="Authorization: Bearer ..."), as a
  # deployment would run; otherwise --no-auth (one local user, loopback only).
  local auth=(--no-auth)
  AUTH_HEADER="X-No-Auth: 1"
  if [[ "${TFSLURMD_AUTH:-}" == token ]]; then
    TOKEN="$("$BUILD/bin/tfslurmd" token create --user bench --admin --db "$dir/tfslurm.db" 2>/dev/null)" ||
      die "tfslurmd token create failed"
    AUTH_HEADER="Authorization: Bearer $TOKEN"
    auth=()
  fi
  export TOKEN AUTH_HEADER
  # Agent port 0: the default fixed port (8081) may be taken by another
  # tfslurmd on this machine.
  # As root, tfslurmd runs the benchmark's jobs as root only when told to.
  local root=()
  ((EUID == 0)) && root=(--allow-root)
  ${TFSLURMD_PRELOAD:+env LD_PRELOAD="$TFSLURMD_PRELOAD"} "$BUILD/bin/tfslurmd" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 "${auth[@]}" "${root[@]}" --db "$dir/tfslurm.db" \
    --output-root "$dir/out" --ready-file "$dir/ready.json" "$@" >>"$dir/tfslurmd.log" 2>&1 &
  TFSLURMD_PID=$!
  local i
  for ((i = 0; i < 200; i++)); do
    [[ -s "$dir/ready.json" ]] && break
    kill -0 "$TFSLURMD_PID" 2>/dev/null || die "tfslurmd exited at start: $(tail -5 "$dir/tfslurmd.log")"
    sleep 0.1
  done
  [[ -s "$dir/ready.json" ]] || die "tfslurmd did not write $dir/ready.json"
  HTTP_PORT="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["http_port"])' "$dir/ready.json")"
  AGENT_PORT="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["agent_port"])' "$dir/ready.json")"
  API="http://127.0.0.1:$HTTP_PORT"
  export TFSLURMD_PID HTTP_PORT AGENT_PORT API
  log "tfslurmd pid $TFSLURMD_PID, REST $API, agents :$AGENT_PORT"
}

stop_tfslurmd() {
  if [[ -n "${TFSLURMD_PID:-}" ]]; then
    kill -TERM "$TFSLURMD_PID" 2>/dev/null || true
    wait "$TFSLURMD_PID" 2>/dev/null || true
    TFSLURMD_PID=""
  fi
}

# Cancels every job of the local cluster (benchmarks leave nothing queued).
cancel_all_jobs() {
  [[ -n "${SLURM_CONF:-}" ]] || return 0
  if [[ -s "${CLUSTER_DIR:-}/etc/network" ]]; then
    # Hosts apart: slurmctld is reached from the cluster's hosts only.
    "$REPO/deploy/local-slurm/on-host.sh" "$CLUSTER_DIR" login scancel --user="$(id -un)" 2>/dev/null || true
  else
    scancel --user="$(id -un)" 2>/dev/null || true
  fi
}

# The usual end of a benchmark, whatever way it exits: tfslurmd stopped, its
# jobs cancelled, the cluster stopped and the directories given removed.
# Scripts with more to clean up write their own cleanup instead.
clean_up_on_exit() {
  CLEANUP_DIRS=("$@")
  trap 'stop_tfslurmd; cancel_all_jobs; stop_cluster; rm -rf "${CLEANUP_DIRS[@]}"' EXIT
}
