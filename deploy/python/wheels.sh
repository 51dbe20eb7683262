#!/usr/bin/env bash
# deploy/python/wheels.sh NAME REQUIREMENTS: the wheels of a pinned
# requirements file, downloaded from PyPI once into a directory outside the
# checkout and kept there; prints the directory (one line on stdout).
#
# pinned-venv.sh installs its venv from them, and the TensorFlow container
# image (deploy/containers/build-images.sh) installs the same files into its
# root file system: on a fresh machine TensorFlow is downloaded once for both.
# The directory is $TFSLURM_WHEELS (default /opt/tfslurm/wheels as root, else
# ${XDG_CACHE_HOME:-~/.cache}/tfslurm/wheels)/NAME-<sha256 of REQUIREMENTS>,
# made complete or not at all (a scratch directory renamed at the end).
set -euo pipefail

name="$1" requirements="$2"
log() { printf 'wheels-%s: %s\n' "$name" "$*" >&2; }
if [[ -n "${TFSLURM_WHEELS:-}" ]]; then
  root="$TFSLURM_WHEELS"
elif [[ $(id -u) -eq 0 ]]; then
  root=/opt/tfslurm/wheels
else
  root="${XDG_CACHE_HOME:-$HOME/.cache}/tfslurm/wheels"
fi
dir="$root/$name-$(sha256sum "$requirements" | cut -c1-16)"
if [[ -f "$dir/.complete" ]]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$root"
work="$(mktemp -d "$root/.$name.XXXX")"
trap 'rm -rf "$work"' EXIT
started=$SECONDS
# Debian's python3 with pip from a throwaway venv: Debian's own python3 has
# no pip unless python3-pip is installed.
/usr/bin/python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-input \
  -d "$work/wheels" -r "$requirements"
touch "$work/wheels/.complete"
rm -rf "$dir"
mv "$work/wheels" "$dir"
chmod -R a+rX "$dir"
log "downloaded into $dir ($(du -sh "$dir" | cut -f1), $((SECONDS - started)) s)"
echo "$dir"
