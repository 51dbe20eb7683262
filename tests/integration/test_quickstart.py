"""deploy/quickstart.sh, the README's first command, run as it is: it
builds, starts a local cluster of its own and tfslurmd, runs
examples/linear_ps to the end and prints where to look; --stop stops
what it started. Here in a directory and on ports of its own."""
import os
import re
import shutil
import subprocess
import tempfile

from conftest import REPO, wait_for
from helpers.ports import unused_port

QUICKSTART = os.path.join(REPO, "deploy/quickstart.sh")


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] == "Z"
    except FileNotFoundError:
        return True


def test_quickstart_runs_its_example_to_success_and_stop_stops_what_it_started():
    d = tempfile.mkdtemp(prefix="tfs-qs-", dir="/tmp")
    os.chmod(d, 0o755)  # munged, as user munge, must reach its socket dir
    env = dict(os.environ, TFSLURM_QUICKSTART_DIR=d, TFSLURM_PORT=str(unused_port()),
               TFSLURM_AGENT_PORT=str(unused_port()))
    env.pop("SLURM_CONF", None)  # its own cluster, not the session's
    try:
        r = subprocess.run([QUICKSTART], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stdout[-4000:]
        assert re.search(r"==> done: linear-ps-quickstart-\S+ succeeded", r.stdout), r.stdout[-4000:]
        assert "dashboard         http://127.0.0.1:" + env["TFSLURM_PORT"] + "/" in r.stdout, r.stdout[-2000:]
        pid = int(open(os.path.join(d, "tfslurmd.pid")).read())
        os.kill(pid, 0)  # left running for the reader, as the README says
        stop = subprocess.run([QUICKSTART, "--stop"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=120)
        assert stop.returncode == 0 and "stopped; state is kept in " + d in stop.stdout, stop.stdout
        wait_for(lambda: gone(pid), 30, f"tfslurmd {pid} to end on the SIGTERM --stop sends")
    finally:
        subprocess.run([QUICKSTART, "--stop"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=120)
        shutil.rmtree(d, ignore_errors=True)
