#!/usr/bin/env bash
# tests/python.sh: the Python stage. Builds the tfslurm package's wheel
# (client/python) and runs, in one pytest session whose closing line counts
# every check (tests/lib/counts.sh's pytest_counts reads it):
#   - the unit tests of the package (tests/python/test_*.py), against the
#     wheel just built (unpacked onto PYTHONPATH), not the source tree;
#   - tests/python/test_package.py: the wheel's contents, mypy --strict on
#     the package, its version against CMakeLists.txt's, and the install
#     checks: the wheel into a clean venv beside tensorflow-cpu (the venv
#     deploy/install-tf.sh makes, reused, not copied) and beside PyTorch
#     (Debian's python3-torch, what the project runs), each with `pip check`.
#
# The tools (flit_core, mypy, pytest, PyYAML, pandas) come from
# deploy/install-pytools.sh's venv, cached outside the checkout and keyed by
# the hash of its pinned requirements; the TF venv likewise. Nothing is
# downloaded on a machine that has both; the wheel builds and installs with
# --no-index / --no-build-isolation.
#
#   tests/python.sh [PYTEST ARGS...]     e.g. -k install
#
# Exit status: pytest's. Output: pytest -v, then its closing line.
set -euo pipefail

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

tools=$(deploy/install-pytools.sh)
export TFSLURM_TF_PYTHON="${TFSLURM_TF_PYTHON:-$(deploy/install-tf.sh)}"

work=$(mktemp -d "${TMPDIR:-/tmp}/tfslurm-python.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "python: building the wheel of client/python" >&2
"$tools" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation \
  --wheel-dir "$work/dist" client/python >&2
wheel=$(ls "$work"/dist/tfslurm-*.whl)
"$tools" -m zipfile -e "$wheel" "$work/site"

# The unit tests import the wheel's files (tests/python/conftest.py takes
# the installed package when there is one); mypy's cache stays outside the
# checkout.
export TFSLURM_WHEEL="$wheel" PYTHONPATH="$work/site" PYTHONDONTWRITEBYTECODE=1
export MYPY_CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/tfslurm/mypy"
status=0
"$tools" -m pytest tests/python -v -rfEs -p no:cacheprovider "$@" || status=$?
exit $status
