"""Issue 27: tfslurmd knows which Slurm it is built with and which it talks
to. Run against every cluster the suite runs: Debian's 22.05 in
tests/run.sh, and each release tests/compat.sh builds (where the Slurm
clients on PATH and the cluster are that release's, and tfslurmd is built
against it). The release expected is what the cluster's own slurmctld says
of itself (`slurmctld -V`)."""
import os
import re
import subprocess

from conftest import BIN, slurm_env


def cluster_release():
    out = subprocess.run(["slurmctld", "-V"], stdout=subprocess.PIPE, text=True, check=True).stdout
    m = re.fullmatch(r"slurm(?:-wlm)? (\d+\.\d+\.\d+)\s*", out)  # Debian's says slurm-wlm
    assert m, out
    return m.group(1)


def test_tfslurmd_names_its_libslurm_and_slurmctlds_release(service_factory, slurm_cluster):
    release = cluster_release()
    out = subprocess.run([os.path.join(BIN, "tfslurmd"), "--version"], env=slurm_env(slurm_cluster),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert out.returncode == 0, out
    lines = out.stdout.splitlines()
    assert re.fullmatch(r"tfslurmd \d+\.\d+\.\d+ \(commit [0-9a-f]{12}(-dirty)?\)", lines[0]), lines
    assert lines[1:] == [f"libslurm {release}", f"slurmctld {release}"], lines

    service = service_factory()
    log = open(service.log_path).read()
    assert f"libslurm {release}, slurmctld {release}" in log, log
    status, body = service.get("/version")
    assert status == 200, body
    assert body["slurm"] == {"libslurm": release, "slurmctld": release}, body
    assert re.fullmatch(r"[0-9a-f]{12}(-dirty)?", body["tfslurm"]["commit"]), body


def test_tfslurmd_loads_its_own_releases_libslurm_and_the_agent_and_tfctl_none(slurm_cluster):
    """The agent and tfctl link no libslurm, so one build of them serves
    every release; tfslurmd's libslurm is the one of the Slurm it was built
    against, the cluster's (its soname carries the release's API)."""
    slurmctld = subprocess.run(["sh", "-c", "command -v slurmctld"], stdout=subprocess.PIPE, text=True,
                               check=True).stdout.strip()
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(slurmctld)))
    tfslurmd = subprocess.run(["ldd", os.path.join(BIN, "tfslurmd")], stdout=subprocess.PIPE, text=True,
                              check=True).stdout
    line = next((l for l in tfslurmd.splitlines() if "libslurm" in l), "")
    assert line, tfslurmd
    if prefix == "/usr":
        assert "=> /lib/" in line or "=> /usr/lib/" in line, line
    else:
        assert f"=> {prefix}/lib/libslurm" in line, (line, prefix)
    for program in ("tfslurm-agent", "tfctl"):
        out = subprocess.run(["ldd", os.path.join(BIN, program)], stdout=subprocess.PIPE, text=True,
                             check=True).stdout
        assert "libslurm" not in out, (program, out)


def test_version_needs_a_token_like_every_route_but_healthz(service_factory):
    service = service_factory(auth=True)
    status, body = service.get("/version")
    assert status == 401, body
    assert service.get("/healthz")[0] == 200
