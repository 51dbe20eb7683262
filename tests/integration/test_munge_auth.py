"""Issue 16, part 3: identity without passwords. tfslurmd --munge-auth
accepts `Authorization: MUNGE <credential>`: the credential's uid, as the
local cluster's munged decodes it, is the user. tfctl with no token sends a
fresh credential per request, bound to that request by its payload
("tfslurm/1 METHOD PATH"). The test creates Unix users and runs tfctl (and
`munge`) as them with setpriv.

tfslurmd runs as root in site mode (--site) here, so alice's jobs run as
alice; test_site_mode.py checks what that means for her files and jobs."""
import json
import os
import subprocess

import pytest

from conftest import wait_for
from unix_users import (ADMINS, ALICE, BOB, admin_token, credential, ensure_user, munge_socket, ok, site,  # noqa: F401
                        tfctl, with_munge)

def submit_as_alice(site, exp_id):
    _, _, homes = site
    spec = os.path.join(homes[ALICE], f"{exp_id}.yaml")
    with open(spec, "w") as f:
        json.dump({"id": exp_id, "command": ["/bin/sh", "-c", "echo hello from alice; exec sleep 300"],
                   "cluster": {"worker": 1},
                   "resources": {"partition": "debug", "nodes": 1, "tasks_per_node": 1,
                                 "time_limit": "00:05:00"}}, f)
    os.chmod(spec, 0o644)
    out = ok(tfctl(site, ALICE, "submit", spec))
    assert f"submitted {exp_id}" in out, out


def test_alice_submits_over_munge_and_bob_cannot_touch_her_experiment(site):
    service, socket, _ = site
    submit_as_alice(site, "alice-1")
    admin = admin_token(service)
    status, exp = service.request("GET", "/experiments/alice-1", headers={"Authorization": f"Bearer {admin}"})
    assert status == 200 and exp["owner"] == ALICE, exp
    mine = json.loads(ok(tfctl(site, ALICE, "status", "alice-1", "-o", "json")))
    assert mine["owner"] == ALICE
    assert "alice-1" in ok(tfctl(site, ALICE, "list", "-o", "name")).split()

    # bob, through tfctl: nothing of alice's.
    assert "alice-1" not in ok(tfctl(site, BOB, "list", "-o", "name")).split()
    for args in (["status", "alice-1"], ["cancel", "alice-1"], ["resume", "alice-1"],
                 ["logs", "alice-1", "--task", "worker:0"]):
        r = tfctl(site, BOB, *args)
        assert r.returncode == 1 and "no experiment with id 'alice-1'" in r.stderr, (args, r.stderr)
    # And the same with his own credentials sent by hand: 404 each, as if it did not exist.
    for method, path in (("GET", "/experiments/alice-1"), ("DELETE", "/experiments/alice-1"),
                         ("POST", "/experiments/alice-1/resume"), ("GET", "/experiments/alice-1/logs"),
                         ("GET", "/experiments/alice-1/sbatch")):
        status, reply = with_munge(service, method, path, credential(socket, BOB, f"tfslurm/1 {method} {path}"))
        assert status == 404, (method, path, status, reply)
    status, exp = service.request("GET", "/experiments/alice-1", headers={"Authorization": f"Bearer {admin}"})
    assert exp["state"] not in ("cancelled",), exp

    # alice reads her logs and cancels.
    wait_for(lambda: "hello from alice" in tfctl(site, ALICE, "logs", "alice-1", "--task", "worker:0").stdout,
             90, "alice's worker output")
    assert ok(tfctl(site, ALICE, "cancel", "alice-1")).startswith("cancelled alice-1")


def test_a_credential_acts_as_its_maker_once_for_its_own_request(site):
    service, socket, _ = site
    submit_as_alice(site, "alice-2")
    path = "/experiments/alice-2"
    payload = f"tfslurm/1 GET {path}"

    # bob's credential is bob, whatever request carries it.
    status, reply = with_munge(service, "GET", path, credential(socket, BOB, payload))
    assert status == 404, reply

    # alice's works once; the same header again is a replay.
    cred = credential(socket, ALICE, payload)
    status, reply = with_munge(service, "GET", path, cred)
    assert status == 200 and reply["owner"] == ALICE, reply
    status, reply = with_munge(service, "GET", path, cred)
    assert status == 401 and "replayed" in reply["error"]["message"], reply

    # Bound to its request: another path, another method, no payload, another audience.
    for method, other, made_for in (("GET", "/experiments", payload),
                                    ("DELETE", path, payload),
                                    ("GET", path, None),
                                    ("GET", path, f"GET {path}"),
                                    ("GET", path, f"slurm/1 GET {path}")):
        status, reply = with_munge(service, method, other, credential(socket, ALICE, made_for))
        assert status == 401 and "payload must be" in reply["error"]["message"], (method, other, made_for, reply)
    assert service.request("GET", path, headers={"Authorization": f"Bearer {admin_token(service)}"})[1][
        "state"] != "cancelled"

    # uid 0, and a uid without an account.
    status, reply = with_munge(service, "GET", path, credential(socket, None, payload))
    assert status == 401 and "uid 0" in reply["error"]["message"], reply
    status, reply = with_munge(service, "GET", path, credential(socket, 54321, payload))
    assert status == 401 and "uid 54321 has no account" in reply["error"]["message"], reply
    # Garbage is munged's refusal, named.
    status, reply = with_munge(service, "GET", path, "MUNGE:AwQFAAB=:")
    assert status == 401 and "MUNGE credential refused" in reply["error"]["message"], reply
    # Tokens keep working, and a 401 says what is accepted.
    status, reply = service.request("GET", path)
    assert status == 401 and "MUNGE" in reply["error"]["message"], reply
    ok(tfctl(site, ALICE, "cancel", "alice-2"))


def test_token_create_mints_the_callers_own_token(site):
    service, socket, _ = site
    token = ok(tfctl(site, ALICE, "token", "create")).strip()
    assert token.startswith("tfs_"), token
    status, reply = service.request("POST", "/tokens", {}, {"Authorization": f"Bearer {token}"})
    assert status == 201 and reply["user"] == ALICE and reply["admin"] is False, reply
    submit_as_alice(site, "alice-3")
    status, exp = service.request("GET", "/experiments/alice-3", headers={"Authorization": f"Bearer {token}"})
    assert status == 200 and exp["owner"] == ALICE, exp

    # Only an admin mints for others, or admin tokens.
    for args in (["--user", BOB], ["--admin"]):
        r = tfctl(site, ALICE, "token", "create", *args)
        assert r.returncode == 1 and "only an admin" in r.stderr, (args, r.stderr)
    bob = ok(tfctl(site, ALICE, "token", "create", "--user", BOB, token=admin_token(service))).strip()
    status, exp = service.request("GET", "/experiments/alice-3", headers={"Authorization": f"Bearer {bob}"})
    assert status == 404, exp
    status, reply = service.request("POST", "/tokens", {"user": 5}, {"Authorization": f"Bearer {token}"})
    assert status == 400, reply
    ok(tfctl(site, ALICE, "cancel", "alice-3"))


def test_members_of_the_admin_group_are_admins_under_munge(service_factory, slurm_cluster, site):
    _, socket, homes = site
    ensure_user(BOB, groups=[ADMINS])
    try:
        service = service_factory(
            extra_args=["--munge-auth", "--munge-socket", socket, "--munge-admin-group", ADMINS], auth=True)
        status, reply = with_munge(service, "POST", "/tokens",
                                   credential(socket, ALICE, "tfslurm/1 POST /tokens"), {"user": BOB})
        assert status == 403, reply
        status, reply = with_munge(service, "POST", "/tokens",
                                   credential(socket, BOB, "tfslurm/1 POST /tokens"), {"user": ALICE})
        assert status == 201 and reply["user"] == ALICE, reply
    finally:
        subprocess.run(["gpasswd", "-d", BOB, ADMINS], check=False, stdout=subprocess.DEVNULL)


def test_an_unknown_admin_group_stops_tfslurmd_at_start(service_factory, slurm_cluster):
    with pytest.raises(AssertionError, match="no group named 'tfs-no-such-group'"):
        service_factory(extra_args=["--munge-auth", "--munge-socket", munge_socket(slurm_cluster),
                                    "--munge-admin-group", "tfs-no-such-group"], auth=True)
