"""Issue 16, part 1: personal mode needs no root. tfslurmd runs as an
ordinary Unix user (created by the test), submits through libslurm as that
user, and its jobs, agents and programs run as that user: examples/linear_ps
on the real local Slurm cluster (which itself needs root: slurmd starts jobs
for any user) runs to COMPLETED, and everything it writes is the user's."""
import os
import pwd

from conftest import REPO, scontrol_job, wait_for
from unix_users import PERSONAL as USER, require_test_users


def linear_ps_spec(exp_id):
    return {"id": exp_id, "command": ["python3", os.path.join(REPO, "examples/linear_ps/train.py"), "--steps", "60"],
            "workdir": os.path.join(REPO, "examples/linear_ps"), "cluster": {"ps": 1, "worker": 2},
            "resources": {"partition": "debug", "nodes": 3, "tasks_per_node": 1, "time_limit": "00:10:00"}}


def test_a_personal_tfslurmd_of_an_ordinary_user_runs_linear_ps_as_that_user(service_factory, slurm_cluster):
    require_test_users()
    user = pwd.getpwnam(USER)
    service = service_factory(run_as=USER)
    status_line = next(line for line in open(f"/proc/{service.proc.pid}/status") if line.startswith("Uid:"))
    assert status_line.split()[1:] == [str(user.pw_uid)] * 4, status_line

    status, body = service.post("/experiments", linear_ps_spec("personal-1"))
    assert status == 201, body
    done = service.wait_state("personal-1", ("succeeded", "failed"), timeout=180)
    assert done["state"] == "succeeded", done["reason"]
    job = wait_for(lambda: (lambda j: j if j.get("JobState") == "COMPLETED" else None)(
        scontrol_job(slurm_cluster, done["slurm_job_id"])), 60, "the job to be COMPLETED")
    assert job["UserId"].startswith(f"{USER}("), job["UserId"]

    # What the job wrote (the checkpoints, the scalars, the logs) is the
    # user's, and so is what tfslurmd made for it.
    model_dir = done["model_dir"]
    owners = {}
    for root, dirs, files in os.walk(model_dir):
        for name in dirs + files:
            owners[os.path.relpath(os.path.join(root, name), model_dir)] = os.lstat(os.path.join(root, name)).st_uid
    assert "checkpoint" in owners and "tfslurm-scalars.jsonl" in owners, sorted(owners)
    assert {path for path, uid in owners.items() if uid != user.pw_uid} == set(), owners
    assert os.stat(model_dir).st_uid == user.pw_uid
    assert os.stat(service.db).st_uid == user.pw_uid
    status, metrics = service.get("/experiments/personal-1/metrics")
    assert status == 200 and {"loss", "held_out_loss"} <= {t["tag"] for t in metrics["tags"]}, metrics
