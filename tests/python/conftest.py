"""The unit tests of the Python package (client/python). They import the
installed package when there is one (tests/python.sh installs the wheel it
built into a venv), else the source tree."""
import os
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
try:
    import tfslurm  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(REPO, "client", "python", "src"))
