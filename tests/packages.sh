#!/usr/bin/env bash
# tests/packages.sh: the Debian packages (debian/), built and checked as a
# site would use them. One line per check, "packages NAME: ok" or
# "packages NAME: FAILED (why)", then "N passed, M failed".
#
#   build       dpkg-buildpackage -b of this commit in a clean clone, through
#               ccache: with CI's main build configured by tests/lib/
#               build_flags.sh and tests/lib/ccache.sh, every object is a
#               ccache hit (the count is printed); the .debs are cached by
#               commit (~/.cache/tfslurm/debs)
#   previous    the packages of the previous commit (HEAD~1), the same way;
#               while no earlier commit has debian/, this tree again as an
#               earlier version (<version>~prev)
#   lintian     lintian --fail-on warning on both builds; at most 2 overrides
#   security    systemd-analyze security --offline of the packaged unit:
#               exposure <= 2.0 as packaged (personal mode), <= 3.0 with the
#               site-mode drop-in tfslurmd-generator makes; both printed
#   piuparts    install, upgrade from the previous packages, remove, purge,
#               in a clean Debian 12 chroot
#   container   a Debian 12 system container (systemd-nspawn, systemd as PID
#               1) on the local Slurm cluster: the previous packages
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
# Needs root (the cluster, the container). Installs what it uses (debhelper,
# lintian, piuparts, mmdebstrap, systemd-container, help2man) with apt-get.
# The Debian 12 trees are cached under /opt/tfslurm/pkgtest, keyed by what
# goes into them (tests/packages/container.sh).
set -uo pipefail

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo" || exit 1
jobs=2
[[ $(id -u) -eq 0 ]] || { echo "tests/packages.sh: run as root" >&2; exit 1; }

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
"$repo/deploy/install-deps.sh" >/dev/null || exit 1

work="$(mktemp -d /srv/tfs-pkg-XXXX)"
chmod 755 "$work"
cluster=""
# shellcheck source=packages/debs.sh
source tests/packages/debs.sh
# shellcheck source=packages/container.sh
source tests/packages/container.sh
cleanup() {
  ct_stop
  [[ -n $cluster ]] && deploy/local-slurm/stop.sh "$cluster" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

# Each check's line says what it found and how long it took since the last.
passed=0 failed=0 failures=() step_started=$SECONDS
ok() {
  echo "packages $1: ok (${2:+$2, }$((SECONDS - step_started)) s)"
  passed=$((passed + 1)) step_started=$SECONDS
}
bad() {
  echo "packages $1: FAILED ($2, $((SECONDS - step_started)) s)"
  failed=$((failed + 1)) step_started=$SECONDS
  failures+=("$1")
}

# ---- build ------------------------------------------------------------------
head_commit="$(git rev-parse HEAD)"
this_version="$(deb_version "$head_commit")"
[[ -z $(git status --porcelain --untracked-files=no) ]] ||
  echo "packages: the work tree has uncommitted changes; the packages are of HEAD ($this_version) without them"
if this="$(build_debs "$head_commit" "$this_version")"; then
  ok build "$this_version, $(ccache_hits "$this")"
else
  bad build "dpkg-buildpackage failed"
  echo "$passed passed, $failed failed"
  exit 1
fi
prev_commit="$(git rev-parse --verify -q "$head_commit~1" || true)"
if [[ -n $prev_commit ]] && git cat-file -e "$prev_commit:debian/rules" 2>/dev/null; then
  prev_version="$(deb_version "$prev_commit")"
else
  # No earlier commit has packages: this tree, as an earlier version.
  prev_commit="$head_commit"
  prev_version="$(deb_version "$head_commit" "~prev")"
fi
if prev="$(build_debs "$prev_commit" "$prev_version" "$head_commit")"; then
  ok previous "$prev_version, $(ccache_hits "$prev")"
else
  bad previous "dpkg-buildpackage of $prev_version failed"
fi
debs_of() { ls "$1"/tfslurmd_*.deb "$1"/tfslurm-agent_*.deb "$1"/tfctl_*.deb; }
echo "packages: $(cd "$this" && ls ./*.deb | tr '\n' ' ')"

# ---- lintian ----------------------------------------------------------------
overrides="$(cat debian/*lintian-overrides 2>/dev/null | grep -cv '^\s*\(#\|$\)')"
if lintian_out="$(lintian --fail-on warning --display-level '>=warning' "$this"/*.changes 2>&1)"; then
  if ((overrides <= 2)); then ok lintian "$overrides overrides"; else bad lintian "$overrides overrides (at most 2)"; fi
else
  printf '%s\n' "$lintian_out"
  bad lintian "lintian --fail-on warning"
fi

# ---- the unit's exposure ----------------------------------------------------
exposure() { # ROOT: systemd-analyze's overall exposure of tfslurmd.service under ROOT
  systemd-analyze security --offline=true --root="$1" tfslurmd.service 2>&1 |
    sed -n 's/^.*Overall exposure level for tfslurmd.service: \([0-9.]*\).*/\1/p'
}
unit_root="$work/unit-root"
dpkg-deb -x "$this"/tfslurmd_*.deb "$unit_root"
personal="$(exposure "$unit_root")"
# Site mode: the drop-in the packaged generator writes for `site = true`.
mkdir -p "$unit_root/etc/tfslurm" "$work/gen"
printf 'site = true\nmunge-auth = true\noutput-root = "/srv/tfslurm"\n' >"$unit_root/etc/tfslurm/tfslurmd.conf"
sed "s|^conf=.*|conf=$unit_root/etc/tfslurm/tfslurmd.conf|; s|^tfslurmd=.*|tfslurmd=$unit_root/usr/bin/tfslurmd|" \
  "$unit_root/lib/systemd/system-generators/tfslurmd-generator" >"$work/gen/generator"
sh "$work/gen/generator" "$work/gen/out" && mkdir -p "$unit_root/etc/systemd/system" &&
  cp -r "$work/gen/out/tfslurmd.service.d" "$unit_root/etc/systemd/system/"
site="$(exposure "$unit_root")"
if grep -q '^User=root' "$unit_root/etc/systemd/system/tfslurmd.service.d/50-settings.conf" 2>/dev/null &&
  awk -v p="$personal" -v s="$site" 'BEGIN { exit !(p != "" && s != "" && p <= 2.0 && s <= 3.0) }'; then
  ok security "exposure $personal personal, $site site mode"
else
  bad security "exposure '$personal' personal (at most 2.0), '$site' site mode (at most 3.0)"
fi

# ---- piuparts ---------------------------------------------------------------
mirror="$(sed -n 's/^URIs: *//p; s/^deb \([^ ]*\) bookworm .*/\1/p' "$apt_sources" | head -n 1)"
if base="$(debian_tree tgz)"; then
  prev_repo="$work/prev-repo"
  mkdir -p "$prev_repo" && cp $(debs_of "$prev") "$prev_repo"/ &&
    (cd "$prev_repo" && dpkg-scanpackages . >Packages 2>/dev/null)
  if piuparts --basetgz="$base" --distribution=bookworm --mirror="$mirror main" \
    --extra-repo="deb [trusted=yes] file://$prev_repo ./" --bindmount="$prev_repo" \
    --no-eatmydata --warn-on-debsums-errors $(debs_of "$this") >"$work/piuparts.log" 2>&1; then
    ok piuparts "$(grep -c 'Installation of\|Upgrading\|purg' "$work/piuparts.log" || true) steps logged"
  else
    grep -E 'FAIL|ERROR' "$work/piuparts.log" | head -n 20
    bad piuparts "see its log's end above"
  fi
else
  bad piuparts "no Debian 12 base tarball (mmdebstrap failed)"
fi

# ---- the system container ---------------------------------------------------
# shellcheck source=packages/system_test.sh
source tests/packages/system_test.sh
run_system_test

echo
((failed == 0)) || echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
((failed == 0))
