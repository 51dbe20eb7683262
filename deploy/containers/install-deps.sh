#!/usr/bin/env bash
# deploy/containers/install-deps.sh: the Debian 12 packages that building and
# running the container runtimes and test images need (docs/containers.md).
# Idempotent like deploy/install-deps.sh: a second run costs one dpkg query.
#
#   enroot's build:        libbsd-dev makeself
#   enroot's runtime:      squashfs-tools squashfuse fuse-overlayfs jq parallel
#                          pigz zstd (its README's list), fuse3
#   Slurm's OCI support:   runc (crun 1.8 refuses this machine's hybrid cgroups)
#   images:                mmdebstrap (the root file systems), umoci (OCI layouts),
#                          podman (enroot import podman://)
set -euo pipefail

packages=(
  libbsd-dev makeself
  squashfs-tools squashfuse fuse-overlayfs fuse3 jq parallel pigz zstd
  runc
  mmdebstrap umoci podman
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "containers/install-deps: all ${#packages[@]} packages present" >&2
  exit 0
fi
echo "containers/install-deps: installing ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
