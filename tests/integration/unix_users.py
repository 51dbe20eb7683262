"""Real Unix users for the multi-user tests (issue 16): alice and bob,
created with useradd, tfctl and `munge` run as them with setpriv, and a
tfslurmd in site mode (--site, as root) that knows them by MUNGE."""
import grp
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import BIN
from helpers import hosts

ALICE, BOB, ADMINS = "tfs-alice", "tfs-bob", "tfs-admins"
PERSONAL = "tfs-personal"  # runs a personal tfslurmd (test_personal_mode.py)
SHARED_GROUP = "tfs-shared"  # a supplementary group of alice's, which her jobs must carry
TFCTL = os.path.join(BIN, "tfctl")

# Every Unix user the tests run as, with the supplementary groups a job of
# theirs must carry. They are made with these memberships before any Slurm
# cluster starts (tests/run.sh runs this file first): slurmctld puts a
# user's groups into the job credential from a cache it keeps for
# GroupUpdateTime (600 s by default: _group_cache_lookup_internal in
# src/common/group_cache.c, called from slurm_cred.c at slurm-22-05-8-1),
# and in 22.05 nothing but a restart of slurmctld empties it
# (group_cache_purge is called at its shutdown only). A membership added
# after slurmctld first launched a job of the user reaches that user's jobs
# up to 10 minutes later.
TEST_GROUPS = (ADMINS, SHARED_GROUP)
TEST_USERS = {ALICE: (SHARED_GROUP,), BOB: (), PERSONAL: ()}


def ensure_group(name):
    subprocess.run(["groupadd", "-f", name], check=True)


def ensure_user(name, groups=()):
    """Makes `name` if missing and adds it to `groups`; True when anything changed."""
    changed = False
    if subprocess.run(["id", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
        changed = True
    for g in groups:
        if name not in grp.getgrnam(g).gr_mem:
            subprocess.run(["usermod", "-aG", g, name], check=True)
            changed = True
    return changed


def ensure_test_users():
    """Every user and group of TEST_USERS, with its final memberships; True when anything changed."""
    changed = False
    for g in TEST_GROUPS:
        ensure_group(g)
    for user, groups in TEST_USERS.items():
        changed |= ensure_user(user, groups)
    return changed


def require_test_users():
    """Fails the test, saying why, when a user of TEST_USERS lacks a membership now: a job
    would carry slurmctld's cached, older group list, and the test would fail for that reason
    instead."""
    if ensure_test_users():
        pytest.fail("the test users or their groups were just made or changed, after the Slurm cluster "
                    "started: slurmctld keeps a user's groups for GroupUpdateTime (600 s), so jobs would "
                    "carry the old ones. Run `python3 tests/integration/unix_users.py` before starting "
                    "the cluster (tests/run.sh does).")


def as_unix(user):
    """setpriv's prefix to run a command as `user` (a name, or a bare uid)."""
    if isinstance(user, int):
        return ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "--"]
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]


def munge_socket(slurm_conf):
    return os.path.join(os.path.dirname(os.path.dirname(slurm_conf)), "munge", "munge.socket.2")


def credential(socket, user, payload=None):
    """A credential made by `user` (None: the test's own uid, root)."""
    args = ["munge", "-S", socket] + (["-s", payload] if payload is not None else ["-n"])
    prefix = [] if user is None else as_unix(user)
    return subprocess.run(prefix + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          check=True).stdout.strip()


def token_for(service, user, admin=False):
    out = subprocess.run([os.path.join(BIN, "tfslurmd"), "--db", service.db, "token", "create", "--user", user]
                         + (["--admin"] if admin else []), stdout=subprocess.PIPE, text=True, check=True)
    return out.stdout.strip()


def admin_token(service):
    return token_for(service, "root", admin=True)


@pytest.fixture
def site(service_factory, slurm_cluster):
    """A tfslurmd in site mode with tokens and MUNGE, users alice and bob,
    and a home and spec directory each of them can read. Its workdir (and so
    the output root) is searchable by them, as a site's output root is:
    slurmd writes alice's batch output there as alice."""
    require_test_users()
    socket = munge_socket(slurm_cluster)
    service = service_factory(extra_args=["--site", "--munge-auth", "--munge-socket", socket], auth=True,
                              searchable=True)
    homes = {}
    for user in (ALICE, BOB):
        homes[user] = tempfile.mkdtemp(prefix=f"{user}-", dir="/tmp")
        subprocess.run(["chown", f"{user}:{user}", homes[user]], check=True)
        os.chmod(homes[user], 0o755)
    yield service, socket, homes
    for h in homes.values():
        shutil.rmtree(h, ignore_errors=True)


def tfctl(site, user, *args, token=None):
    """tfctl as `user`, where users run it: on the login host when the
    cluster's hosts are apart, reaching tfslurmd by its cluster address."""
    service, socket, homes = site
    env = {"PATH": os.environ["PATH"], "HOME": homes[user], "TFSLURM_URL": service.cluster_url or service.url,
           "TFSLURM_MUNGE_SOCKET": socket}
    if token:
        env["TFSLURM_TOKEN"] = token
    if "TFSLURM_CACERT" in os.environ:  # the session's CA (conftest.session_ca), as a site's profile names it
        env["TFSLURM_CACERT"] = os.environ["TFSLURM_CACERT"]
    return subprocess.run(hosts.on_host(service.slurm_conf, "login", as_unix(user) + [TFCTL, *args]), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120, cwd=homes[user])


def ok(result):
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def with_munge(service, method, path, cred, body=None):
    status, reply = service.request(method, path, body, {"Authorization": f"MUNGE {cred}"},
                                    raw=path.endswith("/logs"))
    if isinstance(reply, str) and status >= 400:
        reply = json.loads(reply)
    return status, reply


if __name__ == "__main__":
    # tests/run.sh: before the cluster starts.
    ensure_test_users()
    print("test users: " + ", ".join(f"{u} (groups: {', '.join(g) or '-'})" for u, g in TEST_USERS.items()))
