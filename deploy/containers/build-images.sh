#!/usr/bin/env bash
# deploy/containers/build-images.sh: the container images of tfslurm's
# container tests and benchmark, built locally (no registry can be reached)
# and imported the way a site imports images, once; prints their directory
# (one line on stdout; progress on stderr):
#
#   images="$(deploy/containers/build-images.sh)"
#   $images/python.sqsh   Debian 12 with python3 only
#   $images/tf.sqsh       ... and tensorflow-cpu + tensorboard from PyPI
#                         (deploy/python/requirements-tf.txt)
#   $images/tf.oci/       the TF image as an OCI runtime bundle (config.json,
#                         rootfs/), for Slurm's own OCI support (srun --container)
#   $images/torch.sqsh    Debian 12 with python3 and Debian's python3-torch
#                         (1.13.1, CPU; the host's own, deploy/install-deps.sh)
#
# The PyTorch root file system is mmdebstrap's alone (85 s and 1.4 GB on a
# quiet machine, 2026-11-29; it was 1400 s at load 20 once, which is why
# it waited for a test that runs it).
#
# How: mmdebstrap makes each root file system from Debian's packages; the TF
# wheels are the ones deploy/python/wheels.sh keeps for the TF venv (not
# downloaded again); each root file system becomes a podman image (podman
# import, with the PATH an image config sets), and `enroot import
# podman://IMAGE` makes its squashfs file, as a site imports a local image
# for pyxis. Squashfs files are written uncompressed (enroot.conf of
# build-runtimes.sh): read at every container start, built once.
#
# The images carry nothing of tfslurm. The directory is
# $TFSLURM_IMAGE_CACHE (default /opt/tfslurm/images as root, else
# ${XDG_CACHE_HOME:-~/.cache}/tfslurm/images)/<key> (not TFSLURM_IMAGES,
# which names the <key> directory itself to the tests: evaluating
# tests/containers.sh twice must not build a copy inside it), the key a hash of the
# recipe below and the TF requirements; a second run that finds it complete costs a
# second. podman keeps its storage under that root too (CONTAINERS_STORAGE_CONF),
# never in /var/lib/containers.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd -- "$here/../.." && pwd)"
log() { printf 'build-images: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

requirements="$repo/deploy/python/requirements-tf.txt"
if [[ -n "${TFSLURM_IMAGE_CACHE:-}" ]]; then
  root="$TFSLURM_IMAGE_CACHE"
elif [[ $(id -u) -eq 0 ]]; then
  root=/opt/tfslurm/images
else
  root="${XDG_CACHE_HOME:-$HOME/.cache}/tfslurm/images"
fi
# What the images are made of; change it when a change of this script
# changes their content (a change of how they are built alone need not
# rebuild them: a half-built one resumes).
recipe="bookworm minbase; python3 | + TF requirements into /usr/local | python3-torch; PATH; CMD sh; v3"
key="$( (echo "$recipe"; cat "$requirements") | sha256sum | cut -c1-16)"
dir="$root/$key"
if [[ -f "$dir/.complete" ]]; then
  log "ready: $dir"
  echo "$dir"
  exit 0
fi
[[ $(id -u) -eq 0 ]] || die "must run as root (mmdebstrap and podman as root)"
enroot_prefix="$("$here/build-runtimes.sh" enroot)"
wheels="$("$repo/deploy/python/wheels.sh" tf "$requirements")"
for tool in mmdebstrap podman runc jq mksquashfs; do
  command -v "$tool" >/dev/null || die "$tool not found; run deploy/containers/install-deps.sh"
done

# A build that failed half-way resumes from its last finished stage (each
# leaves a .done-STAGE file in the work directory); a finished one removes it.
work="$root/.build-$key"
mkdir -p "$work"
podman_root="$root/podman"
cleanup() {
  podman rmi -f "localhost/tfslurm-test/python:$key" "localhost/tfslurm-test/tf:$key" \
    "localhost/tfslurm-test/torch:$key" >/dev/null 2>&1 || true
}
trap cleanup EXIT
stage() { [[ ! -f "$work/.done-$1" ]]; }
done_stage() {
  touch "$work/.done-$1"
  log "$1 ($((SECONDS - started)) s)"
}
export CONTAINERS_STORAGE_CONF="$work/storage.conf"
printf '[storage]\ndriver = "overlay"\ngraphroot = "%s/storage"\nrunroot = "%s/run"\n' \
  "$podman_root" "$podman_root" >"$CONTAINERS_STORAGE_CONF"
# enroot 4.1.2's podman:// import removes its scratch container with
# `docker rm` whatever the engine (the EXIT trap of docker::daemon::import,
# src/docker.sh), and on a machine without docker that trap's failure is
# the import's exit status (127) after the squashfs is written: a `docker`
# that is podman makes the cleanup work and the status true.
mkdir -p "$work/shim"
printf '#!/bin/sh\nexec podman "$@"\n' >"$work/shim/docker"
chmod +x "$work/shim/docker"
export PATH="$enroot_prefix/bin:$work/shim:$PATH"
started=$SECONDS

# The root file systems. minbase: dpkg, apt and a shell; python3 and nothing
# else, like a slim Python image.
debian=(mmdebstrap --quiet --variant=minbase --aptopt='Acquire::Retries "3"' bookworm)
if stage python; then
  rm -rf "$work/python"
  "${debian[@]}" --include=python3 "$work/python" >&2
  done_stage python
fi
if stage torch; then
  rm -rf "$work/torch"
  "${debian[@]}" --include=python3,python3-torch "$work/torch" >&2
  done_stage torch
fi
# pip of a throwaway venv of the host's Debian python3 (the same 3.11 as the
# image's), installing into the image's /usr/local like `pip install` in a
# Dockerfile; the image's python3 finds /usr/local/lib/python3.11/dist-packages.
if stage tf; then
  rm -rf "$work/tf" "$work/pip"
  cp -a "$work/python" "$work/tf"
  /usr/bin/python3 -m venv "$work/pip"
  "$work/pip/bin/python" -m pip install --quiet --disable-pip-version-check --no-input --no-index \
    --find-links "$wheels" --target "$work/tf/usr/local/lib/python3.11/dist-packages" -r "$requirements"
  rm -rf "$work/pip"
  done_stage tf
fi

path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
for image in python tf torch; do
  stage "$image.sqsh" || continue
  rm -f "$work/$image.sqsh"
  # A CMD, as every image has one: podman create (enroot import's first
  # step) refuses an image without.
  tar -C "$work/$image" --numeric-owner -cf - . |
    podman import --quiet --change "ENV PATH=$path" --change 'CMD ["/bin/sh"]' - \
      "localhost/tfslurm-test/$image:$key" >/dev/null
  enroot import --output "$work/$image.sqsh" "podman://localhost/tfslurm-test/$image:$key" >&2
  # The podman image was only the way in (as large as the squashfs file).
  podman rmi -f "localhost/tfslurm-test/$image:$key" >/dev/null
  done_stage "$image.sqsh"
done

# The OCI runtime bundle of the TF image: its root file system and the
# config.json of `runc spec`, made read-only and without a network namespace
# of its own (the tasks reach each other on the host's network, as under
# enroot). tfslurm writes its own config.json for each attempt from this one
# (docs/containers.md); Slurm runs it with oci.conf's runtime.
if stage tf.oci; then
  rm -rf "$work/tf.oci"
  mkdir "$work/tf.oci"
  (cd "$work/tf.oci" && runc spec)
  jq --arg path "PATH=$path" '
    .root.readonly = true | .process.terminal = false | .process.env = [$path, "TERM=xterm"]
    | .linux.namespaces |= map(select(.type != "network"))' \
    "$work/tf.oci/config.json" >"$work/tf.oci/config.json.new"
  mv "$work/tf.oci/config.json.new" "$work/tf.oci/config.json"
  mv "$work/tf" "$work/tf.oci/rootfs"
  done_stage tf.oci
fi

mkdir -p "$work/out"
mv "$work"/*.sqsh "$work/tf.oci" "$work/out/"
touch "$work/out/.complete"
chmod -R a+rX "$work/out"
rm -rf "$dir"
mv "$work/out" "$dir"
rm -rf "$work"
log "ready: $dir ($(du -sh "$dir" | cut -f1), $((SECONDS - started)) s)"
echo "$dir"
