"""One's own program the first time (issue 30): tfctl submit runs it where
tfctl was run from, and when it fails, status, list and logs say why without
opening the task logs by hand."""
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import REPO, Service, cluster_start_args, wait_for
from helpers.images import container_images
from helpers.oci_support import oci_refused_here, slurmctld_release
from unix_users import ALICE, site  # noqa: F401
from unix_users import ok as site_ok
from unix_users import tfctl as site_tfctl
from test_tfctl import TFCTL, home, ok, program_output, run_tfctl, table_after, tfctl_env  # noqa: F401

TRAIN = """import os, sys
print("trained in", os.getcwd(), "as", os.environ["TFSLURM_ROLE"], os.environ["TFSLURM_INDEX"])
"""


def run_in(cwd, home, *args, url):
    return subprocess.run([TFCTL, *args], env=tfctl_env(home, url), cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=180)


def project(tmp_path):
    proj = tmp_path / "myproj"
    proj.mkdir()
    (proj / "train.py").write_text(TRAIN)
    os.chmod(tmp_path, 0o755)
    return proj


def test_submit_runs_a_relative_script_in_the_directory_tfctl_runs_in(service, home, tmp_path):
    proj = project(tmp_path)
    out = ok(run_in(proj, home, "submit", "--id", "own-1", "--workers", "2", "--partition", "debug",
                    "--time", "00:10:00", "--wait", "--", "python3", "train.py", url=service.url))
    assert out.rstrip().splitlines()[-1].startswith("own-1 succeeded"), out
    e = json.loads(ok(run_tfctl(home, "status", "own-1", "-o", "json", url=service.url)))
    assert e["spec"]["workdir"] == str(proj)
    logs = ok(run_tfctl(home, "logs", "own-1", "--task", "worker:1", url=service.url))
    assert program_output(logs) == f"trained in {proj} as worker 1\n"


def test_workdir_flag_is_taken_relative_to_where_tfctl_runs(service, home, tmp_path):
    proj = project(tmp_path)
    out = ok(run_in(tmp_path, home, "submit", "--id", "own-2", "--workers", "1", "--partition", "debug",
                    "--time", "00:10:00", "--workdir", "myproj", "--wait", "--", "python3", "train.py",
                    url=service.url))
    assert out.rstrip().splitlines()[-1].startswith("own-2 succeeded"), out
    logs = ok(run_tfctl(home, "logs", "own-2", "--task", "worker:0", url=service.url))
    assert program_output(logs) == f"trained in {proj} as worker 0\n"


def test_a_directory_as_the_spec_and_a_missing_workdir_are_explained(service, home, tmp_path):
    proj = project(tmp_path)
    r = run_tfctl(home, "submit", str(proj), url=service.url)
    assert r.returncode == 2, r
    assert f"'{proj}' is a directory, not a spec file" in r.stderr and "--workdir" in r.stderr, r.stderr
    assert "File is actually a directory" not in r.stderr

    missing = str(tmp_path / "gone")
    r = run_tfctl(home, "submit", "--id", "own-3", "--workers", "1", "--partition", "debug",
                  "--workdir", missing, "--", "python3", "train.py", url=service.url)
    assert r.returncode == 1, r
    assert re.search(r"^  workdir: must be a directory \S+ may enter, got '" + re.escape(missing) +
                     "': No such file or directory$", r.stderr, re.M), r.stderr
    r = run_tfctl(home, "status", "own-3", url=service.url)
    assert r.returncode == 1, "a refused submission leaves nothing behind"


def test_a_program_that_cannot_start_says_why_in_status_list_and_logs(service, home, tmp_path):
    proj = project(tmp_path)
    cause = "cannot run 'trian.py': No such file or directory"
    r = run_in(proj, home, "submit", "--id", "own-typo", "--workers", "2", "--partition", "debug",
               "--time", "00:10:00", "--wait", "--", "trian.py", url=service.url)
    assert r.returncode == 1, r
    last = r.stdout.rstrip().splitlines()[-1]
    assert last.startswith("own-typo failed") and "exited with code 127: " + cause in last, last

    e = json.loads(ok(run_tfctl(home, "status", "own-typo", "-o", "json", url=service.url)))
    assert cause in e["reason"], e["reason"]
    assert cause in e["attempts"][0]["reason"], e["attempts"][0]
    failed = [t for t in e["tasks"] if t["state"] == "failed"]
    assert failed and all(t["detail"].startswith(cause) for t in failed), e["tasks"]
    table = ok(run_tfctl(home, "status", "own-typo", url=service.url))
    assert re.search(r"^worker:\d: " + re.escape(cause), table, re.M), table

    listed = ok(run_tfctl(home, "list", url=service.url))
    row = next(line for line in listed.splitlines() if line.startswith("own-typo "))
    assert "exited with code 127: " + cause in row, listed

    r = run_tfctl(home, "logs", "own-typo", url=service.url)
    assert r.returncode == 0, r
    task = failed[0]
    assert re.match(r"tfctl: the log of worker:\d, which failed \(exit code 127\)", r.stderr), r.stderr
    assert cause in r.stdout, "the failed task's log, with its agent's line: " + r.stdout
    # It would fail the same way again: not retried, and classed so.
    assert [a["end_reason"] for a in e["attempts"]] == ["startup_error"], e["attempts"]
    assert "startup_error is not in restart.on" in e["reason"], e["reason"]


def test_a_python_programs_own_error_line_is_the_cause(service, home, tmp_path):
    proj = project(tmp_path)
    (proj / "imports.py").write_text("print('starting')\nimport tensorflowx\n")
    (proj / "broken.py").write_text("print('never runs')\ndef f(\n")
    # Trains (its scalars reach the service) and then fails on an import:
    # training had begun, so it is not a start-up failure.
    (proj / "late.py").write_text(
        "import json, os, time\n"
        "with open(os.environ['TFSLURM_SCALARS_FILE'], 'a') as f:\n"
        "    for step in (1, 2, 3):\n"
        "        f.write(json.dumps({'step': step, 'loss': 1.0 / step}) + '\\n')\n"
        "        f.flush()\n"
        "        time.sleep(0.5)\n"
        "import tensorflowx\n")
    for exp_id, script, cause, end_reason in (
            ("own-py-typo", "trian.py", f"can't open file '{proj}/trian.py': [Errno 2] No such file or directory",
             "startup_error"),
            ("own-py-module", "imports.py", "ModuleNotFoundError: No module named 'tensorflowx'", "startup_error"),
            ("own-py-syntax", "broken.py", "SyntaxError: '(' was never closed", "startup_error"),
            ("own-py-late", "late.py", "ModuleNotFoundError: No module named 'tensorflowx'", "permanent_exit")):
        r = run_in(proj, home, "submit", "--id", exp_id, "--workers", "1", "--partition", "debug",
                   "--time", "00:10:00", "--wait", "--", "python3", script, url=service.url)
        assert r.returncode == 1, r
        last = r.stdout.rstrip().splitlines()[-1]
        assert re.search(r"exited with code \d+: \S*python3: " + re.escape(cause) if script == "trian.py"
                         else r"exited with code 1: " + re.escape(cause), last), last
        e = json.loads(ok(run_tfctl(home, "status", exp_id, "-o", "json", url=service.url)))
        detail = e["tasks"][0]["detail"]
        if "ModuleNotFoundError" in cause:
            # Which python did not have the module (issue 48): the file the
            # process ran (through a venv's symlink or a pyenv shim, the
            # interpreter itself), and the `python3` the job's PATH found.
            python = subprocess.run(["python3", "-c", "import os, sys; print(os.path.realpath(sys.executable))"],
                                    stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
            assert detail.startswith(f"{cause} (the Python that ran: {python}"), detail
            if shutil.which("python3") != python:
                assert detail.endswith(f", started as {shutil.which('python3')})"), detail
        else:
            assert detail.endswith(cause), e["tasks"]
        assert [a["end_reason"] for a in e["attempts"]] == [end_reason], (exp_id, e["attempts"])


def test_a_startup_error_is_restarted_when_restart_on_names_it(service, home, tmp_path):
    proj = project(tmp_path)
    (proj / "imports.py").write_text("import tensorflowx\n")
    spec = {"id": "own-py-retry", "command": ["python3", "imports.py"], "workdir": str(proj),
            "cluster": {"worker": 1}, "resources": {"partition": "debug", "time_limit": "00:10:00"},
            "restart": {"max_restarts": 1, "on": ["startup_error"], "backoff_s": 0}}
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    e = service.wait_state("own-py-retry", "failed")
    assert [a["end_reason"] for a in e["attempts"]] == ["startup_error", "startup_error"], e["attempts"]
    assert "max_restarts 1 reached" in e["reason"], e["reason"]


def test_logs_without_a_task_show_the_failed_tasks_output(service, home, tmp_path):
    proj = project(tmp_path)
    (proj / "train.py").write_text("import os, sys\n"
                                   "if os.environ['TFSLURM_INDEX'] == '1':\n"
                                   "    sys.exit('worker 1 gives up: no data')\n")
    r = run_in(proj, home, "submit", "--id", "own-logs", "--workers", "2", "--partition", "debug",
               "--time", "00:10:00", "--wait", "--", "python3", "train.py", url=service.url)
    assert r.returncode == 1, r
    r = run_tfctl(home, "logs", "own-logs", url=service.url)
    assert r.returncode == 0, r
    assert r.stderr.startswith("tfctl: the log of worker:1, which failed (exit code 1)"), r.stderr
    assert "worker 1 gives up: no data\n" in program_output(r.stdout), r.stdout

    # No task failed: every task's log, each line after its task.
    ok(run_in(proj, home, "submit", "--id", "own-logs-ok", "--workers", "2", "--partition", "debug",
              "--time", "00:10:00", "--wait", "--", "python3", "-c",
              "import os; print('fine from', os.environ['TFSLURM_INDEX'])", url=service.url))
    r = run_tfctl(home, "logs", "own-logs-ok", url=service.url)
    assert r.returncode == 0, r
    assert r.stderr.startswith("tfctl: every task's log, each line after its task (no task failed)"), r.stderr
    lines = r.stdout.splitlines()
    assert lines and all(line.startswith(("worker:0 | ", "worker:1 | ")) for line in lines), r.stdout
    programs = [line for line in lines if " | [tfslurm-agent " not in line]
    assert programs == ["worker:0 | fine from 0", "worker:1 | fine from 1"], r.stdout
    # -f over an attempt that has ended: the same, once.
    followed = run_tfctl(home, "logs", "-f", "own-logs-ok", url=service.url)
    assert followed.returncode == 0 and followed.stdout == r.stdout, (followed, r.stdout)
    r = run_tfctl(home, "logs", "own-logs-ok", "--task", "batch", url=service.url)
    assert r.returncode == 0 and "fine" not in r.stdout, r


def test_a_mistyped_subcommand_is_named_with_the_nearest_and_version_is_answered(home):
    r = run_tfctl(home, "stauts", "hello")
    assert r.returncode == 2, r
    assert r.stderr.startswith("tfctl: unknown subcommand 'stauts'; did you mean 'status'?\n"), r.stderr
    r = run_tfctl(home, "--url", "http://127.0.0.1:1", "lgos", "x")
    assert r.returncode == 2 and "did you mean 'logs'?" in r.stderr, r
    r = run_tfctl(home, "--version")
    assert r.returncode == 0, r
    assert re.fullmatch(r"tfctl \d+\.\d+\.\d+ \(commit [0-9a-f]+(-dirty)?\)\n|tfctl \S+ \(commit unknown\)\n",
                        r.stdout), r.stdout


def test_metrics_of_a_tag_it_does_not_have_names_the_tags_it_has(service, home, tmp_path):
    program = ("import json, os\n"
               "p = os.environ.get('TFSLURM_SCALARS_FILE')\n"
               "if p:\n"
               "    with open(p, 'a') as f:\n"
               "        for s in range(3): f.write(json.dumps({'step': s, 'loss': 1.0 / (s + 1), 'lr': 0.1}) + '\\n')\n"
               "    import time; time.sleep(3)\n")
    ok(run_tfctl(home, "submit", "--id", "own-tags", "--workers", "1", "--partition", "debug",
                 "--time", "00:10:00", "--wait", "--", "python3", "-c", program, url=service.url))
    wait_for(lambda: "loss" in run_tfctl(home, "metrics", "own-tags", url=service.url).stdout, 30, "the loss tag")
    r = run_tfctl(home, "metrics", "own-tags", "--tag", "los", url=service.url)
    assert r.returncode == 1, r
    assert "own-tags has no training scalars of tag 'los'; did you mean 'loss'?" in r.stderr, r.stderr
    assert "its tags: " in r.stderr and "loss" in r.stderr and "lr" in r.stderr, r.stderr
    assert "No training scalars yet" not in r.stdout, r.stdout
    r = run_tfctl(home, "metrics", "own-tags", "--tag", "loss", url=service.url)
    assert r.returncode == 0 and re.search(r"^loss\s+2\s", r.stdout, re.M), r


def test_site_mode_checks_the_workdir_as_the_owner(site, tmp_path):
    service, _, homes = site
    # Root's own directory: root could enter it, alice cannot.
    private = tempfile.mkdtemp(prefix="root-only-", dir="/tmp")
    os.chmod(private, 0o700)
    try:
        r = site_tfctl(site, ALICE, "submit", "--id", "site-wd-1", "--workers", "1", "--partition", "debug",
                       "--workdir", private, "--", "/bin/true")
        assert r.returncode == 1, r
        assert (f"  workdir: must be a directory {ALICE} may enter, got '{private}': "
                f"Permission denied for {ALICE}") in r.stderr, r.stderr
    finally:
        os.rmdir(private)
    # Without --workdir: where alice runs tfctl (her home), which she may enter.
    out = site_ok(site_tfctl(site, ALICE, "submit", "--id", "site-wd-2", "--workers", "1",
                             "--partition", "debug", "--wait", "--", "/bin/sh", "-c", "pwd"))
    assert "site-wd-2 succeeded" in out, out
    logs = site_ok(site_tfctl(site, ALICE, "logs", "site-wd-2", "--task", "worker:0"))
    assert program_output(logs) == homes[ALICE] + "\n", logs


def test_a_queued_experiment_says_why_slurm_keeps_it_waiting(service, home, tmp_path):
    # Every node's whole memory (8000 MB on the local cluster), so that the
    # next job cannot start.
    busy = {"id": "own-busy", "command": ["sleep", "300"], "cluster": {"worker": 3},
            "resources": {"partition": "debug", "nodes": 3, "tasks_per_node": 1, "time_limit": "00:10:00",
                          "mem_per_task_mb": 8000}}
    spec = tmp_path / "busy.json"
    spec.write_text(json.dumps(busy))
    ok(run_tfctl(home, "submit", str(spec), url=service.url))
    wait_for(lambda: json.loads(ok(run_tfctl(home, "status", "own-busy", "-o", "json", url=service.url)))
             ["slurm_state"] == "RUNNING", 60, "own-busy to hold every node")
    ok(run_tfctl(home, "submit", "--id", "own-queued", "--workers", "1", "--partition", "debug",
                 "--time", "00:10:00", "--", "true", url=service.url))
    try:
        # Until slurmctld's scheduler has looked at the job its reason is
        # None ("not scheduled yet"); then Resources, as every node is busy.
        reason = wait_for(lambda: (lambda e: e["reason"] if e["state"] == "queued" and "pending in Slurm" in e["reason"]
                                   and "not scheduled yet" not in e["reason"] else None)(
            json.loads(ok(run_tfctl(home, "status", "own-queued", "-o", "json", url=service.url)))),
            60, "Slurm's reason")
        assert re.fullmatch(r"pending in Slurm as job \d+: (Resources|Priority)", reason), reason
        table = ok(run_tfctl(home, "status", "own-queued", url=service.url))
        assert re.search(r"^state\s+queued: pending in Slurm as job \d+: (Resources|Priority)$", table, re.M), table
        listed = ok(run_tfctl(home, "list", url=service.url))
        row = next(line for line in listed.splitlines() if line.startswith("own-queued "))
        assert re.search(r"pending in Slurm as job \d+: (Resources|Priority)$", row), listed
    finally:
        run_tfctl(home, "cancel", "own-queued", url=service.url)
        run_tfctl(home, "cancel", "own-busy", url=service.url)
        service.wait_state("own-queued", "cancelled")
        service.wait_state("own-busy", "cancelled")


def cgroup_v1_memory():
    return os.path.isdir("/sys/fs/cgroup/memory") and os.path.ismount("/sys/fs/cgroup/memory")


@pytest.fixture(scope="module")  # started once for the OOM test's runtimes
def memory_cluster(slurm_cluster):  # on the session's service host, its hosts apart like it
    """A local cluster of its own whose jobs get their memory as a cgroup
    limit (LOCAL_SLURM_CONSTRAIN_MEMORY=1: task/cgroup, ConstrainRAMSpace),
    as on a site's cluster; the shared one enforces none."""
    if not cgroup_v1_memory():
        pytest.skip("no cgroup v1 memory controller at /sys/fs/cgroup/memory: task/cgroup cannot "
                    "constrain memory here")
    d = tempfile.mkdtemp(prefix="tfs-mem-", dir="/tmp")
    os.chmod(d, 0o755)  # munged, as user munge, must reach its socket dir
    try:
        # The session's Slurm, whatever LOCAL_SLURM_PREFIX says: its DIR
        # remembers it (etc/slurm-prefix; "" is Debian's), and under
        # tests/compat.sh that is the release under test, whose OCI support
        # the [oci] case needs. With pyxis and oci.conf when the session has
        # them (tests/containers.sh), as the session's cluster: the OOM test
        # runs in a container too.
        prefix_file = os.path.join(os.path.dirname(slurm_cluster), "slurm-prefix")
        prefix = open(prefix_file).read().strip() if os.path.exists(prefix_file) else None
        containers = os.environ.get("LOCAL_SLURM_CONTAINERS")
        start_args = cluster_start_args(*(["--slurm-prefix", prefix] if prefix is not None else []),
                                        *(["--containers", containers] if containers else []))
        out = subprocess.run([os.path.join(REPO, "deploy/local-slurm/start.sh")] + start_args + [d],
                             stdout=subprocess.PIPE,
                             check=True, text=True, env=dict(os.environ, LOCAL_SLURM_CONSTRAIN_MEMORY="1"))
        yield out.stdout.strip().split("=", 1)[1]
    finally:
        subprocess.run([os.path.join(REPO, "deploy/local-slurm/stop.sh"), d], check=False)
        shutil.rmtree(d, ignore_errors=True)


OOM_IMAGE = {"pyxis": "python.sqsh", "enroot": "python.sqsh", "oci": "tf.oci"}


@pytest.mark.images  # all four: its cluster is started once (helpers/images.py)
@pytest.mark.parametrize("runtime", ["none", "pyxis", "enroot", "oci"])
def test_an_oom_kill_names_the_memory_and_the_field_to_raise(memory_cluster, home, tmp_path, monkeypatch,
                                                             runtime):
    """On the host, and in the image (issue 44): under pyxis the agent is in
    the task's cgroup namespace and finds the task's cgroup below the step's
    that enroot mounts (agent/memory_cgroup.h); under enroot the agent is on
    the host, and its program in enroot's container in the same cgroup.
    Under Slurm's OCI support (rootless runc, no cgroup namespace, the
    host's /sys) the agent reads the cgroup /proc/self/cgroup names in the
    host's hierarchy: runc's own below the task's when runc runs as root,
    the task's itself when it runs as the user (docs/containers.md). On
    Slurm 22.05 runtime oci is refused (helpers/oci_support.py); it runs for
    real on 26.05.3 (tests/compat.sh)."""
    containers = os.environ.get("LOCAL_SLURM_CONTAINERS")
    if runtime != "none" and not containers:
        pytest.fail("no container runtimes: eval \"$(tests/containers.sh)\" first")
    images = container_images() if runtime != "none" else None
    if runtime == "enroot":  # on the jobs' PATH (tfslurmd gives them its own), as test_containers.py does
        monkeypatch.setenv("PATH", os.path.join(containers, "bin") + ":" + os.environ["PATH"])
    workdir = tempfile.mkdtemp(prefix="tfsd-", dir="/tmp")
    service = Service(memory_cluster, workdir).start()
    try:
        proj = project(tmp_path)
        # 300 MB per task, and a program that fills 1 GiB, saying first
        # which memory cgroup it is in.
        (proj / "hog.py").write_text(
            "import re\nprint('memory cgroup:', *re.findall(r':memory:(.*)', open('/proc/self/cgroup').read()))\n"
            "print('allocating', flush=True)\nx = bytearray(1 << 30)\nprint('done')\n")
        spec = {"id": "own-oom", "command": ["python3", "hog.py"], "cluster": {"worker": 1},
                "resources": {"partition": "debug", "time_limit": "00:10:00", "mem_per_task_mb": 300},
                "restart": {"max_restarts": 0}}
        if runtime != "none":
            spec["container"] = {"image": os.path.join(images, OOM_IMAGE[runtime]), "runtime": runtime}
        if runtime == "oci" and slurmctld_release(service) < (23, 2):
            assert oci_refused_here(service, spec, *service.post("/experiments", spec))
            return
        (proj / "oom.json").write_text(json.dumps(spec))
        r = run_in(proj, home, "submit", "oom.json", "--wait", url=service.url)
        assert r.returncode == 1, r
        cause = "out of memory: the job has 300 MB on this node (OOM killer); raise resources.mem_per_task_mb"
        last = r.stdout.rstrip().splitlines()[-1]
        assert "worker:0 (task 0 on node1) was killed by signal 9: " + cause in last, last
        e = json.loads(ok(run_tfctl(home, "status", "own-oom", "-o", "json", url=service.url)))
        assert e["mem_per_task_mb"] == 300, e["mem_per_task_mb"]
        assert e["tasks"][0]["signal"] == 9 and e["tasks"][0]["detail"] == cause, e["tasks"]
        table = ok(run_tfctl(home, "status", "own-oom", url=service.url))
        assert re.search(r"^worker:0: " + re.escape(cause), table, re.M), table
        listed = ok(run_tfctl(home, "list", url=service.url))
        row = next(line for line in listed.splitlines() if line.startswith("own-oom "))
        # The list's reason is cut at 140 bytes: the cause and the memory show.
        assert "was killed by signal 9: out of memory: the job has 300 MB on this node" in row, listed
        if runtime == "oci":
            # What makes OCI differ: runc (as root, as here) put the program
            # in a cgroup of its own (the container's id, %n.%u.%j.%s.%t in
            # oci.conf) below Slurm's task cgroup, and on cgroup v1 the kill
            # counts there alone, not in task_0.
            logs = program_output(ok(run_tfctl(home, "logs", "own-oom", "--task", "worker:0", url=service.url)))
            assert re.search(r"^memory cgroup: /slurm_node1/uid_0/job_\d+/step_\d+/task_0/node1\.root\.\d+\.\d+\.0$",
                             logs, re.M), logs
    finally:
        service.stop()
        shutil.rmtree(workdir, ignore_errors=True)
