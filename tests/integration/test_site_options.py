"""Issue 16, part 5: the site's sbatch options (resources.account, qos,
constraint, exclude, nodelist, reservation, exclusive) reach the Slurm job,
and Slurm's refusal of a bad account or QOS reaches the user named, with
nothing stored.

Runs on the accounting cluster (conftest's accounting_cluster: slurmdbd,
AccountingStorageEnforce=associations,limits,qos; root is associated with
tfs-research, which may use QOS normal and tfs-high; tfs-other exists but
root has no association with it; tfs-low exists but is allowed to nobody).
"""
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import Service, sacct_row, scontrol_job, slurm_env, wait_for


@pytest.fixture(scope="module")
def acct_service(accounting_cluster):
    workdir = tempfile.mkdtemp(prefix="tfsd-", dir="/tmp")
    s = Service(accounting_cluster, workdir).start()
    try:
        yield s
    finally:
        s.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def spec(exp_id, **resources):
    """A one-task PyTorch experiment whose command exits 0 at once."""
    return {"id": exp_id, "framework": "pytorch", "command": ["true"],
            "resources": dict({"nodes": 1, "tasks_per_node": 1, "time_limit": "00:05:00"}, **resources),
            "restart": {"max_restarts": 0}, "checkpoint": {"signal_grace_s": 10}}


def jobs_named(conf, name):
    out = subprocess.run(["squeue", "-h", "-n", name, "-o", "%i"], env=slurm_env(conf),
                         stdout=subprocess.PIPE, text=True, check=True)
    return out.stdout.split()


def assert_refused(service, conf, exp_id, field, slurm_reason, **resources):
    status, body = service.post("/experiments", spec(exp_id, **resources))
    assert status == 400, body
    fields = {f["field"]: f["reason"] for f in body["error"]["fields"]}
    assert field in fields, body
    # Slurm's own words (slurm_strerror), and the value the spec gave.
    assert slurm_reason in fields[field], fields
    value = next(iter(resources.values()))
    assert f"'{value}'" in fields[field], fields
    # Nothing half-stored: no experiment, no Slurm job.
    status, _ = service.get(f"/experiments/{exp_id}")
    assert status == 404
    assert jobs_named(conf, f"tfx-{exp_id}-a1") == []
    return fields[field]


def test_account_and_qos_reach_the_job_and_its_accounting_record(acct_service, accounting_cluster):
    status, body = acct_service.post("/experiments", spec("site-acct", account="tfs-research", qos="tfs-high"))
    assert status == 201, body
    job_id = body["slurm_job_id"]
    job = scontrol_job(accounting_cluster, job_id)
    assert job["Account"] == "tfs-research", job
    assert job["QOS"] == "tfs-high", job
    acct_service.wait_state("site-acct", "succeeded", timeout=120)
    # slurmctld sends the job's records to slurmdbd asynchronously, and a
    # first record of a short job may show QOS Unknown until the next
    # update lands: wait for the full row (the last one seen is reported).
    want = [str(job_id), "root", "tfs-research", "tfs-high", "COMPLETED"]
    wait_for(lambda: sacct_row(accounting_cluster, job_id) == want, 60, f"sacct to show job {job_id} as {want}")


@pytest.mark.parametrize("account", ["tfs-nosuch", "tfs-other"])
def test_an_account_slurm_refuses_is_named_and_nothing_is_stored(acct_service, accounting_cluster, account):
    """tfs-nosuch does not exist; tfs-other does, but root has no association with it."""
    exp_id = f"site-bad-{account}"
    reason = assert_refused(acct_service, accounting_cluster, exp_id, "resources.account",
                            "Invalid account", account=account)
    assert "Slurm errno" in reason, reason
    # The id is free again: the same spec with an account root has is accepted.
    status, body = acct_service.post("/experiments", spec(exp_id, account="tfs-research"))
    assert status == 201, body
    acct_service.wait_state(exp_id, "succeeded", timeout=120)


@pytest.mark.parametrize("qos", ["tfs-nosuch", "tfs-low"])
def test_a_qos_slurm_refuses_is_named_and_nothing_is_stored(acct_service, accounting_cluster, qos):
    """tfs-nosuch does not exist; tfs-low does, but root's association may not use it."""
    assert_refused(acct_service, accounting_cluster, f"site-badq-{qos}", "resources.qos",
                   "Invalid qos specification", qos=qos)


def test_a_spec_slurm_cannot_take_is_refused_before_slurm(acct_service):
    status, body = acct_service.post("/experiments", spec("site-spaces", account="tfs research"))
    assert status == 400, body
    fields = {f["field"]: f["reason"] for f in body["error"]["fields"]}
    assert '"tfs research"' in fields["resources.account"], fields


def test_a_nodelist_naming_an_excluded_node_is_refused_clearly(acct_service, accounting_cluster):
    assert_refused(acct_service, accounting_cluster, "site-nodes", "resources.nodelist",
                   "requires node node2, which this job excludes", nodelist="node2", exclude="node[2-3]")


@pytest.fixture
def reservation(accounting_cluster):
    """A reservation of node2 for root, made with scontrol as an admin would."""
    env = slurm_env(accounting_cluster)
    name = "tfs-resv"
    subprocess.run(["scontrol", "create", "reservation", f"ReservationName={name}", "Users=root",
                    "Nodes=node2", "StartTime=now", "Duration=30", "Flags=IGNORE_JOBS"],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    try:
        yield name
    finally:
        subprocess.run(["scontrol", "delete", f"ReservationName={name}"], env=env, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_constraint_exclude_nodelist_reservation_and_exclusive_reach_the_job(
        acct_service, accounting_cluster, reservation):
    status, body = acct_service.post("/experiments", spec(
        "site-opts", account="tfs-research", constraint="compute", exclude="node1", nodelist="node2",
        reservation=reservation, exclusive=True))
    assert status == 201, body
    job_id = body["slurm_job_id"]
    job = scontrol_job(accounting_cluster, job_id)
    assert job["Features"] == "compute", job
    assert job["ExcNodeList"] == "node1", job
    assert job["ReqNodeList"] == "node2", job
    assert job["Reservation"] == reservation, job
    assert job["OverSubscribe"] == "NO", job
    acct_service.wait_state("site-opts", "succeeded", timeout=120)
    job = scontrol_job(accounting_cluster, job_id)
    assert job["NodeList"] == "node2", job
    # The script shown to the user says the same.
    status, script = acct_service.request("GET", "/experiments/site-opts/sbatch", raw=True)
    assert status == 200, script
    for line in ("#SBATCH --account=tfs-research\n", "#SBATCH --constraint=compute\n",
                 "#SBATCH --exclude=node1\n", "#SBATCH --nodelist=node2\n",
                 f"#SBATCH --reservation={reservation}\n", "#SBATCH --exclusive\n"):
        assert line in script, script


def test_every_component_of_a_heterogeneous_job_carries_account_and_qos(acct_service, accounting_cluster):
    """account and qos are job-wide: slurmctld checks each component's own."""
    het = {"id": "site-het", "command": ["true"], "cluster": {"ps": 1, "worker": 1},
           "resources": {"partition": "compute", "nodes": 1, "tasks_per_node": 1, "time_limit": "00:05:00",
                         "account": "tfs-research", "qos": "tfs-high"},
           "roles": {"ps": {"partition": "psmem", "nodes": 1, "tasks_per_node": 1, "constraint": "bigmem"}},
           "restart": {"max_restarts": 0}, "checkpoint": {"signal_grace_s": 10}}
    status, body = acct_service.post("/experiments", het)
    assert status == 201, body
    leader = body["slurm_job_id"]
    out = subprocess.run(["scontrol", "-o", "show", "job", str(leader)], env=slurm_env(accounting_cluster),
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    comps = [dict(t.split("=", 1) for t in line.split() if "=" in t) for line in out.splitlines() if line]
    assert len(comps) == 2, out
    for c in comps:
        assert (c["Account"], c["QOS"]) == ("tfs-research", "tfs-high"), c
    features = sorted(c["Features"] for c in comps)
    assert features == ["(null)", "bigmem"], features
    acct_service.wait_state("site-het", ("succeeded", "failed"), timeout=120)
