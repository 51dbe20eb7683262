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
here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/python/pinned-venv.sh" jax "${TFSLURM_JAX_VENV:-}" "$here/python/requirements-jax.txt" \
  jax 'import jax; jax.devices()' 'about 620 MB; 30 s here with an empty pip cache'
