#!/usr/bin/env bash
# tests/packages.sh [--prepare]: the Debian packages (debian/), built and
# checked as a site would use them. One line per check, "packages NAME: ok"
# or "packages NAME: FAILED (why)", then "N passed, M failed".
#
#   build       dpkg-buildpackage -b of this commit in a clean clone, through
#               ccache: with CI's main build configured with the packages'
#               flags (tests/lib/build_flags.sh), every object but
#               build_info.cc's (the commit) is a ccache hit (the count is
#               printed); the .debs (gzip: for these checks only) are cached
#               by commit (~/.cache/tfslurm/debs, the newest few kept)
#   previous    the packages to upgrade from: the newest earlier commit's
#               (first parents, up to 50 back) already in that cache, else
#               HEAD~1's, built the same way; when no earlier commit has
#               debian/, or HEAD~1's packages do not build, this tree again
#               as an earlier version (<v>~prev)
#   lintian     lintian --fail-on warning on this commit's .changes (the
#               -dbgsym packages too); at most 2 overrides
#   security    systemd-analyze security --offline of the packaged unit:
#               exposure <= 2.0 as packaged (personal mode), <= 3.0 with the
#               site-mode drop-in tfslurmd-generator makes; both printed
#   settings    every setting of tfslurmd --print-config is in its man page;
#               every example in the packaged settings file is a setting
#   tree        the Debian 12 tree below, made or found in its cache
#   piuparts    install, upgrade from the previous packages, remove, purge,
#               in a copy of the Debian 12 tree below (the packages'
#               dependencies are in it already: piuparts installs and
#               purges tfslurm's own)
#   the rest    a Debian 12 system container (systemd-nspawn, systemd as PID
#               1) on a local Slurm cluster of its own: the previous packages
#               installed and started with systemctl; an experiment to
#               COMPLETED through the packaged tfctl and agent; the upgrade
#               to this commit's packages under load (a running experiment
#               finishes with one attempt, a spec written before reads the
#               same after); backups taken while experiments are written and
#               tfslurmd is killed (PRAGMA integrity_check on each copy); a
#               second tfslurmd refused; a failed migration and a downgrade
#               leaving the database as it was and the service stopped with
#               the reason in the journal; purge keeping the database
#
# --prepare runs everything but the container (nothing of it needs a
# cluster), and leaves its lines in build/packages/ for the run of the whole
# script that follows: tests/run.sh starts it in the background under
# SCHED_IDLE while the integration tests wait on Slurm, then runs the whole
# script, which waits for it (a lock), prints its lines and counts them with
# the container's. Without a prepared result for this commit, the whole
# script does it all itself.
#
# One Debian 12 tree serves piuparts and the container: mmdebstrap's
# minbase with systemd, slurm-client and the packages' dependencies (this
# commit's and the previous one's), cached under /opt/tfslurm/pkgtest by
# what goes into it (tests/packages/container.sh).
#
# Needs root (the cluster, the container). Installs what it uses (debhelper,
# lintian, piuparts, mmdebstrap, systemd-container, help2man) with apt-get.
set -uo pipefail

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo" || exit 1
jobs=2
mode=all
case "${1:-}" in
  --prepare) mode=prepare ;;
  "") ;;
  *)
    echo "usage: tests/packages.sh [--prepare]" >&2
    exit 2
    ;;
esac
[[ $(id -u) -eq 0 ]] || { echo "tests/packages.sh: run as root" >&2; exit 1; }

# What --prepare leaves for the whole script: its lines, the directories it
# found, and the commit they are of.
state="$repo/build/packages"
mkdir -p "$state"
# A lock, held while the checks of --prepare run.
exec {lock_fd}>"$state/lock"
if ! flock -n "$lock_fd"; then
  echo "packages: waiting for the --prepare still running (build/packages/lock)"
  flock "$lock_fd"
fi

tools=(debhelper dpkg-dev lintian piuparts mmdebstrap systemd-container help2man ccache
  jq sqlite3)
missing=()
for p in "${tools[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "packages: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    exit 1
fi
# The build dependencies (debian/control's are among them).
"$repo/deploy/install-deps.sh" >/dev/null || exit 1

work="$(mktemp -d /srv/tfs-pkg-XXXX)"
chmod 755 "$work"
cluster=""
# shellcheck source=packages/debs.sh
source tests/packages/debs.sh
# shellcheck source=packages/container.sh
source tests/packages/container.sh
# shellcheck source=packages/checks.sh
source tests/packages/checks.sh
cleanup() {
  ct_stop
  [[ -n $cluster ]] && deploy/local-slurm/stop.sh "$cluster" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

# Each check's line says what it found and how long it took since the last;
# while lines_file is set (--prepare's checks), it is kept there too.
passed=0 failed=0 failures=() step_started=$SECONDS lines_file=""
line() {
  echo "$1"
  [[ -z $lines_file ]] || echo "$1" >>"$lines_file"
}
ok() {
  line "packages $1: ok (${2:+$2, }$((SECONDS - step_started)) s)"
  passed=$((passed + 1)) step_started=$SECONDS
}
bad() {
  line "packages $1: FAILED ($2, $((SECONDS - step_started)) s)"
  failed=$((failed + 1)) step_started=$SECONDS
  failures+=("$1")
}
finish() {
  echo
  ((failed == 0)) || echo "failed: ${failures[*]}"
  echo "$passed passed, $failed failed"
  ((failed == 0))
  exit
}

head_commit="$(git rev-parse HEAD)"
[[ -z $(git status --porcelain --untracked-files=no) ]] ||
  echo "packages: the work tree has uncommitted changes; the packages are of HEAD without them"

# The checks without a cluster (tests/packages/checks.sh); their lines go
# to $state/lines too, and what the container needs to $state/found.
prepare() {
  rm -f "$state/done" "$state/lines" "$state/found"
  local started=$SECONDS
  lines_file="$state/lines"
  : >"$lines_file"
  this="" this_version="" prev="" prev_version="" tree=""
  prepare_checks
  lines_file=""
  declare -p this this_version prev prev_version tree >"$state/found"
  echo "$head_commit" >"$state/commit"
  echo "$((SECONDS - started))" >"$state/seconds"
  touch "$state/done"
}

if [[ $mode == prepare ]]; then
  prepare
  finish
fi

if [[ -f $state/done && $(cat "$state/commit") == "$head_commit" ]]; then
  echo "packages: prepared by tests/packages.sh --prepare, in $(cat "$state/seconds") s:"
  cat "$state/lines"
  passed="$(grep -c '^packages [a-z_]*: ok' "$state/lines")"
  mapfile -t failures < <(sed -n 's/^packages \([a-z_]*\): FAILED.*/\1/p' "$state/lines")
  failed=${#failures[@]}
  # shellcheck source=/dev/null
  source "$state/found"
else
  prepare
fi
rm -f "$state/done" # a prepared result serves one run: the next does it all again
# The rest needs no lock: let go of it before the cluster's daemons could
# inherit it.
exec {lock_fd}>&-
step_started=$SECONDS
if [[ -n $this && -n $tree ]]; then
  # shellcheck source=packages/system_test.sh
  source tests/packages/system_test.sh
  run_system_test
else
  bad container "nothing to install: the build or the Debian 12 tree failed above"
fi
finish
