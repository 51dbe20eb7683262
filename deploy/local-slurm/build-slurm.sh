#!/usr/bin/env bash
# build-slurm.sh VERSION: builds Slurm VERSION from SchedMD's release source
# into a prefix outside the checkout, once, and prints the prefix (one line
# on stdout; progress on stderr):
#
#   prefix="$(deploy/local-slurm/build-slurm.sh 26.05.3)"
#   deploy/local-slurm/start.sh --slurm-prefix "$prefix" DIR
#   cmake -S . -B build-26.05 -DTFSLURM_SLURM_PREFIX="$prefix"
#
# The prefix is $TFSLURM_SLURM_BUILDS/slurm-VERSION, by default
# /opt/tfslurm/slurm-VERSION as root (beside the TensorFlow venv of
# deploy/install-tf.sh, so every clone and CI's fresh one reuse it), else
# ${XDG_CACHE_HOME:-~/.cache}/tfslurm/slurm-VERSION. A finished build
# records the tarball's sha256 and this script's configure line; a second
# run that finds both unchanged and slurmctld answering --version costs a
# second. Anything else is built again from scratch, in a scratch directory
# that replaces the prefix only when make install has succeeded.
#
# The machines cannot download SchedMD's tarballs: the sources are
# slurm-VERSION.tar.xz in $TFSLURM_SLURM_SOURCES, or else in the shared/slurm
# folder beside the checkout (../shared/slurm, whose README gives each one's
# SchedMD tag and sha256). The sha256 below is checked before anything is
# unpacked; a release without one here is refused.
#
# Debian's packages the build needs (libmunge-dev, libmariadb-dev, ...) come
# from deploy/install-deps.sh.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd -- "$here/../.." && pwd)"
log() { printf 'build-slurm: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# The releases this project builds, each `git archive` of SchedMD's tag
# (slurm-24-11-7-1, slurm-26-05-3-1) compressed with xz.
declare -A known_sha256=(
  [24.11.7]=a0cd2843b0672eb00ab66a52e04a2f7efbcf000b3f65315e60cb093a868203e2
  [26.05.3]=b7c7c7c8d78f7fde485ac7fc811034c5dd1a067d0167dba1a044e731c0374b13
)

[[ $# -eq 1 ]] || die "usage: $0 VERSION (one of: ${!known_sha256[*]})"
version="$1"
want_sha="${known_sha256[$version]:-}"
[[ -n "$want_sha" ]] || die "no known sha256 for Slurm '$version'; releases this script builds: ${!known_sha256[*]}"

if [[ -n "${TFSLURM_SLURM_BUILDS:-}" ]]; then
  builds="$TFSLURM_SLURM_BUILDS"
elif [[ $(id -u) -eq 0 ]]; then
  builds=/opt/tfslurm
else
  builds="${XDG_CACHE_HOME:-$HOME/.cache}/tfslurm"
fi
prefix="$builds/slurm-$version"

# --enable-multiple-slurmd: the local cluster runs three slurmd on one host
# (slurmd -N NODE), as Debian's build allows. Otherwise only what the local
# cluster and tfslurmd use: the daemons (slurmctld,
# slurmd, slurmstepd, slurmdbd with its MySQL/MariaDB plugin), the clients,
# libslurm and its headers, auth/munge, and serializer/json (json-c), through
# which slurmstepd reads an OCI bundle's config.json for srun --container
# (container.c; without it the step dies "serializer_required: could not
# find plugin for application/json"). Off: slurmrestd and the rest it
# pulls in (http-parser, YAML, JWT), the GUI, PAM, X11, and the
# hardware and network plugins (hwloc, NVML, RSMI, oneAPI, UCX, PMIx, HDF5,
# Lua, IPMI, libcurl, OFED, Kafka, s2n, BPF, Slingshot; lz4 stays on its
# default, since 26.05.3's configure fails on --without-lz4 with
# 'conditional "BUILD_LZ4" was never defined'), and cgroup v2 (the
# local cluster runs no cgroup plugin unless it constrains devices, and
# that is cgroup v1's). A release that does not know one of these options
# ignores it (configure's --disable-option-checking is off, but autoconf
# only warns about unknown --with/--enable options). -O1 without -g: a tenth less compile time than
# configure's default -O2 -g, and nothing here is debugged with gdb.
configure_args=(
  --disable-debug --disable-slurmrestd --disable-x11 --disable-pam --disable-sview
  --disable-cgroupv2 --enable-multiple-slurmd
  --without-hwloc --without-nvml --without-rsmi --without-oneapi --without-ucx --without-pmix
  --without-hdf5 --without-lua --without-freeipmi --without-libcurl --without-jwt
  --without-libhttp-parser --without-llhttp-parser --without-yaml --with-json
  --without-ofed --without-rdkafka --without-s2n --without-bpf --without-hpe-slingshot
  --without-readline --with-munge=/usr --with-mysql_config=/usr/bin
)
cflags="-O1 -g0"
recipe="$want_sha ${configure_args[*]} CFLAGS=$cflags"
stamp="$prefix/.tfslurm-build"

ready() {
  [[ -f "$stamp" && "$(cat "$stamp")" == "$recipe" && -x "$prefix/sbin/slurmctld" ]] &&
    "$prefix/sbin/slurmctld" -V 2>/dev/null | grep -qx "slurm $version"
}

if ready; then
  log "ready: $prefix"
  echo "$prefix"
  exit 0
fi

sources=()
if [[ -n "${TFSLURM_SLURM_SOURCES:-}" ]]; then sources+=("$TFSLURM_SLURM_SOURCES"); fi
sources+=("$repo/../shared/slurm")
tarball=""
for d in "${sources[@]}"; do
  if [[ -f "$d/slurm-$version.tar.xz" ]]; then
    tarball="$(cd -- "$d" && pwd)/slurm-$version.tar.xz"
    break
  fi
done
[[ -n "$tarball" ]] || die "slurm-$version.tar.xz is in none of: ${sources[*]} (set TFSLURM_SLURM_SOURCES to its folder)"
got_sha="$(sha256sum "$tarball" | cut -d' ' -f1)"
[[ "$got_sha" == "$want_sha" ]] || die "$tarball has sha256 $got_sha, not SchedMD's slurm-$version ($want_sha)"

for tool in gcc make xz mariadb_config; do
  command -v "$tool" >/dev/null || die "$tool not found; run deploy/install-deps.sh"
done
[[ -f /usr/include/munge.h ]] || die "munge.h not found; run deploy/install-deps.sh (libmunge-dev)"

mkdir -p "$builds"
work="$(mktemp -d "$builds/.slurm-$version-build.XXXX")"
trap 'rm -rf "$work"' EXIT
started=$SECONDS
log "building Slurm $version from $tarball into $prefix (about 10 minutes on 2 cores)"
tar -C "$work" -xJf "$tarball"
src="$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)"
[[ -x "$src/configure" ]] || die "$tarball has no configure at its top"
# Installed into the scratch prefix's final path: Slurm compiles its plugin
# directory and slurmstepd's path in, so the files must end up where
# --prefix says. The old prefix is moved aside only once make install has
# succeeded.
staging="$work/install"
(
  cd "$src"
  ./configure --prefix="$prefix" "${configure_args[@]}" CFLAGS="$cflags" >"$work/configure.log" 2>&1 ||
    { tail -n 40 "$work/configure.log" >&2; exit 1; }
  log "configured in $((SECONDS - started)) s"
  make -j2 >"$work/make.log" 2>&1 || { grep -E 'error|Error' "$work/make.log" | tail -n 40 >&2; exit 1; }
  log "compiled in $((SECONDS - started)) s"
  make install DESTDIR="$staging" >"$work/install.log" 2>&1 || { tail -n 40 "$work/install.log" >&2; exit 1; }
) || die "the build of Slurm $version failed (logs were in $work)"
rm -rf "$prefix.old"
if [[ -e "$prefix" ]]; then mv "$prefix" "$prefix.old"; fi
mv "$staging$prefix" "$prefix"
rm -rf "$prefix.old"
echo "$recipe" >"$stamp"
chmod -R a+rX "$prefix"
ready || die "Slurm $version was installed into $prefix but its slurmctld does not report 'slurm $version'"
log "ready: $prefix (built in $((SECONDS - started)) s)"
echo "$prefix"
