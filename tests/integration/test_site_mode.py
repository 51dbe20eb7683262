"""Issue 16, part 2 and part 4: site mode. tfslurmd runs as root with
--site; alice submits with tfctl over MUNGE, and her job runs as alice: her
program's uid and groups are hers, everything made for the experiment (the
experiment's directory, the logs, MODEL_DIR) and everything it writes is
hers, and Slurm has the job under her name (and, on the accounting
cluster, charges it to her account in sacct). An owner with no Unix account,
or root, is refused before anything is stored. Files alice plants (a
symlink to a root-only file as the checkpoint state, or as a log) reach
nothing that alice herself could not read."""
import json
import os
import grp
import pwd
import shutil
import signal
import subprocess
import tempfile

import pytest

from conftest import REPO, Service, add_user_to_account, program_pid, sacct_row, scontrol_job, wait_for
from unix_users import (ALICE, BOB, SHARED_GROUP, as_unix, munge_socket, ok, require_test_users, site,  # noqa: F401
                        tfctl, token_for)


def as_admin(service, method, path, body=None):
    return service.request(method, path, body, {"Authorization": f"Bearer {service.admin}"})


@pytest.fixture
def alice_site(site):
    service, _, _ = site
    # Alice is in SHARED_GROUP, to see that the job has her supplementary
    # groups too (site made sure of it).
    service.admin = token_for(service, "root", admin=True)
    return site


def submit(site, user, spec):
    _, _, homes = site
    path = os.path.join(homes[user], f"{spec['id']}.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    os.chmod(path, 0o644)
    out = ok(tfctl(site, user, "submit", path))
    assert f"submitted {spec['id']}" in out, out


def wait_done(service, exp_id, timeout=180, attempts=1):
    """The experiment once it has ended and so has its attempt number
    `attempts`: right after a resume a GET can still show the state the
    previous attempt ended in."""
    def done(e):
        return (e["state"] in ("succeeded", "failed", "cancelled") and len(e["attempts"]) >= attempts
                and e["attempts"][attempts - 1].get("ended_at"))
    return wait_for(lambda: (lambda e: e if done(e) else None)(as_admin(service, "GET", f"/experiments/{exp_id}")[1]),
                    timeout, f"{exp_id}'s attempt {attempts} to end", interval=0.25)


def owners_under(path):
    found = {".": os.lstat(path).st_uid}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            found[os.path.relpath(full, path)] = os.lstat(full).st_uid
    return found


def test_alices_job_runs_as_alice_and_everything_made_for_it_is_hers(alice_site, slurm_cluster):
    service, _, _ = alice_site
    alice = pwd.getpwnam(ALICE)
    shared_gid = grp.getgrnam(SHARED_GROUP).gr_gid
    record = 'id -u > "$MODEL_DIR/id-$TFSLURM_ROLE-$TFSLURM_INDEX"; id -G >> "$MODEL_DIR/id-$TFSLURM_ROLE-$TFSLURM_INDEX"'
    submit(alice_site, ALICE, {
        "id": "site-linear", "workdir": os.path.join(REPO, "examples/linear_ps"),
        "command": ["/bin/sh", "-c", record + '; exec python3 train.py --steps 40'],
        "cluster": {"ps": 1, "worker": 1},
        "resources": {"partition": "debug", "nodes": 2, "tasks_per_node": 1, "time_limit": "00:10:00"}})
    done = wait_done(service, "site-linear")
    assert done["state"] == "succeeded", done.get("reason")
    assert done["owner"] == ALICE

    # Slurm ran the job as alice, with her primary group.
    job = scontrol_job(slurm_cluster, done["slurm_job_id"])
    assert job["UserId"] == f"{ALICE}({alice.pw_uid})", job["UserId"]
    assert job["GroupId"].startswith(f"{grp.getgrgid(alice.pw_gid).gr_name}({alice.pw_gid})"), job["GroupId"]

    # Her programs (and so the agents that started them) ran as alice, with
    # her supplementary groups, which slurmctld put in the job's credential.
    model_dir = done["model_dir"]
    for task in ("ps-0", "worker-0"):
        uid_line, groups_line = open(os.path.join(model_dir, f"id-{task}")).read().split("\n")[:2]
        assert int(uid_line) == alice.pw_uid, (task, uid_line)
        assert shared_gid in {int(g) for g in groups_line.split()}, (task, groups_line, shared_gid)

    # Everything under the experiment's directory is alice's: what tfslurmd
    # made (the directory, logs/attempt-1, MODEL_DIR) and what the job wrote
    # (batch output, task logs, checkpoints, scalars).
    exp_dir = os.path.join(service.output_root, "site-linear")
    owners = owners_under(exp_dir)
    assert {"logs/attempt-1", "checkpoint", "tfslurm-scalars.jsonl"} <= set(owners), sorted(owners)
    assert any(p.startswith("logs/attempt-1/") for p in owners), sorted(owners)
    assert {p: uid for p, uid in owners.items() if uid != alice.pw_uid} == {}, owners
    assert os.stat(exp_dir).st_mode & 0o777 == 0o750


def test_alices_program_killed_restarts_in_place_as_alice(alice_site, slurm_cluster):
    # Issue 29 in site mode: the next attempt runs inside alice's job, so her
    # agents (running as alice) move their output into the attempt's new log
    # directory, which tfslurmd (root) made for her, and start her program
    # again as alice.
    service, _, _ = alice_site
    alice = pwd.getpwnam(ALICE)
    record = 'id -u > "$MODEL_DIR/id-$TFSLURM_ATTEMPT-$TFSLURM_INDEX"'
    submit(alice_site, ALICE, {
        "id": "site-inplace", "workdir": os.path.join(REPO, "examples/linear_ps"),
        "command": ["/bin/sh", "-c", record + "; exec python3 train.py --steps 200 --checkpoint-every 10 "
                    "--step-sleep 0.05"],
        "cluster": {"ps": 1, "worker": 2},
        "resources": {"partition": "debug", "nodes": 3, "tasks_per_node": 1, "time_limit": "00:10:00"},
        "restart": {"max_restarts": 1, "on": ["retryable_exit"], "in_allocation": True,
                    "max_task_restarts": 0}})
    wait_for(lambda: (lambda e: e if e["checkpoint"] and e["checkpoint"]["step"] >= 30 else None)(
        as_admin(service, "GET", "/experiments/site-inplace")[1]), 120, "a checkpoint")
    pid = wait_for(lambda: program_pid("site-inplace", "worker", 1), 30, "worker 1's program")
    assert os.stat(f"/proc/{pid}").st_uid == alice.pw_uid
    os.kill(pid, signal.SIGKILL)
    done = wait_done(service, "site-inplace", timeout=240)
    assert done["state"] == "succeeded", done.get("reason")
    first, second = done["attempts"]
    assert first["end_reason"] == "retryable_exit", first
    assert second["in_place"] and second["slurm_job_id"] == first["slurm_job_id"], done["attempts"]
    assert second["start_step"] and second["start_step"] >= 30, second
    model_dir = done["model_dir"]
    for index in (0, 1):
        assert int(open(os.path.join(model_dir, f"id-2-{index}")).read()) == alice.pw_uid, index
    # Both attempts' logs, and all the job wrote, are alice's.
    exp_dir = os.path.join(service.output_root, "site-inplace")
    owners = owners_under(exp_dir)
    assert any(p.startswith("logs/attempt-2/task-") for p in owners), sorted(owners)
    assert {p: uid for p, uid in owners.items() if uid != alice.pw_uid} == {}, owners


def test_an_owner_with_no_unix_account_or_root_is_refused_and_nothing_is_stored(alice_site):
    service, _, _ = alice_site
    for user, why in (("tfs-nobody-here", "has no Unix account on this host"), ("root", "is uid 0")):
        token = token_for(service, user)
        spec = {"id": f"refused-{user}", "command": ["/bin/true"], "cluster": {"worker": 1},
                "resources": {"partition": "debug"}}
        status, reply = service.request("POST", "/experiments", spec, {"Authorization": f"Bearer {token}"})
        assert status == 403 and why in reply["error"]["message"], (user, status, reply)
        assert as_admin(service, "GET", f"/experiments/refused-{user}")[0] == 404


def test_symlinks_alice_plants_reach_nothing_she_could_not_read(alice_site, tmp_path):
    service, _, _ = alice_site
    submit(alice_site, ALICE, {"id": "site-plant", "command": ["/bin/sh", "-c", "echo REAL"],
                               "cluster": {"worker": 1}, "resources": {"partition": "debug"}})
    done = wait_done(service, "site-plant")
    assert done["state"] == "succeeded", done.get("reason")

    # A root-only file that looks like a checkpoint state and a log.
    secret = tmp_path / "root-only"
    secret.write_text('model_checkpoint_path: "model.ckpt-987654"\nSECRET\n')
    os.chmod(secret, 0o600)
    os.chmod(tmp_path, 0o755)
    model_dir = done["model_dir"]
    attempt_dir = os.path.join(service.output_root, "site-plant", "logs", "attempt-1")
    plant = "ln -sf {0} {1}/checkpoint && for f in {2}/*; do ln -sf {0} \"$f\"; done".format(
        secret, model_dir, attempt_dir)
    subprocess.run(as_unix(ALICE) + ["/bin/sh", "-c", plant], check=True)
    assert os.path.islink(os.path.join(model_dir, "checkpoint"))

    # The logs: refused, not served.
    r = tfctl(alice_site, ALICE, "logs", "site-plant", "--task", "worker:0")
    assert r.returncode == 1 and "SECRET" not in r.stdout and "refused" in r.stderr, r
    # The checkpoint state is read as alice, who cannot read the file: the
    # resumed attempt starts from no checkpoint, not from step 987654.
    ok(tfctl(alice_site, ALICE, "resume", "site-plant"))
    _, exp = as_admin(service, "GET", "/experiments/site-plant")
    assert len(exp["attempts"]) == 2, exp["attempts"]
    assert exp["attempts"][1].get("start_step") in (None, 0), exp["attempts"][1]
    assert "987654" not in json.dumps(exp)
    # The resumed attempt's end: otherwise the service stops under a running
    # job, whose agent then waits out its reconnect window on a node the
    # tests after this one need.
    wait_done(service, "site-plant", attempts=2)


def test_delete_in_site_mode_bob_cannot_alices_files_go_as_alice_and_links_out_stay(alice_site, tmp_path):
    service, _, _ = alice_site
    spec = {"id": "site-del", "command": ["/bin/sh", "-c", 'echo trained > "$MODEL_DIR/weights"'],
            "cluster": {"worker": 1}, "resources": {"partition": "debug"}}
    submit(alice_site, ALICE, spec)
    done = wait_done(service, "site-del")
    assert done["state"] == "succeeded", done.get("reason")
    exp_dir = os.path.join(service.output_root, "site-del")
    model_dir = done["model_dir"]
    assert os.path.isfile(os.path.join(model_dir, "weights"))

    # Bob cannot delete it, and is told what a missing id would tell him;
    # nothing of alice's is touched.
    r = tfctl(alice_site, BOB, "delete", "site-del", "--files")
    missing = tfctl(alice_site, BOB, "delete", "site-nobody", "--files")
    assert r.returncode == 1 and missing.returncode == 1, (r, missing)
    assert r.stderr.replace("site-del", "ID") == missing.stderr.replace("site-nobody", "ID"), (r.stderr, missing.stderr)
    assert "no experiment with id 'site-del'" in r.stderr, r.stderr
    assert os.path.isfile(os.path.join(model_dir, "weights"))
    assert as_admin(service, "GET", "/experiments/site-del")[0] == 200

    # Outside the output root, root's: a directory and a file the links in
    # alice's MODEL_DIR point at, which a removal that followed them would
    # empty (as root, it could).
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("root's")
    os.chmod(tmp_path, 0o755)
    os.symlink(outside, os.path.join(model_dir, "to-dir"))
    os.symlink(outside / "precious", os.path.join(model_dir, "to-file"))
    # And inside it, a directory of root's that alice cannot empty: removed
    # as alice, its file stays (as root it would go), and the answer says so.
    planted = os.path.join(model_dir, "roots")
    os.mkdir(planted, 0o755)
    with open(os.path.join(planted, "file"), "w") as f:
        f.write("root's too")

    # (Right after the end tfctl waits for the Slurm job to leave.)
    r = tfctl(alice_site, ALICE, "delete", "site-del", "--files")
    assert r.returncode == 1, r
    assert "experiment 'site-del' was deleted, but not all of its files" in r.stderr, r.stderr
    assert "Permission denied" in r.stderr and "/roots/file" in r.stderr, r.stderr
    left = r.stderr.rsplit("what is left is in ", 1)[1].split()[0]
    assert os.path.basename(left).startswith(".deleted-site-del"), left
    assert os.path.isfile(os.path.join(left, os.path.relpath(planted, exp_dir), "file")), "root's file stays"
    assert sorted(os.listdir(outside)) == ["precious"] and (outside / "precious").read_text() == "root's"
    assert not os.path.lexists(exp_dir), "the id's directory is free"
    assert as_admin(service, "GET", "/experiments/site-del")[0] == 404
    shutil.rmtree(left)

    # The id is free again; this time every file is alice's, and all go.
    submit(alice_site, ALICE, spec)
    done = wait_done(service, "site-del")
    assert done["state"] == "succeeded", done.get("reason")
    os.symlink(outside, os.path.join(done["model_dir"], "to-dir"))
    out = ok(tfctl(alice_site, ALICE, "delete", "site-del", "--files"))
    assert out.startswith(f"deleted site-del and its files ({exp_dir}, "), out
    assert not os.path.lexists(exp_dir)
    assert not [n for n in os.listdir(service.output_root) if "site-del" in n], os.listdir(service.output_root)
    assert (outside / "precious").read_text() == "root's", "a symlink's target is left alone"


def test_on_an_accounting_cluster_slurm_charges_alice_and_refuses_an_account_not_hers(accounting_cluster):
    """The accounting cluster (conftest): enforced associations; alice is
    associated with tfs-research only."""
    require_test_users()
    add_user_to_account(accounting_cluster, ALICE, "tfs-research")
    socket = munge_socket(accounting_cluster)
    workdir = tempfile.mkdtemp(prefix="tfsd-site-acct-", dir="/tmp")
    os.chmod(workdir, 0o755)
    home = tempfile.mkdtemp(prefix=f"{ALICE}-", dir="/tmp")
    subprocess.run(["chown", f"{ALICE}:{ALICE}", home], check=True)
    service = Service(accounting_cluster, workdir, ["--site", "--munge-auth", "--munge-socket", socket],
                      auth=True).start()
    try:
        service.admin = token_for(service, "root", admin=True)
        at_site = (service, socket, {ALICE: home})

        def spec(exp_id, account):
            return {"id": exp_id, "command": ["/bin/true"], "cluster": {"worker": 1},
                    "resources": {"account": account, "qos": "tfs-high", "time_limit": "00:05:00"}}

        submit(at_site, ALICE, spec("site-charged", "tfs-research"))
        done = wait_done(service, "site-charged", timeout=120)
        assert done["state"] == "succeeded", done.get("reason")
        # slurmdbd's record: the job is alice's, charged to her account.
        want = [str(done["slurm_job_id"]), ALICE, "tfs-research", "tfs-high", "COMPLETED"]
        wait_for(lambda: sacct_row(accounting_cluster, done["slurm_job_id"]) == want, 60,
                 f"sacct to show {want}")

        # tfs-other exists, but alice has no association with it: Slurm
        # refuses, tfctl says so with the field, and nothing is stored.
        path = os.path.join(home, "other.json")
        with open(path, "w") as f:
            json.dump(spec("site-other", "tfs-other"), f)
        os.chmod(path, 0o644)
        r = tfctl(at_site, ALICE, "submit", path)
        assert r.returncode != 0 and "resources.account" in r.stderr and "Invalid account" in r.stderr, r
        assert as_admin(service, "GET", "/experiments/site-other")[0] == 404
    finally:
        service.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
