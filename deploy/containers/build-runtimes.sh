#!/usr/bin/env bash
# deploy/containers/build-runtimes.sh WHAT: builds NVIDIA's enroot 4.1.2 or
# pyxis 0.24.0 from their release sources, once, into a prefix outside the
# checkout, and prints where it is (one line on stdout; progress on stderr):
#
#   enroot="$(deploy/containers/build-runtimes.sh enroot)"        # PREFIX: bin/enroot
#   pyxis="$(deploy/containers/build-runtimes.sh pyxis)"          # spank_pyxis.so for Debian's Slurm
#   pyxis="$(deploy/containers/build-runtimes.sh pyxis SLURM_PREFIX)"  # ... for that Slurm build
#
# Prefixes: $TFSLURM_RUNTIME_BUILDS (default /opt/tfslurm as root, else
# ${XDG_CACHE_HOME:-~/.cache}/tfslurm, as deploy/local-slurm/build-slurm.sh):
#   enroot-4.1.2/                 enroot, its helpers, hooks and enroot.conf
#   pyxis-0.24.0-slurm-RELEASE/   spank_pyxis.so built against RELEASE's spank.h
# Each records the tarball's sha256 and this script's recipe; a second run
# that finds both unchanged costs a second. pyxis must be compiled against
# the Slurm release it is loaded into (its README: Slurm refuses a plugin of
# another release with "Incompatible plugin version"), so there is one per
# release.
#
# The machines cannot download GitHub releases: the sources are in
# $TFSLURM_CONTAINER_SOURCES or ../shared/containers beside the checkout,
# whose README gives each one's tag and sha256 (checked here). Debian's
# packages: deploy/containers/install-deps.sh.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd -- "$here/../.." && pwd)"
log() { printf 'build-runtimes: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

enroot_version=4.1.2
enroot_sha=817e8d551135e6f3fc311d1ee57b03fb4d30325acba732f8dea43069ca11f8d3
pyxis_version=0.24.0
pyxis_sha=063653ba39125ac29796cc6079701d1ec34dd4c5baf698efacc0f36bf3619681

[[ $# -ge 1 && ($1 == enroot || $1 == pyxis) ]] || die "usage: $0 enroot | pyxis [SLURM_PREFIX]"
what="$1"

if [[ -n "${TFSLURM_RUNTIME_BUILDS:-}" ]]; then
  builds="$TFSLURM_RUNTIME_BUILDS"
elif [[ $(id -u) -eq 0 ]]; then
  builds=/opt/tfslurm
else
  builds="${XDG_CACHE_HOME:-$HOME/.cache}/tfslurm"
fi

tarball() { # tarball NAME SHA: the checked path of NAME
  local d
  for d in ${TFSLURM_CONTAINER_SOURCES:+"$TFSLURM_CONTAINER_SOURCES"} "$repo/../shared/containers"; do
    if [[ -f "$d/$1" ]]; then
      [[ "$(sha256sum "$d/$1" | cut -d' ' -f1)" == "$2" ]] || die "$d/$1 is not the release this script knows (sha256 $2)"
      printf '%s\n' "$(cd -- "$d" && pwd)/$1"
      return
    fi
  done
  die "$1 is in none of: ${TFSLURM_CONTAINER_SOURCES:-} $repo/../shared/containers (set TFSLURM_CONTAINER_SOURCES)"
}

# The enroot.conf of this installation. Paths per user under /tmp (every
# user can create them; a site puts them on node-local disks), images taken
# as they are (no remapping to root, no home mounted: the program sees the
# same uid and paths inside as outside), the root file system read-only, and
# squashfs files written uncompressed (enroot import, enroot export): the
# test images are read far more often than they are built, and
# decompressing costs CPU at every start. The imports are kept on the
# node's local disk, /var/tmp/tfslurm-node: on the local cluster, whose
# three slurmd share one host, each slurmd sees a directory of its own there
# (start.sh --containers), so two nodes never fill one directory at once.
# (A per-node path from SLURMD_NODENAME does not work: pyxis runs `enroot
# list` in slurm_spank_user_init, before slurmstepd sets it, and `enroot
# create` in task_init, after, so the two would look in different places.)
enroot_conf() {
  cat <<'EOF'
# Written by tfslurm's deploy/containers/build-runtimes.sh (docs/containers.md).
ENROOT_RUNTIME_PATH        /tmp/enroot-$(id -u)/run
ENROOT_CACHE_PATH          /tmp/enroot-$(id -u)/cache
ENROOT_DATA_PATH           /var/tmp/tfslurm-node/enroot-data-$(id -u)
ENROOT_TEMP_PATH           /tmp
ENROOT_SQUASH_OPTIONS      -noI -noD -noF -noX -no-duplicates -exit-on-error
ENROOT_MOUNT_HOME          no
ENROOT_REMAP_ROOT          no
ENROOT_ROOTFS_WRITABLE     no
EOF
}

build_enroot() {
  local prefix="$builds/enroot-$enroot_version" src work
  local recipe="$enroot_sha FORCE_GLIBC=1 libbsd conf:$(enroot_conf | sha256sum | cut -c1-16)"
  if [[ -f "$prefix/.tfslurm-build" && "$(cat "$prefix/.tfslurm-build")" == "$recipe" ]] &&
    "$prefix/bin/enroot" version >/dev/null 2>&1; then
    log "ready: $prefix"
    echo "$prefix"
    return
  fi
  src="$(tarball "enroot-$enroot_version.tar.gz" "$enroot_sha")"
  for tool in gcc make makeself unsquashfs squashfuse fuse-overlayfs; do
    command -v "$tool" >/dev/null || die "$tool not found; run deploy/containers/install-deps.sh"
  done
  [[ -f /usr/include/bsd/string.h ]] || die "libbsd-dev is missing; run deploy/containers/install-deps.sh"
  mkdir -p "$builds"
  work="$(mktemp -d "$builds/.enroot-build.XXXX")"
  trap 'rm -rf "$work"' RETURN
  log "building enroot $enroot_version into $prefix"
  tar -C "$work" -xzf "$src"
  (
    cd "$work/enroot-$enroot_version"
    # The recipe of ../shared/containers/README.md: git archive leaves out
    # the submodules; Debian's makeself and kernel headers stand in, and
    # FORCE_GLIBC=1 builds without musl. glibc 2.36 has no strlcpy/strlcat:
    # Debian's libbsd has them (-l:libbsd.so.0, since -lbsd would find
    # enroot's own deps/dist/libbsd/libbsd.a first).
    # enroot's own libbsd subset (deps/) first, with its own flags: the
    # -include below would break its fparseln.c. Built without DESTDIR,
    # which the Makefile would otherwise write into the enroot script's
    # paths; installed with it.
    mkdir -p deps/makeself deps/linux-headers
    cp /usr/bin/makeself deps/makeself/makeself.sh
    touch deps/linux-headers/.stamp
    {
      make -C deps FORCE_GLIBC=1 &&
        make FORCE_GLIBC=1 prefix="$prefix" CPPFLAGS="-D_GNU_SOURCE -include bsd/string.h" \
          LDLIBS="-l:libbsd.a -l:libbsd.so.0" all &&
        make FORCE_GLIBC=1 prefix="$prefix" DESTDIR="$work/install" install
    } >"$work/make.log" 2>&1 || { tail -n 30 "$work/make.log" >&2; exit 1; }
  ) || die "the build of enroot failed"
  enroot_conf >"$work/install$prefix/etc/enroot/enroot.conf"
  rm -rf "$prefix"
  mv "$work/install$prefix" "$prefix"
  echo "$recipe" >"$prefix/.tfslurm-build"
  chmod -R a+rX "$prefix"
  "$prefix/bin/enroot" version >/dev/null || die "enroot was installed into $prefix but does not run"
  log "ready: $prefix (enroot $("$prefix/bin/enroot" version))"
  echo "$prefix"
}

build_pyxis() {
  local slurm_prefix="${1:-}" include release prefix src work recipe
  if [[ -n "$slurm_prefix" ]]; then
    include="$slurm_prefix/include"
    release="$("$slurm_prefix/sbin/slurmd" -V | awk '{print $2}')"
  else
    include=/usr/include
    release="$(slurmd -V | awk '{print $2}')"
  fi
  [[ -f "$include/slurm/spank.h" ]] || die "no $include/slurm/spank.h (libslurm-dev, or a Slurm build's prefix)"
  [[ -n "$release" ]] || die "cannot tell the Slurm release of ${slurm_prefix:-the system}"
  prefix="$builds/pyxis-$pyxis_version-slurm-$release"
  recipe="$pyxis_sha $include $(sha256sum "$include/slurm/spank.h" | cut -c1-16)"
  if [[ -f "$prefix/.tfslurm-build" && "$(cat "$prefix/.tfslurm-build")" == "$recipe" && -f "$prefix/spank_pyxis.so" ]]; then
    log "ready: $prefix/spank_pyxis.so"
    echo "$prefix/spank_pyxis.so"
    return
  fi
  src="$(tarball "pyxis-$pyxis_version.tar.gz" "$pyxis_sha")"
  mkdir -p "$builds"
  work="$(mktemp -d "$builds/.pyxis-build.XXXX")"
  trap 'rm -rf "$work"' RETURN
  log "building pyxis $pyxis_version against Slurm $release ($include) into $prefix"
  tar -C "$work" -xzf "$src"
  # The Makefile appends what the environment gives it (CPPFLAGS := ... $(CPPFLAGS)).
  CPPFLAGS="-I$include" make -C "$work/pyxis-$pyxis_version" >"$work/make.log" 2>&1 ||
    { tail -n 30 "$work/make.log" >&2; die "the build of pyxis failed"; }
  rm -rf "$prefix"
  mkdir -p "$prefix"
  install -m 644 "$work/pyxis-$pyxis_version/spank_pyxis.so" "$prefix/"
  echo "$recipe" >"$prefix/.tfslurm-build"
  chmod -R a+rX "$prefix"
  log "ready: $prefix/spank_pyxis.so"
  echo "$prefix/spank_pyxis.so"
}

case "$what" in
  enroot) build_enroot ;;
  pyxis) build_pyxis "${2:-}" ;;
esac
