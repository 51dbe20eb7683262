#!/usr/bin/env bash
# deploy/python/pinned-venv.sh: what deploy/install-tf.sh and install-jax.sh
# share: a Python virtual environment holding the pinned requirements of one
# framework, made once and reused. Prints the venv's python on stdout (one
# line); progress goes to stderr.
#
#   pinned-venv.sh NAME VENV REQUIREMENTS DISTRIBUTION CHECK SIZE
#     NAME          tf | jax: the venv is venv-NAME, the log lines install-NAME
#     VENV          where the venv goes; empty: /opt/tfslurm/venv-NAME as root,
#                   else ${XDG_CACHE_HOME:-~/.cache}/tfslurm/venv-NAME
#     REQUIREMENTS  the pinned requirements file
#     DISTRIBUTION  the package whose version the log line names
#     CHECK         Python code that must run in a good venv (an import)
#     SIZE          what a fresh venv costs, for the log line
#
# Idempotent: the venv records the hash of the requirements it was made from;
# when that matches and CHECK runs, a second run costs one CHECK. A changed
# requirements file rebuilds the venv from scratch. The venv lives outside the
# checkout so that every clone (CI's fresh one included) reuses it, and under
# /opt as root so that jobs run by other users can execute it. Debian's
# python3 makes it (python3-venv, installed by deploy/install-deps.sh); the
# machine's other pythons are not used, so the nodes need only Debian's.
set -euo pipefail

name="$1" venv="$2" requirements="$3" distribution="$4" check="$5" size="$6"
log() { printf 'install-%s: %s\n' "$name" "$*" >&2; }

if [[ -z "$venv" ]]; then
  if [[ $(id -u) -eq 0 ]]; then
    venv=/opt/tfslurm/venv-$name
  else
    venv="${XDG_CACHE_HOME:-$HOME/.cache}/tfslurm/venv-$name"
  fi
fi
python="$venv/bin/python"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
stamp="$venv/.tfslurm-requirements.sha256"
# Quiet TensorFlow's start-up lines; JAX on the CPU, as the tests run it.
run_check() { TF_CPP_MIN_LOG_LEVEL=3 JAX_PLATFORMS=cpu "$python" -c "$check"; }

if [[ -x "$python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && run_check >/dev/null 2>&1; then
  log "ready: $venv ($distribution $("$python" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$distribution"))"
  echo "$python"
  exit 0
fi

[[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || {
  log "Debian's python3 with venv support is missing: run deploy/install-deps.sh (python3-venv)"
  exit 1
}
log "creating $venv from $requirements ($size)"
started=$SECONDS
rm -rf "$venv"
mkdir -p "$(dirname -- "$venv")"
/usr/bin/python3 -m venv "$venv"
# From wheels kept outside the checkout (wheels.sh): the TensorFlow container
# image installs the same files, so a fresh machine downloads them once.
wheels="$("$(dirname -- "${BASH_SOURCE[0]}")/wheels.sh" "$name" "$requirements")"
"$python" -m pip install --quiet --disable-pip-version-check --no-input --no-index \
  --find-links "$wheels" -r "$requirements"
run_check || {
  log "$distribution was installed into $venv but does not import"
  exit 1
}
echo "$want" >"$stamp"
chmod -R a+rX "$venv"
log "ready: $venv ($((SECONDS - started)) s)"
echo "$python"
