#!/usr/bin/env bash
# deploy/install-jax.sh: a Python virtual environment with the pinned JAX of
# deploy/python/requirements-jax.txt (jax[cpu] from PyPI), for tfslurm's JAX
# example (examples/jax) and its tests. Prints the venv's python on stdout
# (one line); progress goes to stderr.
#
# Idempotent, as deploy/install-tf.sh: the venv records the hash of the
# requirements it was made from; when that matches and jax imports, a second
# run costs one import (about 1 s). A changed requirements file rebuilds the
# venv from scratch (30 s and 620 MB here with an empty pip cache).
#
#   deploy/install-jax.sh           venv at $TFSLURM_JAX_VENV, by default
#                                   /opt/tfslurm/venv-jax as root, else
#                                   ${XDG_CACHE_HOME:-~/.cache}/tfslurm/venv-jax
#
# Outside the checkout so that every clone (CI's fresh one included) reuses
# it, and under /opt as root so that jobs run by other users can execute it.
# A site with its own JAX needs none of this: the job's command names that
# python (README.md, "JAX").
set -euo pipefail

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$repo/deploy/python/requirements-jax.txt"
log() { printf 'install-jax: %s\n' "$*" >&2; }

if [[ -n "${TFSLURM_JAX_VENV:-}" ]]; then
  venv="$TFSLURM_JAX_VENV"
elif [[ $(id -u) -eq 0 ]]; then
  venv=/opt/tfslurm/venv-jax
else
  venv="${XDG_CACHE_HOME:-$HOME/.cache}/tfslurm/venv-jax"
fi
python="$venv/bin/python"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
stamp="$venv/.tfslurm-requirements.sha256"

ready() {
  [[ -x "$python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] &&
    "$python" -c 'import jax' >/dev/null 2>&1
}

if ready; then
  log "ready: $venv (jax $("$python" -c 'import importlib.metadata as m; print(m.version("jax"))'))"
  echo "$python"
  exit 0
fi

[[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || {
  log "Debian's python3 with venv support is missing: run deploy/install-deps.sh (python3-venv)"
  exit 1
}
log "creating $venv from $requirements (about 620 MB)"
started=$SECONDS
rm -rf "$venv"
mkdir -p "$(dirname -- "$venv")"
/usr/bin/python3 -m venv "$venv"
"$python" -m pip install --quiet --disable-pip-version-check --no-input -r "$requirements"
JAX_PLATFORMS=cpu "$python" -c 'import jax; jax.devices()' || {
  log "JAX was installed into $venv but does not import"
  exit 1
}
echo "$want" >"$stamp"
chmod -R a+rX "$venv"
log "ready: $venv ($((SECONDS - started)) s)"
echo "$python"
