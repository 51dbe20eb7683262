#!/usr/bin/env bash
# tests/containers.sh [--slurm-prefix PREFIX]: what the container tests
# (tests/integration/test_containers.py) need, made or found in the caches
# outside the checkout; prints two lines to eval before the local cluster
# starts:
#
#   eval "$(tests/containers.sh)"          # Debian's Slurm 22.05
#   eval "$(tests/containers.sh --slurm-prefix "$prefix")"   # a build-slurm.sh build
#
#   export LOCAL_SLURM_CONTAINERS=DIR   start.sh --containers: pyxis in plugstack.conf,
#                                       oci.conf (runc), enroot on the daemons' PATH
#   export TFSLURM_IMAGES=DIR           the images (deploy/containers/build-images.sh)
#
# Each piece is cached by its inputs (docs/containers.md gives the costs on
# a fresh machine); a second run costs a few seconds.
set -euo pipefail
repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cdir="$("$repo/deploy/containers/setup.sh" "$@")"
images="$("$repo/deploy/containers/build-images.sh")"
printf 'export LOCAL_SLURM_CONTAINERS=%q\nexport TFSLURM_IMAGES=%q\n' "$cdir" "$images"
