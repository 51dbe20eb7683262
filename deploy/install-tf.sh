#!/usr/bin/env bash
# deploy/install-tf.sh: a Python virtual environment with the pinned
# TensorFlow of deploy/python/requirements-tf.txt (tensorflow-cpu from PyPI),
# for tfslurm's examples and real-TensorFlow tests. Prints the venv's python
# on stdout (one line); progress goes to stderr.
#
# Idempotent: the venv records the hash of the requirements it was made from;
# when that matches and TensorFlow imports, a second run costs one import
# (about 3 s). A changed requirements file rebuilds the venv from scratch.
#
#   deploy/install-tf.sh            venv at $TFSLURM_TF_VENV, by default
#                                   /opt/tfslurm/venv-tf as root, else
#                                   ${XDG_CACHE_HOME:-~/.cache}/tfslurm/venv-tf
#
# The venv lives outside the checkout so that every clone (CI's fresh one
# included) reuses it, and under /opt as root so that jobs run by other users
# can execute it. Debian's python3 makes it (python3-venv, installed by
# deploy/install-deps.sh); the machine's other pythons are not used, so the
# nodes need only Debian's.
set -euo pipefail

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$repo/deploy/python/requirements-tf.txt"
log() { printf 'install-tf: %s\n' "$*" >&2; }

if [[ -n "${TFSLURM_TF_VENV:-}" ]]; then
  venv="$TFSLURM_TF_VENV"
elif [[ $(id -u) -eq 0 ]]; then
  venv=/opt/tfslurm/venv-tf
else
  venv="${XDG_CACHE_HOME:-$HOME/.cache}/tfslurm/venv-tf"
fi
python="$venv/bin/python"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
stamp="$venv/.tfslurm-requirements.sha256"

ready() {
  [[ -x "$python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] &&
    TF_CPP_MIN_LOG_LEVEL=3 "$python" -c 'import tensorflow' >/dev/null 2>&1
}

if ready; then
  log "ready: $venv ($("$python" -c 'import importlib.metadata as m; print("tensorflow-cpu", m.version("tensorflow-cpu"))'))"
  echo "$python"
  exit 0
fi

[[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || {
  log "Debian's python3 with venv support is missing: run deploy/install-deps.sh (python3-venv)"
  exit 1
}
log "creating $venv from $requirements (about 1.6 GB; half a minute with a fast PyPI)"
rm -rf "$venv"
mkdir -p "$(dirname -- "$venv")"
/usr/bin/python3 -m venv "$venv"
"$python" -m pip install --quiet --disable-pip-version-check --no-input -r "$requirements"
TF_CPP_MIN_LOG_LEVEL=3 "$python" -c 'import tensorflow' || {
  log "TensorFlow was installed into $venv but does not import"
  exit 1
}
echo "$want" >"$stamp"
chmod -R a+rX "$venv"
log "ready: $venv"
echo "$python"
