"""The tfslurm package as it ships: the wheel tests/python.sh built
(TFSLURM_WHEEL), mypy --strict on its source, its version, and the wheel
installed into a clean venv beside TensorFlow and beside PyTorch, with
`pip check` after.

Beside TensorFlow: a new venv, empty, whose site-packages holds one .pth
line naming the site-packages of deploy/install-tf.sh's venv
(TFSLURM_TF_PYTHON): pip sees tensorflow-cpu 2.21 and its ~40 dependencies
as installed, installs the wheel into the new venv alone, and `pip check`
checks every requirement of all of them; the TF venv is not changed.

Beside PyTorch: a venv with Debian's site-packages, where python3-torch
1.13.1 is (the PyTorch the project runs; PyPI's default torch wheel pulls
about 2.5 GB of CUDA libraries). Debian's own packages carry a conflict of
their own (pygobject's metadata asks for pycairo, which Debian ships without
metadata), so `pip check` there must say nothing after the install that it
did not say before, and nothing of tfslurm.

In both, a real program uses the helper with the framework: TensorFlow's
cluster resolver from TF_CONFIG; torch.distributed's gloo process group
from tfslurm's variables.
"""

import glob
import json
import os
import re
import socket
import subprocess
import sys
import zipfile

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PACKAGE = os.path.join(REPO, "client", "python")
WHEEL = os.environ.get("TFSLURM_WHEEL", "")


def need_wheel():
    if not WHEEL:
        pytest.fail("TFSLURM_WHEEL is not set: run tests/python.sh, which builds the wheel first")
    return WHEEL


def run(args, env=None, **kwargs):
    # Never the unpacked wheel tests/python.sh puts on PYTHONPATH for the unit
    # tests: pip would take it for an installed tfslurm.
    env = {k: v for k, v in (env or os.environ).items() if k != "PYTHONPATH"}
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, **kwargs)
    return r.returncode, r.stdout


def test_the_wheel_holds_the_package_its_types_and_no_dependency():
    with zipfile.ZipFile(need_wheel()) as wheel:
        names = set(wheel.namelist())
        metadata = next(wheel.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    for module in ("__init__", "client", "task", "types", "errors", "connection", "spec", "progress",
                   "_http", "_munge", "_yaml", "_text", "_unsafe", "_frames", "_compare"):
        assert f"tfslurm/{module}.py" in names, module
    assert "tfslurm/py.typed" in names, "typed for mypy users (PEP 561)"
    assert "Requires-Python: >=3.10" in metadata
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert all("extra ==" in line for line in requires), f"every dependency is an extra's: {requires}"
    assert sorted(re.findall(r"Provides-Extra: (\w+)", metadata)) == ["pandas", "yaml"]


def test_mypy_strict_finds_nothing():
    rc, out = run([sys.executable, "-m", "mypy", "--strict", "--config-file", "pyproject.toml"], cwd=PACKAGE)
    assert rc == 0 and "Success: no issues found" in out, out


def test_its_version_is_tfslurms():
    cmake = open(os.path.join(REPO, "CMakeLists.txt")).read()
    version = re.search(r"project\(tfslurm VERSION ([0-9.]+)", cmake).group(1)
    pyproject = open(os.path.join(PACKAGE, "pyproject.toml")).read()
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == version
    init = open(os.path.join(PACKAGE, "src", "tfslurm", "__init__.py")).read()
    assert re.search(r'^__version__ = "([^"]+)"', init, re.M).group(1) == version
    assert os.path.basename(need_wheel()).startswith(f"tfslurm-{version}-py3-none-any")


def site_packages(python):
    rc, out = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    assert rc == 0, out
    return out.strip()


def make_venv(path, system_site=False):
    # Without a pip of its own (ensurepip costs 5-15 s): the tools' pip acts
    # on it (pip --python), running inside it, so it sees what the venv sees.
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip",
                    *(["--system-site-packages"] if system_site else []), str(path)], check=True)
    return str(path / "bin" / "python")


def pip(python, *args):
    return run([sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check", "--no-input",
                *args])


def install_wheel(python, extras=""):
    rc, out = pip(python, "install", "--no-index", "--find-links", os.path.dirname(need_wheel()),
                  f"tfslurm{extras}")
    assert rc == 0, out
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_installs_beside_tensorflow_with_pip_check_clean(tmp_path):
    tf_python = os.environ.get("TFSLURM_TF_PYTHON")
    if not tf_python:
        pytest.fail("TFSLURM_TF_PYTHON is not set: tests/python.sh sets it from deploy/install-tf.sh")
    python = make_venv(tmp_path / "venv")
    with open(os.path.join(site_packages(python), "tensorflow-venv.pth"), "w") as f:
        f.write(site_packages(tf_python) + "\n")
    rc, listed = pip(python, "list", "--format", "json")
    names = {re.sub(r"[-_.]+", "-", d["name"]).lower() for d in json.loads(listed)}
    assert "tensorflow-cpu" in names, f"pip sees TensorFlow beside: {sorted(names)}"
    install_wheel(python)
    rc, out = pip(python, "check")
    assert rc == 0 and out.strip() == "No broken requirements found.", out
    assert not glob.glob(os.path.join(site_packages(tf_python), "tfslurm*")), "the TF venv is left as it was"
    # A TensorFlow program using the helper: the resolver TF's strategies take.
    tf_config = {"cluster": {"chief": ["127.0.0.1:1111"], "worker": ["127.0.0.1:2222", "127.0.0.1:3333"]},
                 "task": {"type": "worker", "index": 1}}
    env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), EXPERIMENT_ID="x", TF_CPP_MIN_LOG_LEVEL="3")
    code = ("from tfslurm import task; t = task.init(); r = t.tf_cluster_resolver()\n"
            "print(t.role, t.index, t.is_chief, r.task_type, r.task_id, r.cluster_spec().as_dict()['worker'])")
    rc, out = run([python, "-c", code], env=env)
    assert rc == 0, out
    assert out.strip().splitlines()[-1] == "worker 1 False worker 1 ['127.0.0.1:2222', '127.0.0.1:3333']"


def pip_check_lines(python):
    _, out = pip(python, "check")
    return set(out.strip().splitlines()) - {"No broken requirements found."}


def test_installs_beside_debians_pytorch_adding_no_conflict(tmp_path):
    python = make_venv(tmp_path / "venv", system_site=True)
    rc, out = run([python, "-c", "import torch; print(torch.__version__)"])
    assert rc == 0, f"Debian's python3-torch is missing (deploy/install-deps.sh installs it): {out}"
    before = pip_check_lines(python)
    out = install_wheel(python, "[yaml]")  # PyYAML: Debian's python3-yaml satisfies it
    assert "Requirement already satisfied: PyYAML" in out or "Requirement already satisfied: pyyaml" in out, out
    after = pip_check_lines(python)
    assert after == before and not any("tfslurm" in line for line in after), (before, after)
    # A PyTorch program using the helper: a real gloo process group of one rank.
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), EXPERIMENT_ID="x")
    code = ("import torch, torch.distributed as dist\n"
            "from tfslurm import task\n"
            "t = task.init(); t.torch_process_group(timeout_s=60)\n"
            "x = torch.ones(2); dist.all_reduce(x)\n"
            "print(t.role, t.index, t.is_chief, dist.get_backend(), dist.get_world_size(), x.tolist())\n"
            "dist.destroy_process_group()")
    rc, out = run([python, "-c", code], env=env)
    assert rc == 0, out
    assert out.strip().splitlines()[-1] == "rank 0 True gloo 1 [1.0, 1.0]"
