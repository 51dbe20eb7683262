"""Issue 27: tfslurmd across Slurm releases. Run by tests/compat.sh VERSION
only, which gives it two builds and two clusters: TFSLURM_BUILD, tfslurmd
built against Slurm VERSION, with VERSION's cluster (slurm_cluster) and its
clients first on PATH; and TFSLURM_OTHER_BUILD, the main build against
Debian's Slurm 22.05, whose cluster (debian_cluster) this module starts.

- Each tfslurmd, pointed at the other's slurmctld, refuses at start naming
  both releases, and touches nothing (no database, no port).
- A database the 22.05 build wrote, with an ended and a running experiment,
  is served by the VERSION build: the ended one reads back as it was, and
  the running one reconciles. Its job was in the 22.05 cluster, which a
  VERSION slurmctld cannot take over (slurmctld reads the state files of
  its own release and the three before it, from 24.11: 22.05's are too
  old for 26.05 or 24.11, src/common/slurm_protocol_common.h), so its
  attempt ends as `unknown` and the restart runs in the VERSION cluster.
"""
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import REPO, Service, scontrol_job, wait_for

OTHER_BIN = os.path.join(os.environ.get("TFSLURM_OTHER_BUILD", os.path.join(REPO, "build")), "bin")
RELEASE = os.environ.get("TFSLURM_COMPAT_RELEASE", "")
DEBIAN_RELEASE = "22.05.8"


def debian_env():
    """The environment without the compat release's Slurm on PATH: Debian's
    clients, and start.sh without --slurm-prefix nor the compat release's
    pyxis (tests/compat.sh exports LOCAL_SLURM_CONTAINERS for its own cluster;
    a plugin built against another release does not load)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_SLURM_PREFIX", "LOCAL_SLURM_CONTAINERS")}
    env["PATH"] = ":".join(d for d in env["PATH"].split(":") if not d.startswith("/opt/tfslurm/slurm-")
                           and "/tfslurm/slurm-" not in d)
    return env


@pytest.fixture(scope="module")
def debian_cluster():
    assert RELEASE, "TFSLURM_COMPAT_RELEASE is not set: tests/compat.sh VERSION runs this module"
    d = tempfile.mkdtemp(prefix="tfs-deb-", dir="/tmp")
    os.chmod(d, 0o755)
    try:
        out = subprocess.run([os.path.join(REPO, "deploy/local-slurm/start.sh"), d], env=debian_env(),
                             stdout=subprocess.PIPE, check=True, text=True)
        yield out.stdout.strip().split("=", 1)[1]
    finally:
        subprocess.run([os.path.join(REPO, "deploy/local-slurm/stop.sh"), d], env=debian_env(), check=False)
        shutil.rmtree(d, ignore_errors=True)


def start_refused(bin_dir, slurm_conf, env):
    """Runs tfslurmd of `bin_dir` against `slurm_conf`; returns (exit code, output, workdir)."""
    workdir = tempfile.mkdtemp(prefix="tfsd-x-", dir="/tmp")
    proc = subprocess.run([os.path.join(bin_dir, "tfslurmd"), "--listen", "127.0.0.1:0", "--no-auth",
                           "--agent-listen", "127.0.0.1:0", "--db", os.path.join(workdir, "tfslurm.db"),
                           "--output-root", os.path.join(workdir, "out")]
                          + (["--allow-root"] if os.geteuid() == 0 else []),
                          env=dict(env, SLURM_CONF=slurm_conf), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=90)
    return proc.returncode, proc.stdout, workdir


def test_the_2205_tfslurmd_refuses_this_releases_slurmctld_naming_both(slurm_cluster):
    rc, out, workdir = start_refused(OTHER_BIN, slurm_cluster, os.environ)
    try:
        assert rc == 3, (rc, out)  # refused: the unit does not restart it (RestartPreventExitStatus)
        assert f"tfslurmd was built with libslurm {DEBIAN_RELEASE}, and slurmctld runs Slurm {RELEASE}" in out, out
        assert f"build tfslurmd against the cluster's own Slurm {RELEASE}" in out, out
        assert os.listdir(workdir) == [], "refused before it touched the database or the output root"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_this_releases_tfslurmd_refuses_the_2205_slurmctld_naming_both(debian_cluster):
    rc, out, workdir = start_refused(os.path.join(os.environ["TFSLURM_BUILD"], "bin"), debian_cluster,
                                     debian_env())
    try:
        assert rc == 3, (rc, out)
        assert (f"tfslurmd was built with libslurm {RELEASE}, a newer release than slurmctld's Slurm "
                f"{DEBIAN_RELEASE}") in out, out
        assert os.listdir(workdir) == []
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_database_of_the_2205_build_is_served_by_this_one(slurm_cluster, debian_cluster):
    workdir = tempfile.mkdtemp(prefix="tfsd-up-", dir="/tmp")
    old = Service(debian_cluster, workdir, bin_dir=OTHER_BIN, env=debian_env()).start()
    new = None
    try:
        ended = {"id": "up-ended", "command": ["/bin/sh", "-c", "echo ended"], "cluster": {"worker": 1},
                 "resources": {"partition": "debug"}}
        running = {"id": "up-running", "command": ["/bin/sh", "-c", "exec sleep 600"], "cluster": {"worker": 1},
                   "resources": {"partition": "debug"}, "restart": {"max_restarts": 1}}
        for spec in (ended, running):
            status, body = old.post("/experiments", spec)
            assert status == 201, body
        was_ended = old.wait_state("up-ended", "succeeded", timeout=120)
        was_running = wait_for(lambda: (lambda e: e if e["tasks"] and e["tasks"][0]["state"] == "running" else None)(
            old.experiment("up-running")), 120, "up-running's task to run")
        old_job = was_running["slurm_job_id"]
        old.stop()

        new = Service(slurm_cluster, workdir).start()
        log = open(new.log_path).read()
        assert f"libslurm {RELEASE}, slurmctld {RELEASE}" in log, log
        now_ended = new.experiment("up-ended")
        for key in ("state", "reason", "attempts", "tasks", "model_dir", "slurm_job_id"):
            assert now_ended[key] == was_ended[key], key
        assert [e["why"] for e in now_ended["events"]][:len(was_ended["events"])] == \
            [e["why"] for e in was_ended["events"]]

        # The running one: its job is not in this cluster, so attempt 1 ends
        # as unknown and attempt 2 runs here.
        restarted = wait_for(lambda: (lambda e: e if len(e["attempts"]) == 2 and e["tasks"] and
                                      e["tasks"][0]["state"] == "running" else None)(new.experiment("up-running")),
                             120, "up-running to run again in this cluster")
        first = restarted["attempts"][0]
        assert first["slurm_job_id"] == old_job and first["end_reason"] == "unknown", first
        job = scontrol_job(slurm_cluster, restarted["slurm_job_id"])
        assert job.get("JobState") == "RUNNING" and job.get("JobName") == "tfx-up-running-a2", job
        status, body = new.request("DELETE", "/experiments/up-running")
        assert status == 200, body
    finally:
        for s in (old, new):
            if s:
                s.stop()
        subprocess.run(["scancel", "--name", "tfx-up-running-a1"], env=dict(debian_env(), SLURM_CONF=debian_cluster),
                       check=False)
        shutil.rmtree(workdir, ignore_errors=True)
