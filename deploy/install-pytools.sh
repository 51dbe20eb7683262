#!/usr/bin/env bash
# deploy/install-pytools.sh: a Python virtual environment with the tools that
# build and check the tfslurm Python package (client/python): flit_core,
# mypy, pytest, PyYAML, pandas, pinned in deploy/python/requirements-pytools.txt.
# Prints the venv's python on stdout (one line); progress goes to stderr.
# tests/python.sh uses it.
#
# Idempotent and cached as install-tf.sh is (deploy/python/pinned-venv.sh):
# the venv records the hash of its requirements; a second run costs one
# import. /opt/tfslurm/venv-pytools as root, else
# ${XDG_CACHE_HOME:-~/.cache}/tfslurm/venv-pytools, or $TFSLURM_PYTOOLS_VENV.
set -euo pipefail
here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/python/pinned-venv.sh" pytools "${TFSLURM_PYTOOLS_VENV:-}" \
  "$here/python/requirements-pytools.txt" mypy 'import flit_core, mypy, pytest, yaml, pandas' \
  'about 270 MB; 20-40 s with a fast PyPI'
