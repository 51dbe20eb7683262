# Sourced by tests/packages.sh: Debian 12 trees made with mmdebstrap from
# the machine's own apt sources, cached outside the checkout under
# /opt/tfslurm/pkgtest by what goes into them, and a system container
# (systemd-nspawn --boot: systemd as its PID 1) booted from one.
# shellcheck shell=bash

tree_cache="${TFSLURM_TREE_CACHE:-/opt/tfslurm/pkgtest}"
# The machine's apt sources (Debian 12's mirror and its security updates).
apt_sources="${TFSLURM_APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}"
[[ -r $apt_sources ]] || apt_sources=/etc/apt/sources.list

# debian_tree PACKAGES...: prints a cached Debian 12 tree (mmdebstrap's
# minbase) with PACKAGES installed, making it first if needed. A tree is
# made from the machine's apt sources by this function's text (both are in
# its name's key), with the packages its list beside it names (TREE.packages);
# any such tree whose list holds every one of PACKAGES serves, so that a
# dependency dropped does not cost a new tree. piuparts starts from a copy
# of it; the container boots an ephemeral copy: the tree never changes.
debian_tree() {
  local key wanted out tmp list
  key="$(printf '%s\n' "$(cat "$apt_sources")" "$(declare -f debian_tree)" | sha256sum | cut -c1-12)"
  wanted="$(printf '%s\n' "$@" | sort -u)"
  for list in $(ls -t "$tree_cache"/bookworm-"$key"-*.packages 2>/dev/null); do
    out="${list%.packages}"
    if [[ -d $out && -z $(comm -23 <(echo "$wanted") "$list") ]]; then
      touch "$list" # the newest used is kept longest
      echo "$out"
      return 0
    fi
  done
  out="$tree_cache/bookworm-$key-$(sha256sum <<<"$wanted" | cut -c1-8)"
  mkdir -p "$tree_cache"
  tmp="$tree_cache/partial-$BASHPID"
  rm -rf "$tmp"
  if mmdebstrap --quiet --variant=minbase --include="$(paste -sd, <<<"$wanted")" bookworm "$tmp" \
    "$apt_sources" >&2; then
    rm -rf "$out" && mv "$tmp" "$out" && echo "$wanted" >"$out.packages" || return 1
    # Other trees: the three used last stay.
    ls -t "$tree_cache"/bookworm-*.packages | tail -n +4 | while read -r list; do
      rm -rf "${list%.packages}" "$list"
    done
    echo "$out"
  else
    rm -rf "$tmp"
    return 1
  fi
}

# deb_depends DEB...: the packages DEBs depend on, by name (the first of
# each alternative), leaving out the DEBs' own.
deb_depends() {
  local own
  own="$(for d in "$@"; do dpkg-deb -f "$d" Package; done)"
  for d in "$@"; do dpkg-deb -f "$d" Depends; done | tr ',' '\n' |
    sed 's/|.*//; s/(.*)//; s/[[:space:]]//g; /^$/d' | sort -u | grep -vxF "$own"
}

ct_pid="" ct_nspawn_pid=""

# ct_boot TREE NAME BIND...: boots an ephemeral copy of TREE (changes go
# when it stops) with systemd as PID 1, the host's network, and each BIND
# (a host directory, seen at the same path). Waits until systemd says the
# system is up. systemd-nspawn runs without a systemd on the host here:
# --keep-unit --register=no (no scope, no machined).
ct_boot() {
  local tree="$1" name="$2" log="$work/nspawn-$2.log" binds=()
  shift 2
  for b in "$@"; do binds+=("--bind=$b"); done
  systemd-nspawn --quiet --directory="$tree" --ephemeral --boot --machine="$name" \
    --keep-unit --register=no --console=passive "${binds[@]}" </dev/null >"$log" 2>&1 &
  ct_nspawn_pid=$!
  local deadline=$((SECONDS + 90)) state=""
  while ((SECONDS < deadline)); do
    ct_pid="$(pgrep -P "$ct_nspawn_pid" -x systemd | head -n 1)"
    if [[ -n $ct_pid ]]; then
      state="$(ct systemctl is-system-running 2>/dev/null)"
      [[ $state == running || $state == degraded ]] && return 0
    fi
    kill -0 "$ct_nspawn_pid" 2>/dev/null || break
    sleep 0.5
  done
  echo "container $name did not come up (state '$state'); nspawn's log:" >&2
  cat "$log" >&2
  return 1
}

# ct CMD...: runs CMD in the container (all its namespaces), with a plain
# environment.
ct() {
  nsenter --target "$ct_pid" --all -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    HOME=/root "$@"
}

# ct_stop: powers the container off, and kills it if that takes over 30 s.
ct_stop() {
  [[ -n $ct_nspawn_pid ]] || return 0
  ct systemctl poweroff >/dev/null 2>&1 || true
  local deadline=$((SECONDS + 30))
  while kill -0 "$ct_nspawn_pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.5; done
  kill -9 "$ct_nspawn_pid" 2>/dev/null || true
  wait "$ct_nspawn_pid" 2>/dev/null || true
  ct_nspawn_pid="" ct_pid=""
}
