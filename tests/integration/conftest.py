"""Fixtures for tests against real parts: a local Slurm cluster started by
deploy/local-slurm/start.sh and real tfslurmd processes.

The cluster is started once per test session (it takes a few seconds) in a
short temp directory (unix socket paths are limited to 108 bytes), and
stopped at the end. Each test gets its own tfslurmd with its own database,
output root and ports chosen by the OS.

The cluster's hosts are apart (start.sh --hosts-apart: slurmctld, each
slurmd, the service host and a login host in network namespaces of their
own; TFSLURM_LOOPBACK=1 starts one on this host's loopback instead), and the
tests run ON THE SERVICE HOST: the session enters its network namespace
first (helpers/hosts.py, enter_service_host). So every tfslurmd runs where a
site runs it: its REST API on the service host's loopback (where --no-auth
is allowed), its agent endpoint on all of its addresses, reached by the
agents on the compute nodes over the cluster network, and so over TLS, as
tfslurmd requires off loopback: each tfslurmd serves a certificate from the
session's CA made by `tfslurmd tls init` for the service host's name and
address (service_tls), on both of its ports, and the tests' clients trust
that CA (session_ca: TFSLURM_CACERT, SSL_CERT_FILE); and every Slurm
command of a test goes over the network to slurmctld. Commands for another
host (tfctl on the login host, a fault on a node's link) go through
helpers/hosts.py and helpers/netfault.py.
"""
import json
import os
import shutil
import signal
import socket
import datetime
import ipaddress
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

from helpers import hosts
from helpers.images import images_last

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("TFSLURM_BUILD", os.path.join(REPO, "build"))
BIN = os.path.join(BUILD, "bin")


def pytest_configure(config):
    config.addinivalue_line("markers", "images: runs a program in a container image (helpers/images.py); "
                            "ordered last, so that tests/run.sh can build the images while the rest run")


def pytest_collection_modifyitems(session, config, items):
    items[:] = images_last(items)


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


def cluster_start_args(*extra):
    """start.sh's arguments for another cluster of this session (before
    DIR): its hosts apart like the session's, on the session's service host
    (where the tests run, so that they reach it), or on one host like the
    session's. The fixtures and tests that start a cluster of their own use
    it."""
    if os.environ.get("TFSLURM_LOOPBACK") == "1" or _session_service_netns is None:
        return list(extra)
    return list(extra) + ["--hosts-apart", "--service-netns", _session_service_netns]


# The service host the session runs on (a network namespace), once entered.
_session_service_netns = None


def _enter_service_host(conf):
    global _session_service_netns
    hosts.enter_service_host(conf)
    if hosts.apart(conf):
        _session_service_netns = hosts.netns(conf, "svc")


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running local Slurm cluster, its hosts apart unless
    TFSLURM_LOOPBACK=1; yields the SLURM_CONF path. The session runs on its
    service host from then on (the module's docstring)."""
    if os.environ.get("TFSLURM_SLURM_CONF"):
        # A cluster the caller already started (tests/run.sh does this).
        _enter_service_host(os.environ["TFSLURM_SLURM_CONF"])
        try:
            yield os.environ["TFSLURM_SLURM_CONF"]
        finally:
            _remove_session_ca()
        return
    from unix_users import ensure_test_users  # it imports this module
    ensure_test_users()  # before slurmctld caches anyone's groups (unix_users.py says why)
    d = tempfile.mkdtemp(prefix="tfs-", dir="/tmp")
    os.chmod(d, 0o755)  # munged runs as the munge user and must reach its socket dir
    apart = [] if os.environ.get("TFSLURM_LOOPBACK") == "1" else ["--hosts-apart"]
    out = subprocess.run([os.path.join(REPO, "deploy/local-slurm/start.sh")] + apart + [d],
                         stdout=subprocess.PIPE, check=True, text=True)
    conf = out.stdout.strip().split("=", 1)[1]
    try:
        _enter_service_host(conf)
        yield conf
    finally:
        _remove_session_ca()
        subprocess.run([os.path.join(REPO, "deploy/local-slurm/stop.sh"), d], check=False)
        shutil.rmtree(d, ignore_errors=True)


class Service:
    """One tfslurmd process and a small JSON client for it."""

    def __init__(self, slurm_conf, workdir, extra_args=(), auth=False, agent_host=None, run_as=None,
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
        # Where the agent endpoint listens: all addresses when the hosts are
        # apart (tfslurmd tells the agents its hostname, which every host
        # resolves), loopback on one host.
        apart = hosts.apart(slurm_conf)
        self.agent_host = agent_host or ("0.0.0.0" if apart else "127.0.0.1")
        # On a cluster that joined the session's service host (another
        # cluster's), the agents reach it by the name it has on their network.
        self.advertise = []
        if apart and hosts.fqdn(slurm_conf, "svc") != socket.gethostname() and "--advertise" not in extra_args:
            self.advertise = ["--advertise", hosts.fqdn(slurm_conf, "svc")]
        # The REST API: loopback with --no-auth (the only place it is
        # allowed); with tokens, every address when the hosts are apart, so
        # that tfctl and the dashboard on the login host reach it, as at a
        # site (self.cluster_url).
        self.http_host = "0.0.0.0" if apart and auth else "127.0.0.1"
        self.cluster_url = None
        # A Unix user to run tfslurmd as (personal mode: jobs then run as
        # that user); None: as the test (root).
        self.run_as = run_as
        # TLS on both ports: a TlsFiles (ca, cert, key paths); False:
        # plaintext; None (the default): TLS with a certificate from the
        # session's CA whenever a port listens off loopback, as tfslurmd
        # requires (on hosts apart, always: the agents are on other hosts),
        # made at the first start (service_tls).
        self.tls = tls
        self.proc = None
        self.url = None
        # A token request() sends when the caller gives no Authorization.
        self.token = None

    @property
    def scheme(self):
        return "https" if self.tls else "http"

    def tls_args(self):
        if not self.tls:
            return []
        return ["--tls-cert", self.tls.cert, "--tls-key", self.tls.key, "--tls-ca", self.tls.ca]

    def start(self):
        if self.tls is None:
            off_loopback = self.agent_host != "127.0.0.1" or self.http_host != "127.0.0.1"
            # The host agents are told to dial must be in the certificate
            # (tfslurmd checks it at start): --advertise, else a listen host
            # that is not a wildcard.
            args = list(self.extra_args) + self.advertise
            dialled = [args[args.index("--advertise") + 1]] if "--advertise" in args else []
            if self.agent_host not in ("0.0.0.0", "127.0.0.1"):
                dialled.append(self.agent_host)
            self.tls = (service_tls(self.slurm_conf, self.workdir, self.run_as, extra_hosts=dialled)
                        if off_loopback else False)
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
        # Site mode gives jobs a fixed PATH that must find srun on the
        # compute nodes (--job-path): a Slurm built under its own prefix
        # (tests/compat.sh) is there, as a site with Slurm in /opt says.
        prefix = os.environ.get("LOCAL_SLURM_PREFIX")
        job_path = (["--job-path", f"{prefix}/bin:/usr/local/bin:/usr/bin:/bin"]
                    if "--site" in self.extra_args and "--job-path" not in self.extra_args and prefix else [])
        self.proc = subprocess.Popen(
            as_user + [os.path.join(self.bin_dir, "tfslurmd"), "--listen", f"{self.http_host}:0", "--db", self.db,
             "--output-root", self.output_root, "--ready-file", ready, "--agent-listen", agent_listen]
            + self.advertise + timings + root + job_path + self.tls_args() + self.extra_args,
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: os.path.exists(ready) and os.path.getsize(ready) > 0 or self._died(), 20,
                 "tfslurmd to listen")
        if self.proc.poll() is not None:
            raise AssertionError("tfslurmd exited at start:\n" + open(self.log_path).read())
        ports = json.load(open(ready))
        self.url = f"{self.scheme}://127.0.0.1:{ports['http_port']}"
        if self.http_host == "0.0.0.0":
            self.cluster_url = f"{self.scheme}://{hosts.fqdn(self.slurm_conf, 'svc')}:{ports['http_port']}"
        self.agent_port = ports["agent_port"]
        if not os.path.exists(port_file):
            open(port_file, "w").write(str(self.agent_port))
        return self

    def address(self):
        """(host, port) of the REST port, as self.url names it."""
        host, port = self.url.split("://", 1)[1].rsplit(":", 1)
        return host, int(port)

    def connect(self, timeout=30):
        """A raw connection to the REST port, for tests that write the bytes
        themselves: TLS (verifying the service) when the port speaks it."""
        host, port = self.address()
        s = socket.create_connection((host, port), timeout=timeout)
        if not self.tls:
            return s
        return ssl.create_default_context(cafile=self.tls.ca).wrap_socket(s, server_hostname=host)

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
        if self.token and not any(k.lower() == "authorization" for k in hdrs):
            hdrs["Authorization"] = f"Bearer {self.token}"
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

    def make(extra_args=(), workdir=None, auth=False, agent_host=None, run_as=None, searchable=False,
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


# The session's CA: every tfslurmd a test starts off loopback serves a
# certificate from it (service_tls), and the tests' clients trust it through
# the variables session_ca() sets: tfctl and the Python client
# (TFSLURM_CACERT), urllib, curl and OpenSSL's default paths (SSL_CERT_FILE,
# CURL_CA_BUNDLE). A test of what a client does without the CA drops them.
_session_ca = None
CA_VARIABLES = ("TFSLURM_CACERT", "SSL_CERT_FILE", "CURL_CA_BUNDLE")


def session_ca():
    """The session's CA (made by `tfslurmd tls init` on first use, removed
    with the session's cluster): a TlsFiles whose ca.key signs the
    services' certificates."""
    global _session_ca
    if _session_ca is None:
        d = tempfile.mkdtemp(prefix="tfs-ca-", dir="/tmp")
        os.chmod(d, 0o755)  # ca.pem (0644) is read by the test users' tfctl and jobs too
        _session_ca, _ = tls_init(d)
        for name in CA_VARIABLES:
            os.environ[name] = _session_ca.ca
    return _session_ca


def _remove_session_ca():
    global _session_ca
    if _session_ca is not None:
        shutil.rmtree(_session_ca.dir, ignore_errors=True)
        for name in CA_VARIABLES:
            os.environ.pop(name, None)
    _session_ca = None


def service_names(conf):
    """(DNS names, IP addresses) a tfslurmd on cluster `conf` is reached by,
    for its certificate: the service host's name and cluster address on hosts
    apart, and localhost, 127.0.0.1."""
    if not hosts.apart(conf):
        return ["localhost"], ["127.0.0.1"]
    return [hosts.fqdn(conf, "svc"), "localhost"], [hosts.address(conf, "svc"), "127.0.0.1"]


def service_tls(conf, workdir, run_as=None, directory=None, extra_hosts=()):
    """A server certificate from the session's CA for where a tfslurmd on
    cluster `conf` is reached: the service host's name and cluster address
    (what agents and the login host dial), localhost and 127.0.0.1 (the tests
    on the service host) and `extra_hosts`, made in `directory` (default WORKDIR/tls) by
    `tfslurmd tls init`, its key readable by `run_as` (tfslurmd's user)
    alone. The CA's key is left there only in a `directory` given (a test
    that rotates the certificate signs the next one with it)."""
    ca = session_ca()
    d = directory or os.path.join(workdir, "tls")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    for f in ("ca.pem", "ca.key"):
        shutil.copy2(os.path.join(ca.dir, f), d)
    names, addresses = service_names(conf)
    for host in extra_hosts:  # more names or addresses it is dialled by
        try:
            ipaddress.ip_address(host)
            addresses.append(host)
        except ValueError:
            names.append(host)
    files, _ = tls_init(d, list(dict.fromkeys(names)), list(dict.fromkeys(addresses)),
                        ["--user", run_as] if run_as else [])
    if directory is None:
        os.unlink(os.path.join(d, "ca.key"))
    return files


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
def tls_files(slurm_cluster, tmp_path_factory):
    """A certificate from the session's CA for the service host (service_tls),
    made by tfslurmd itself."""
    d = str(tmp_path_factory.mktemp("tls"))
    os.chmod(d, 0o755)
    return service_tls(slurm_cluster, d, directory=d)


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
def accounting_cluster(slurm_cluster):
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
        out = subprocess.run([os.path.join(REPO, "deploy/local-slurm/start.sh")] + cluster_start_args("--accounting")
                             + [d],
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
