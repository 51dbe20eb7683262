"""Fixtures for tests against real parts: a local Slurm cluster started by
deploy/local-slurm/start.sh and real tfslurmd processes.

The cluster is started once per test session (it takes a few seconds) in a
short temp directory (unix socket paths are limited to 108 bytes), and
stopped at the end. Each test gets its own tfslurmd with its own database,
output root and ports chosen by the OS.
"""
import json
import os
import shutil
import signal
import datetime
import re
import sqlite3
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("TFSLURM_BUILD", os.path.join(REPO, "build"))
BIN = os.path.join(BUILD, "bin")


def wait_for(predicate, timeout, what, interval=0.1):
    """Polls predicate() until it returns a truthy value; fails naming `what`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running local Slurm cluster; yields the SLURM_CONF path."""
    if os.environ.get("TFSLURM_SLURM_CONF"):
        # A cluster the caller already started (tests/run.sh does this).
        yield os.environ["TFSLURM_SLURM_CONF"]
        return
    from unix_users import ensure_test_users  # it imports this module
    ensure_test_users()  # before slurmctld caches anyone's groups (unix_users.py says why)
    d = tempfile.mkdtemp(prefix="tfs-", dir="/tmp")
    os.chmod(d, 0o755)  # munged runs as the munge user and must reach its socket dir
    out = subprocess.run([os.path.join(REPO, "deploy/local-slurm/start.sh"), d],
                         stdout=subprocess.PIPE, check=True, text=True)
    conf = out.stdout.strip().split("=", 1)[1]
    try:
        yield conf
    finally:
        subprocess.run([os.path.join(REPO, "deploy/local-slurm/stop.sh"), d], check=False)
        shutil.rmtree(d, ignore_errors=True)


class Service:
    """One tfslurmd process and a small JSON client for it."""

    def __init__(self, slurm_conf, workdir, extra_args=(), auth=False, agent_host="127.0.0.1", run_as=None,
                 bin_dir=BIN, env=None, tls=None):
        self.slurm_conf = slurm_conf
        # The build whose tfslurmd runs (another Slurm release's: test_slurm_release_crossing.py),
        # and the environment it gets besides SLURM_CONF (default: the test's).
        self.bin_dir = bin_dir
        self.env = env if env is not None else os.environ
        self.workdir = workdir
        self.db = os.path.join(workdir, "tfslurm.db")
        self.output_root = os.path.join(workdir, "out")
        self.log_path = os.path.join(workdir, "tfslurmd.log")
        # Most tests run single-user (--no-auth on loopback); test_security
        # runs with tokens.
        self.extra_args = list(extra_args) + ([] if auth else ["--no-auth"])
        self.agent_host = agent_host
        # A Unix user to run tfslurmd as (personal mode: jobs then run as
        # that user); None: as the test (root).
        self.run_as = run_as
        # TLS on both ports: a TlsFiles (ca, cert, key paths); None: plaintext.
        self.tls = tls
        self.proc = None
        self.url = None

    def tls_args(self):
        if not self.tls:
            return []
        return ["--tls-cert", self.tls.cert, "--tls-key", self.tls.key, "--tls-ca", self.tls.ca]

    def start(self):
        ready = os.path.join(self.workdir, "ready.json")
        if os.path.exists(ready):
            os.unlink(ready)
        # The agent endpoint's address is written into every job's script:
        # it must stay the same when the service restarts on this workdir.
        # The first start binds port 0 and the port tfslurmd got is kept (a
        # port picked here and closed again could be taken by anyone before
        # tfslurmd binds it).
        port_file = os.path.join(self.workdir, "agent_port")
        agent_port = open(port_file).read().strip() if os.path.exists(port_file) else "0"
        agent_listen = f"{self.agent_host}:{agent_port}"
        env = dict(self.env, SLURM_CONF=self.slurm_conf)
        self.log = open(self.log_path, "a")
        # setpriv execs (runuser would stay as the parent): the pid is tfslurmd's.
        as_user = (["setpriv", f"--reuid={self.run_as}", f"--regid={self.run_as}", "--init-groups", "--"]
                   if self.run_as else [])
        # Quick defaults for tests; a test may give its own value for one in
        # extra_args (tfslurmd takes each option once).
        timings = [arg for name, value in (("--poll-interval-ms", "500"), ("--heartbeat-ms", "1000"),
                                           ("--shutdown-grace-ms", "3000"))
                   if name not in self.extra_args for arg in (name, value)]
        # As root without --site, tfslurmd refuses to start unless told that
        # jobs may run as root (issue 31): the tests run as root.
        root = (["--allow-root"] if os.geteuid() == 0 and not self.run_as and "--site" not in self.extra_args
                else [])
        self.proc = subprocess.Popen(
            as_user + [os.path.join(self.bin_dir, "tfslurmd"), "--listen", "127.0.0.1:0", "--db", self.db,
             "--output-root", self.output_root, "--ready-file", ready, "--agent-listen", agent_listen]
            + timings + root + self.tls_args() + self.extra_args,
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: os.path.exists(ready) and os.path.getsize(ready) > 0 or self._died(), 20,
                 "tfslurmd to listen")
        if self.proc.poll() is not None:
            raise AssertionError("tfslurmd exited at start:\n" + open(self.log_path).read())
        ports = json.load(open(ready))
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{ports['http_port']}"
        self.agent_port = ports["agent_port"]
        if not os.path.exists(port_file):
            open(port_file, "w").write(str(self.agent_port))
        return self

    def _died(self):
        return self.proc.poll() is not None

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def request(self, method, path, body=None, headers=None, raw=False):
        data = None
        hdrs = dict(headers or {})
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=hdrs)
        context = ssl.create_default_context(cafile=self.tls.ca) if self.tls else None
        try:
            with urllib.request.urlopen(req, timeout=30, context=context) as resp:
                payload = resp.read()
                status = resp.status
        except urllib.error.HTTPError as e:
            payload = e.read()
            status = e.code
        if raw:
            return status, payload.decode()
        return status, (json.loads(payload) if payload else None)

    def get(self, path):
        return self.request("GET", path)

    def post(self, path, body):
        return self.request("POST", path, body)

    def experiment(self, exp_id):
        status, body = self.get(f"/experiments/{exp_id}")
        assert status == 200, body
        return body

    def wait_state(self, exp_id, states, timeout=120):
        states = {states} if isinstance(states, str) else set(states)
        return wait_for(lambda: (lambda e: e if e["state"] in states else None)(self.experiment(exp_id)),
                        timeout, f"{exp_id} to reach {states}", interval=0.25)


@pytest.fixture
def service_factory(slurm_cluster):
    services = []
    dirs = []

    def make(extra_args=(), workdir=None, auth=False, agent_host="127.0.0.1", run_as=None, searchable=False,
             tls=None):
        """searchable: other users may pass through the workdir (and so reach
        the output root), as site mode's jobs, run as their owners, must."""
        if workdir is None:
            workdir = tempfile.mkdtemp(prefix="tfsd-", dir="/tmp")
            dirs.append(workdir)
            if run_as:
                shutil.chown(workdir, run_as, run_as)
            if searchable:
                os.chmod(workdir, 0o755)
        s = Service(slurm_cluster, workdir, extra_args, auth, agent_host, run_as, tls=tls).start()
        services.append(s)
        return s

    yield make
    for s in services:
        s.stop()
    # Jobs a test leaves behind (a killed service, a failed assertion) must
    # not hold the shared cluster's nodes for the tests after it.
    job_ids = set()
    for s in services:
        if os.path.exists(s.db):
            db = sqlite3.connect(f"file:{s.db}?mode=ro", uri=True)
            job_ids |= {str(r[0]) for r in db.execute("SELECT slurm_job_id FROM attempts WHERE slurm_job_id > 0")}
            db.close()
    if job_ids:
        subprocess.run(["scancel"] + sorted(job_ids), env=slurm_env(slurm_cluster), check=False)
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


class TlsFiles:
    """What `tfslurmd tls init` wrote in a directory."""

    def __init__(self, directory):
        self.dir = directory
        self.ca = os.path.join(directory, "ca.pem")
        self.cert = os.path.join(directory, "server.pem")
        self.key = os.path.join(directory, "server.key")


def tls_init(directory, names=("localhost",), addresses=("127.0.0.1",), extra=()):
    """Runs `tfslurmd tls init` (a CA and a server certificate) into `directory`."""
    args = [os.path.join(BIN, "tfslurmd"), "tls", "init", "--dir", directory]
    for n in names:
        args += ["--name", n]
    for a in addresses:
        args += ["--ip", a]
    out = subprocess.run(args + list(extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert out.returncode == 0, out.stderr
    return TlsFiles(directory), out.stdout


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory):
    """A CA and a certificate for 127.0.0.1 and localhost, made by tfslurmd itself."""
    d = str(tmp_path_factory.mktemp("tls"))
    os.chmod(d, 0o755)
    files, _ = tls_init(d)
    return files


@pytest.fixture
def service(service_factory):
    return service_factory()


def slurm_env(conf):
    return dict(os.environ, SLURM_CONF=conf)


def scontrol_job(conf, job_id):
    """scontrol's view of a job as a dict of its Key=Value fields (for assertions only)."""
    out = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], env=slurm_env(conf),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        return {}
    fields = {}
    for token in out.stdout.split():
        if "=" in token:
            k, v = token.split("=", 1)
            fields[k] = v
    return fields


def programs(want):
    """The pids of the training programs (train.py) whose environment holds
    every NAME=value of `want`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = set(open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace").split("\0"))
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        if want <= env and "train.py" in cmd:
            found.append(int(pid))
    return found


def program_pid(exp_id, role, index):
    """The pid of one task's training program, found by its environment."""
    return next(iter(programs({f"EXPERIMENT_ID={exp_id}", f"TFSLURM_ROLE={role}", f"TFSLURM_INDEX={index}"})), None)


def agent_hanging_task(proc):
    """An --agent-path for tfslurmd under which task `proc` hangs before it
    registers (as on a node that never starts it) and the others run the
    real agent."""
    d = tempfile.mkdtemp(prefix="tfs-wrap-", dir="/tmp")
    wrapper = os.path.join(d, f"agent-but-not-task-{proc}")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\n# Task {proc} hangs before registering; the others run the real agent.\n"
                f'if [ "$SLURM_PROCID" = {proc} ]; then exec sleep 600; fi\n'
                f'exec {os.path.join(BIN, "tfslurm-agent")} "$@"\n')
    os.chmod(wrapper, 0o755)
    return wrapper


def squeue_ids(conf):
    out = subprocess.run(["squeue", "-h", "-o", "%i"], env=slurm_env(conf), stdout=subprocess.PIPE, text=True)
    return {int(x) for x in out.stdout.split()}


@pytest.fixture(scope="session")
def accounting_cluster():
    """A second local cluster with accounting (start.sh --accounting):
    slurmdbd and MariaDB behind it, AccountingStorageEnforce=associations,
    limits,qos, accounts tfs-research and tfs-other, QOS tfs-high (allowed to
    tfs-research) and tfs-low (allowed to nobody), root associated with
    tfs-research. Started on first use, stopped at the end of the session;
    yields its SLURM_CONF. TFSLURM_ACCOUNTING_SLURM_CONF: one already running."""
    if os.environ.get("TFSLURM_ACCOUNTING_SLURM_CONF"):
        yield os.environ["TFSLURM_ACCOUNTING_SLURM_CONF"]
        return
    d = tempfile.mkdtemp(prefix="tfs-", dir="/tmp")
    os.chmod(d, 0o755)  # munged runs as the munge user and must reach its socket dir
    try:
        out = subprocess.run([os.path.join(REPO, "deploy/local-slurm/start.sh"), "--accounting", d],
                             stdout=subprocess.PIPE, check=True, text=True)
        conf = out.stdout.strip().split("=", 1)[1]
        yield conf
    finally:
        subprocess.run([os.path.join(REPO, "deploy/local-slurm/stop.sh"), d], check=False)
        shutil.rmtree(d, ignore_errors=True)


def sacct_row(conf, job_id):
    """sacct's record of the job once it ended: JobID, User, Account, QOS, State."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", str(job_id), "-o", "JobID,User,Account,QOS,State"],
                         env=slurm_env(conf), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in out.stdout.splitlines():
        row = line.split("|")
        if row[0] == str(job_id) and row[4] not in ("PENDING", "RUNNING"):
            return row
    return None


def add_user_to_account(conf, user, account, default=True):
    """Associates Unix `user` with `account` on the accounting cluster
    (sacctmgr -i; a no-op when it is already); the association takes the
    account's QOS list. default: make it the user's default account."""
    env = slurm_env(conf)
    have = subprocess.run(["sacctmgr", "-n", "-P", "list", "assoc", f"user={user}", f"account={account}",
                           "format=user"], env=env, stdout=subprocess.PIPE, text=True, check=True)
    if not have.stdout.strip():
        args = ["sacctmgr", "-i", "add", "user", user, f"account={account}"]
        if default:
            args.append(f"defaultaccount={account}")
        subprocess.run(args, env=env, stdout=subprocess.DEVNULL, check=True)
    # slurmctld learns new associations from slurmdbd asynchronously: wait
    # until it knows this one, or a job submitted right away is refused.
    wait_for(lambda: _assoc_known(conf, user, account), 30,
             f"slurmctld to know {user}'s association with {account}")


def _assoc_known(conf, user, account):
    out = subprocess.run(["scontrol", "show", "assoc_mgr", f"users={user}", f"accounts={account}",
                          "flags=assoc"], env=slurm_env(conf), stdout=subprocess.PIPE, text=True)
    return any(f"Account={account} " in line and f"UserName={user}(" in line
               for line in out.stdout.splitlines())


def api_time(ts):
    """The API's "2024-01-02T03:04:05.678Z" as Unix seconds."""
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if "." in ts else "%Y-%m-%dT%H:%M:%SZ"
    return datetime.datetime.strptime(ts, fmt).replace(tzinfo=datetime.timezone.utc).timestamp()


def resumed_after(exp, attempt, since):
    """Seconds from `since` (Unix time) to the first checkpoint event of
    `attempt` past the step it started from: the resumed training's first
    checkpoint, an upper bound on its first step."""
    start = next(a["start_step"] for a in exp["attempts"] if a["number"] == attempt) or 0
    for e in exp["events"]:
        m = re.match(r"step (\d+) ", e["why"]) if e["what"] == "checkpoint" and e["attempt"] == attempt else None
        if m and int(m.group(1)) > start:
            return api_time(e["at"]) - since
    return None


# A node of the local cluster failing as a real one does, and coming back
# (deploy/local-slurm/node_fault.py, which the benches use too).
sys.path.insert(0, os.path.join(REPO, "deploy", "local-slurm"))
from node_fault import fail_node, node_state, restore_node  # noqa: E402,F401
