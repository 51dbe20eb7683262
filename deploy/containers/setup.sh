#!/usr/bin/env bash
# deploy/containers/setup.sh [--slurm-prefix PREFIX]: everything the local
# cluster needs to run tasks in containers, for Debian's Slurm or the Slurm
# build in PREFIX (deploy/local-slurm/build-slurm.sh); prints a directory
# for deploy/local-slurm/start.sh --containers (one line on stdout):
#
#   cdir="$(deploy/containers/setup.sh)"
#   deploy/local-slurm/start.sh --containers "$cdir" DIR
#
# The directory ($TFSLURM_RUNTIME_BUILDS or /opt/tfslurm, containers-slurm-RELEASE) holds
#   plugstack.conf   `required .../spank_pyxis.so`: pyxis 0.24.0 built against
#                    this release's spank.h (build-runtimes.sh pyxis)
#   oci.conf         Slurm's OCI support through rootless runc (crun 1.8 refuses
#                    this machine's hybrid cgroups: docs/containers.md)
#   bin/             enroot 4.1.2 (build-runtimes.sh enroot), for the daemons' PATH:
#                    pyxis runs `enroot` from slurmstepd's PATH (execvpe in
#                    pyxis's enroot.c), and so does the agent's launcher
# Debian's packages first (install-deps.sh). Idempotent: a second run
# rewrites three small files.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
prefix=""
if [[ "${1:-}" == --slurm-prefix ]]; then
  prefix="${2:?--slurm-prefix needs a directory}"
  shift 2
fi
[[ $# -eq 0 ]] || { echo "usage: $0 [--slurm-prefix PREFIX]" >&2; exit 2; }

"$here/install-deps.sh"
enroot="$("$here/build-runtimes.sh" enroot)"
pyxis="$("$here/build-runtimes.sh" pyxis ${prefix:+"$prefix"})"
if [[ -n "$prefix" ]]; then
  release="$("$prefix/sbin/slurmd" -V | awk '{print $2}')"
else
  release="$(slurmd -V | awk '{print $2}')"
fi
if [[ -n "${TFSLURM_RUNTIME_BUILDS:-}" ]]; then
  builds="$TFSLURM_RUNTIME_BUILDS"
elif [[ $(id -u) -eq 0 ]]; then
  builds=/opt/tfslurm
else
  builds="${XDG_CACHE_HOME:-$HOME/.cache}/tfslurm"
fi
cdir="$builds/containers-slurm-$release"
mkdir -p "$cdir/bin"
for f in "$enroot"/bin/*; do ln -sfn "$f" "$cdir/bin/$(basename "$f")"; done
echo "required $pyxis" >"$cdir/plugstack.conf"
# %u: the job's user name (_generate_pattern in src/slurmd/slurmstepd/container.c):
# rootless runc keeps each user's container state in a directory of theirs,
# which `runc run`, run as the job's user, makes. slurmstepd runs the query,
# kill and delete as root (run_command without a uid, _kill_container in
# container.c at slurm-26-05-3-1), and runc makes a missing --root as
# whoever runs it: after a run that failed before making it, a root-owned
# directory would refuse the user's every later run ("lstat ...: permission
# denied"). So those three touch only a directory that is there. Each
# pattern runs through /bin/sh -c. (Slurm's own example, /run/user/%U,
# rests on systemd-logind making that directory; %U is 23.02's, not 22.05's.)
# %n.%u.%j.%s.%t names one container per task; %b is the bundle.
state=/tmp/tfslurm-runc-%u
runc="runc --rootless=true --root=$state"
cat >"$cdir/oci.conf" <<OCI
# Written by tfslurm's deploy/containers/setup.sh for Slurm $release (docs/containers.md).
RunTimeQuery="test -d $state && $runc state %n.%u.%j.%s.%t"
RunTimeKill="test -d $state && $runc kill -a %n.%u.%j.%s.%t"
RunTimeDelete="test -d $state && $runc delete --force %n.%u.%j.%s.%t"
RunTimeRun="$runc run %n.%u.%j.%s.%t -b %b"
OCI
chmod -R a+rX "$cdir"
echo "containers/setup: $cdir (enroot $enroot, pyxis $pyxis, Slurm $release)" >&2
echo "$cdir"
