"""Issue 19: per-role resources as one heterogeneous Slurm job.

The local cluster (deploy/local-slurm/start.sh) has partition psmem (node1,
feature bigmem) and partition compute (node2, node3, feature compute), so the
parameter servers' component and the workers' land on different nodes.
"""
import json
import os
import subprocess

from conftest import REPO, program_pid, slurm_env, wait_for

TRAIN = os.path.join(REPO, "examples/linear_ps/train.py")


def het_spec(exp_id, steps=150, extra_args=(), restart=None):
    """linear_ps: 2 ps on psmem's bigmem node, 4 workers on compute's 2 nodes."""
    return {
        "id": exp_id,
        "command": ["python3", TRAIN, "--steps", str(steps), "--checkpoint-every", "50",
                    "--step-sleep", "0.01"] + list(extra_args),
        "workdir": os.path.join(REPO, "examples/linear_ps"),
        "cluster": {"ps": 2, "worker": 4},
        "resources": {"partition": "compute", "nodes": 2, "tasks_per_node": 2, "time_limit": "00:10:00"},
        "roles": {"ps": {"partition": "psmem", "nodes": 1, "tasks_per_node": 2, "mem_per_task_mb": 500,
                         "constraint": "bigmem"}},
        "restart": restart or {"max_restarts": 0},
        "checkpoint": {"signal_grace_s": 30},
    }


def task_log(exp, proc, attempt=1):
    path = os.path.join(exp["model_dir"], "logs", f"attempt-{attempt}", f"task-{proc}.out")
    return open(path, errors="replace").read() if os.path.exists(path) else ""


def components(conf, leader):
    """scontrol's view of every component of a heterogeneous job, in offset order."""
    out = subprocess.run(["scontrol", "-o", "show", "job", str(leader)], env=slurm_env(conf),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    jobs = []
    for line in out.stdout.splitlines():
        fields = dict(t.split("=", 1) for t in line.split() if "=" in t)
        if fields:
            jobs.append(fields)
    return sorted(jobs, key=lambda j: int(j.get("HetJobOffset", 0)))


def all_components_final(conf, leader):
    def final():
        jobs = components(conf, leader)
        if jobs and all(j.get("JobState") not in ("RUNNING", "PENDING", "COMPLETING") for j in jobs):
            return jobs
        return None
    return wait_for(final, 60, f"every component of job {leader} to end")


def test_ps_and_workers_run_in_their_own_components_and_the_job_completes(service, slurm_cluster):
    status, body = service.post("/experiments", het_spec("het-ok"))
    assert status == 201, body
    _, script = service.request("GET", "/experiments/het-ok/sbatch", raw=True)
    done = service.wait_state("het-ok", ("succeeded", "failed"), timeout=180)
    assert done["state"] == "succeeded", done["reason"]
    done = wait_for(lambda: (lambda e: e if all(t["state"] != "running" for t in e["tasks"]) else None)(
        service.experiment("het-ok")), 30, "the ps to be reaped")
    assert "#SBATCH hetjob" in script and "srun --het-group=0,1" in script, script

    # Component 0 is resources (the workers), component 1 the ps' block; the
    # tasks are numbered across them in that order.
    tasks = done["tasks"]
    assert [(t["role"], t["index"], t["component"]) for t in tasks] == [
        ("worker", 0, 0), ("worker", 1, 0), ("worker", 2, 0), ("worker", 3, 0), ("ps", 0, 1), ("ps", 1, 1)], tasks
    for t in tasks:
        if t["role"] == "ps":
            assert t["node"] == "node1", t
            assert t["state"] == "reaped", t
        else:
            assert t["node"] in ("node2", "node3"), t
            assert t["state"] == "succeeded", t
    # Every task wrote its own log under its own SLURM_PROCID (the agent's
    # --log-dir), and the workers reached the ps at TF_CONFIG's addresses.
    for t in tasks:
        assert f"linear_ps: role={t['role']} index={t['index']} attempt=1" in task_log(done, t["proc_id"]), t
    assert "linear_ps: done step=" in task_log(done, 0)

    jobs = all_components_final(slurm_cluster, done["slurm_job_id"])
    assert [(j["JobState"], j["Partition"], j["NodeList"]) for j in jobs] == [
        ("COMPLETED", "compute", "node[2-3]"), ("COMPLETED", "psmem", "node1")], jobs
    assert jobs[1]["Features"] == "bigmem", jobs[1]


def test_tf_config_lists_every_task_of_every_component(service, slurm_cluster):
    """The TF_CONFIG each program got, read from its environment."""
    status, body = service.post("/experiments", het_spec("het-tfc", steps=100000))
    assert status == 201, body
    exp = wait_for(lambda: (lambda e: e if e["state"] == "running" else None)(service.experiment("het-tfc")),
                   120, "het-tfc to run")
    configs = {}
    for t in exp["tasks"]:
        pid = wait_for(lambda: program_pid("het-tfc", t["role"], t["index"]), 30, f"{t['role']}:{t['index']}")
        env = dict(v.split("=", 1) for v in open(f"/proc/{pid}/environ", errors="replace").read().split("\0") if "=" in v)
        configs[(t["role"], t["index"])] = (json.loads(env["TF_CONFIG"]), env.get("TFSLURM_COMPONENT"))
    by_role = {r: [t["address"] for t in sorted(exp["tasks"], key=lambda t: t["index"]) if t["role"] == r]
               for r in ("ps", "worker")}
    for (role, index), (tf_config, component) in configs.items():
        assert tf_config["cluster"] == by_role, tf_config
        assert tf_config["task"] == {"type": role, "index": index}, tf_config
        assert component == ("1" if role == "ps" else "0"), (role, component)
    status, _ = service.request("DELETE", "/experiments/het-tfc")
    assert status in (200, 202, 204), status
    jobs = all_components_final(slurm_cluster, exp["slurm_job_id"])
    assert all(j["JobState"] == "CANCELLED" for j in jobs), jobs


def test_failure_in_one_component_fails_the_attempt_and_reaps_the_other(service, slurm_cluster):
    spec = het_spec("het-fail", steps=100000,
                    extra_args=["--fail-at-step", "30", "--fail-task", "worker:1", "--fail-code", "1"])
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    failed = service.wait_state("het-fail", "failed", timeout=180)
    assert "worker:1" in failed["reason"] and "exited with code 1" in failed["reason"], failed["reason"]
    tasks = service.experiment("het-fail")["tasks"]
    assert [t["state"] for t in tasks if t["role"] == "ps"] == ["reaped", "reaped"], tasks
    jobs = all_components_final(slurm_cluster, service.experiment("het-fail")["slurm_job_id"])
    assert len(jobs) == 2, jobs


def test_restart_and_resume_of_a_heterogeneous_experiment(service, slurm_cluster):
    # Attempt 1: worker 1 is killed (137, retryable) at step 30; attempt 2
    # resumes from the checkpoint in the same job and finishes; a resume
    # makes attempt 3, a new job.
    spec = het_spec("het-restart", steps=120,
                    extra_args=["--fail-at-step", "30", "--fail-task", "worker:1", "--fail-code", "137"],
                    restart={"max_restarts": 1, "backoff_s": 0})
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    done = service.wait_state("het-restart", ("succeeded", "failed"), timeout=300)
    assert done["state"] == "succeeded", done["reason"]
    assert done["attempt"] == 2, done
    assert [a["end_reason"] for a in done["attempts"]][:1] == ["retryable_exit"], done["attempts"]
    for n in (1, 2):
        assert "#SBATCH hetjob" in service.request("GET", f"/experiments/het-restart/sbatch?attempt={n}", raw=True)[1]
    # restart.in_allocation (the default): every component's tasks restarted
    # together inside the same heterogeneous job.
    first, second = done["attempts"][0]["slurm_job_id"], done["attempts"][1]["slurm_job_id"]
    assert done["attempts"][1]["in_place"] and first == second, done["attempts"]
    all_components_final(slurm_cluster, second)

    # 503 while the service has not yet seen the job leave Slurm: retry.
    status, body = wait_for(lambda: (lambda r: r if r[0] != 503 else None)(
        service.post("/experiments/het-restart/resume", {})), 60, "the resume to be accepted")
    assert status in (200, 201, 202), body
    wait_for(lambda: service.experiment("het-restart")["attempt"] == 3, 10, "attempt 3")
    done = service.wait_state("het-restart", ("succeeded", "failed"), timeout=300)
    assert done["state"] == "succeeded", done["reason"]
    assert [t["node"] for t in done["tasks"] if t["role"] == "ps"] == ["node1", "node1"], done["tasks"]


def test_a_component_that_cannot_fit_is_refused_with_its_numbers(service):
    spec = het_spec("het-big")
    spec["roles"]["ps"] = {"partition": "psmem", "nodes": 2, "tasks_per_node": 1}
    status, body = service.post("/experiments", spec)
    assert status == 400, body
    fields = {f["field"]: f["reason"] for f in body["error"]["fields"]}
    assert "roles.ps.nodes" in fields, body
    assert "asks for 2 nodes but partition psmem has 1" in fields["roles.ps.nodes"], fields
    assert service.request("GET", "/experiments/het-big")[0] == 404

    spec = het_spec("het-mem")
    spec["roles"]["ps"]["mem_per_task_mb"] = 6000
    status, body = service.post("/experiments", spec)
    assert status == 400, body
    fields = {f["field"]: f["reason"] for f in body["error"]["fields"]}
    assert "2 tasks x 6000 MB = 12000 MB per node" in fields.get("roles.ps.mem_per_task_mb", ""), body


def test_pytorch_refuses_roles(service):
    status, body = service.post("/experiments", {"framework": "pytorch", "command": ["true"],
                                                 "roles": {"ps": {"nodes": 1}}})
    assert status == 400, body
    fields = {f["field"]: f["reason"] for f in body["error"]["fields"]}
    assert "framework tensorflow" in fields["roles"], fields


def test_real_tensorflow_ps_and_workers_in_two_components(service, slurm_cluster):
    """examples/tf1_ps with the TensorFlow of deploy/install-tf.sh: TF's own
    gRPC servers find each other through TF_CONFIG across the components,
    the workers train to the target, the ps are reaped, both components end
    COMPLETED."""
    tf_python = os.environ.get("TFSLURM_TF_PYTHON", "/opt/tfslurm/venv-tf/bin/python")
    assert os.access(tf_python, os.X_OK), f"no TensorFlow python at {tf_python}: run deploy/install-tf.sh"
    spec = {
        "id": "het-tf1",
        "command": [tf_python, os.path.join(REPO, "examples/tf1_ps/train.py"), "--steps", "200",
                    "--checkpoint-every", "100"],
        "workdir": os.path.join(REPO, "examples/tf1_ps"),
        "env": {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_NUM_INTRAOP_THREADS": "1"},
        "cluster": {"ps": 2, "worker": 2},
        "resources": {"partition": "compute", "nodes": 2, "tasks_per_node": 1, "time_limit": "00:10:00"},
        "roles": {"ps": {"partition": "psmem", "constraint": "bigmem"}},
        "restart": {"max_restarts": 0},
    }
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    done = service.wait_state("het-tf1", ("succeeded", "failed"), timeout=300)
    assert done["state"] == "succeeded", done["reason"]
    done = wait_for(lambda: (lambda e: e if all(t["state"] != "running" for t in e["tasks"]) else None)(
        service.experiment("het-tf1")), 60, "the ps to be reaped")
    placed = sorted((t["role"], t["index"], t["component"], t["node"], t["state"]) for t in done["tasks"])
    assert placed[:2] == [("ps", 0, 1, "node1", "reaped"), ("ps", 1, 1, "node1", "reaped")], placed
    assert {t[3] for t in placed[2:]} == {"node2", "node3"} and all(t[4] == "succeeded" for t in placed[2:]), placed
    for t in done["tasks"]:
        if t["role"] == "worker":
            assert "tf1_ps: done step=" in task_log(done, t["proc_id"]), task_log(done, t["proc_id"])[-2000:]
    jobs = all_components_final(slurm_cluster, done["slurm_job_id"])
    assert [j["JobState"] for j in jobs] == ["COMPLETED", "COMPLETED"], jobs
