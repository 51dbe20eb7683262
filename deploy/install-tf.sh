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
here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/python/pinned-venv.sh" tf "${TFSLURM_TF_VENV:-}" "$here/python/requirements-tf.txt" \
  tensorflow-cpu 'import tensorflow' 'about 1.6 GB; half a minute with a fast PyPI'
