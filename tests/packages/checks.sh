# Sourced by tests/packages.sh: the checks that need no cluster (build,
# previous, lintian, security, piuparts) and the Debian 12 tree the
# container boots. Uses tests/packages.sh's ok/bad, $work, $head_commit and
# the helpers of debs.sh and container.sh; sets this, this_version, prev,
# prev_version and tree for the container's checks.
# shellcheck shell=bash

debs_of() { ls "$1"/tfslurmd_*.deb "$1"/tfslurm-agent_*.deb "$1"/tfctl_*.deb; }

check_build() {
  this_version="$(deb_version "$head_commit")"
  if this="$(build_debs "$head_commit" "$this_version")"; then
    ok build "$this_version, $(ccache_hits "$this")"
  else
    this=""
    bad build "dpkg-buildpackage failed"
  fi
}

# The packages to upgrade from (tests/packages.sh's header says which).
# An earlier commit whose packages do not build (its Build-Depends are not
# this machine's any more, say) says nothing of this one: this tree as an
# earlier version stands in, and the line says so.
check_previous() {
  local commit="" c from=""
  while read -r c; do
    git cat-file -e "$c:debian/rules" 2>/dev/null || break
    if [[ -f $debs_cache/$(deb_version "$c")/done ]]; then
      commit="$c" from="cached"
      break
    fi
  done < <(git rev-list --first-parent --skip=1 --max-count=50 "$head_commit")
  if [[ -z $commit ]]; then
    commit="$(git rev-parse --verify -q "$head_commit~1" || true)"
    if [[ -n $commit ]] && git cat-file -e "$commit:debian/rules" 2>/dev/null; then
      from="HEAD~1, built"
    else
      commit="" from="no earlier commit has debian/: this tree as an earlier version, built"
    fi
  fi
  prev=""
  if [[ -n $commit ]]; then
    prev_version="$(deb_version "$commit")"
    prev="$(build_debs "$commit" "$prev_version")" ||
      from="$prev_version did not build (its log: $debs_cache/$prev_version/build.log): this tree as an earlier version, built"
  fi
  if [[ -z $prev ]]; then
    prev_version="$(deb_version "$head_commit" "~prev")"
    prev="$(build_debs "$head_commit" "$prev_version")" || prev=""
  fi
  if [[ -n $prev ]]; then
    ok previous "$prev_version, $from, $(ccache_hits "$prev")"
  else
    bad previous "dpkg-buildpackage of $prev_version failed"
  fi
}

check_lintian() {
  local overrides out
  overrides="$(cat debian/*lintian-overrides 2>/dev/null | grep -cv '^\s*\(#\|$\)')"
  if out="$(lintian --fail-on warning --display-level '>=warning' "$this"/*.changes 2>&1)"; then
    if ((overrides <= 2)); then ok lintian "$overrides overrides"; else bad lintian "$overrides overrides (at most 2)"; fi
  else
    printf '%s\n' "$out"
    bad lintian "lintian --fail-on warning"
  fi
}

# exposure ROOT: systemd-analyze's overall exposure of tfslurmd.service
# under ROOT.
exposure() {
  systemd-analyze security --offline=true --root="$1" tfslurmd.service 2>&1 |
    sed -n 's/^.*Overall exposure level for tfslurmd.service: \([0-9.]*\).*/\1/p'
}

check_security() {
  local unit_root="$work/unit-root" personal site
  dpkg-deb -x "$this"/tfslurmd_*.deb "$unit_root"
  personal="$(exposure "$unit_root")"
  # Site mode: the drop-in the packaged generator writes for `site = true`,
  # on the packaged settings (TLS on: tfslurmd, and so the generator, refuses
  # plaintext on site mode's agent endpoint, which faces every node).
  mkdir -p "$unit_root/etc/tfslurm" "$work/gen"
  sed -i -e 's/^site = .*/site = true/; s/^#munge-auth = .*/munge-auth = true/' \
    -e 's|^output-root = .*|output-root = "/srv/tfslurm"|; s/^agent-listen = .*/agent-listen = "0.0.0.0:8081"/' \
    "$unit_root/etc/tfslurm/tfslurmd.conf"
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
}

# The packaged settings file and man page follow tfslurmd's options: every
# setting --print-config lists is in the man page (made from --help), and
# every example in the file, uncommented, is a setting tfslurmd accepts.
check_settings() {
  local root="$work/settings-root" all="$work/all-settings.conf" keys missing=() k examples
  dpkg-deb -x "$this"/tfslurmd_*.deb "$root" || { bad settings "dpkg-deb -x failed"; return; }
  if ! keys="$("$root/usr/bin/tfslurmd" --config "$root/etc/tfslurm/tfslurmd.conf" --print-config 2>&1)"; then
    printf '%s\n' "$keys"
    bad settings "tfslurmd --print-config refused the packaged settings file"
    return
  fi
  local man
  man="$(zcat "$root/usr/share/man/man1/tfslurmd.1.gz" | sed 's/\\-/-/g')" # roff's \- is -
  for k in $(sed -n 's/^\([a-z][a-z-]*\) = .*/\1/p' <<<"$keys"); do
    grep -qE -- "--$k([^a-z-]|\$)" <<<"$man" || missing+=("$k")
  done
  # Every example uncommented; the TLS lines left out, as the example
  # insecure-plaintext is their alternative (the two are refused together).
  # The packaged file, TLS lines and all, passed above.
  sed -e 's/^#\([a-z][a-z-]* = .*\)/\1/' -e '/^tls-[a-z]* = /d' "$root/etc/tfslurm/tfslurmd.conf" >"$all"
  if ((${#missing[@]})); then
    bad settings "not in man tfslurmd: ${missing[*]}"
  elif ! examples="$("$root/usr/bin/tfslurmd" --config "$all" --print-config 2>&1)"; then
    printf '%s\n' "$examples"
    bad settings "an example in /etc/tfslurm/tfslurmd.conf is not a setting"
  else
    ok settings "$(wc -l <<<"$keys") lines of --print-config, $(grep -c "# $all" <<<"$examples") settings in the file with its examples"
  fi
}

# The one Debian 12 tree: the container's, and piuparts' starting point.
make_tree() {
  # shellcheck disable=SC2046 # one package a word
  if tree="$(debian_tree systemd systemd-sysv dbus sqlite3 procps slurm-client \
    $(deb_depends $(debs_of "$this") ${prev:+$(debs_of "$prev")}))"; then
    ok tree "${tree##*/}"
  else
    tree=""
    bad tree "mmdebstrap failed"
  fi
}

# piuparts in a copy of the tree: it has the packages' dependencies already,
# so that each of piuparts' chroots installs, upgrades and purges only
# tfslurm's own packages (and fetches nothing but the indexes).
check_piuparts() {
  local mirror prev_repo="$work/prev-repo" log="$state/piuparts.log"
  mirror="$(sed -n 's/^URIs: *//p; s/^deb \([^ ]*\) bookworm .*/\1/p' "$apt_sources" | head -n 1)"
  mkdir -p "$prev_repo" && cp $(debs_of "$prev") "$prev_repo"/ &&
    (cd "$prev_repo" && dpkg-scanpackages . >Packages 2>/dev/null)
  if piuparts --existing-chroot="$tree" --distribution=bookworm --mirror="$mirror main" \
    --extra-repo="deb [trusted=yes] file://$prev_repo ./" --bindmount="$prev_repo" \
    --no-eatmydata --warn-on-debsums-errors $(debs_of "$this") >"$log" 2>&1; then
    ok piuparts "$(grep -c 'Installation of\|Upgrading\|purg' "$log" || true) steps logged"
  else
    grep -E 'FAIL|ERROR' "$log" | head -n 20
    bad piuparts "see its log's end above (build/packages/piuparts.log)"
  fi
}

prepare_checks() {
  check_build
  [[ -n $this ]] || return 0
  check_previous
  check_lintian
  check_security
  check_settings
  [[ -n $prev ]] || return 0
  make_tree
  [[ -n $tree ]] || return 0
  check_piuparts
}
