"""Issue 16, part 6: GPUs as Slurm binds them.

The local cluster (deploy/local-slurm/start.sh) gives each node 4 GPUs of
gres/gpu: character device files of its own, named in gres.conf. Slurm then
sets CUDA_VISIBLE_DEVICES (and SLURM_STEP_GPUS, GPU_DEVICE_ORDINAL) in each
task from what it allocated; tfslurm adds no mapping of its own. The shared
cluster has no task/cgroup (see deploy/local-slurm/README.md), so there the
indices are the node's own (gres.conf order), not renumbered from 0 per task;
the last test starts a cluster of its own with ConstrainDevices for that.

Every program here writes its environment to MODEL_DIR/gpu-<SLURM_PROCID>.json
and then waits for MODEL_DIR/release, so the test can read the running job's
GPU allocation from `scontrol show job -d` (a finished job's detail has none).
"""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import REPO, Service, cluster_start_args, slurm_env, wait_for

PROGRAM = r"""
import json, os, time
keys = ["CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "GPU_DEVICE_ORDINAL",
        "SLURMD_NODENAME", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_JOB_ID", "TFSLURM_ROLE"]
out = {k: os.environ.get(k) for k in keys}
model_dir = os.environ["MODEL_DIR"]
path = os.path.join(model_dir, "gpu-%s.json" % os.environ["SLURM_PROCID"])
with open(path + ".tmp", "w") as f:
    json.dump(out, f)
os.rename(path + ".tmp", path)
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(model_dir, "release")) and time.monotonic() < deadline:
    time.sleep(0.1)
"""

# What tfslurmd's own environment holds must never reach a task: it is not
# a GPU Slurm gave.
FOREIGN_DEVICES = "7"


@pytest.fixture
def gpu_service(service_factory, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", FOREIGN_DEVICES)
    return service_factory()


def spec(exp_id, resources, cluster=None, roles=None):
    s = {
        "id": exp_id,
        "command": ["python3", "-c", PROGRAM],
        "cluster": cluster or {"worker": 2},
        "resources": dict({"partition": "compute", "nodes": 1, "tasks_per_node": 2, "time_limit": "00:05:00"},
                          **resources),
        "restart": {"max_restarts": 0},
    }
    if roles:
        s["roles"] = roles
    return s


def expand(idx):
    """Slurm's index list ("0-1,3") as a set of ints."""
    out = set()
    for part in idx.split(","):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return out


def job_gpus_by_node(conf, job_id):
    """{node: set of GPU indices} of a running job (or of every component of a
    heterogeneous one), from `scontrol show job -d`'s
    "Nodes=node2 CPU_IDs=0-1 Mem=4000 GRES=gpu:2(IDX:0-1)" lines."""
    out = subprocess.run(["scontrol", "show", "job", "-d", str(job_id)], env=slurm_env(conf),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True).stdout
    gpus = {}
    for line in out.splitlines():
        fields = dict(t.split("=", 1) for t in line.split() if "=" in t)
        if "CPU_IDs" not in fields:
            continue
        gres = fields.get("GRES", "")
        if "IDX:" in gres:
            assert len(subprocess.run(["scontrol", "show", "hostnames", fields["Nodes"]], env=slurm_env(conf),
                                      stdout=subprocess.PIPE, text=True).stdout.split()) == 1, line
            gpus[fields["Nodes"]] = expand(gres.split("IDX:", 1)[1].rstrip(")"))
    return gpus


def devices(value):
    return [int(x) for x in value.split(",")] if value else []


def run_and_read(service, conf, s):
    """Submits `s`, waits until every task wrote its record, reads the job's
    GPUs from Slurm while it runs, then lets the tasks end. Returns (records
    by SLURM_PROCID, {node: GPU indices}, the sbatch script, the job id)."""
    tasks = sum(s["cluster"].values())
    status, body = service.post("/experiments", s)
    assert status == 201, body
    exp_id = s["id"]
    exp = service.wait_state(exp_id, ("running", "failed", "succeeded"), timeout=120)
    model_dir = exp["model_dir"]
    paths = [os.path.join(model_dir, f"gpu-{p}.json") for p in range(tasks)]
    wait_for(lambda: all(os.path.exists(p) for p in paths) or service.experiment(exp_id)["state"] == "failed",
             90, f"every task of {exp_id} to write its record")
    records = [json.load(open(p)) for p in paths]
    job_id = records[0]["SLURM_JOB_ID"]
    allocated = job_gpus_by_node(conf, job_id)
    open(os.path.join(model_dir, "release"), "w").close()
    done = service.wait_state(exp_id, ("succeeded", "failed"), timeout=90)
    assert done["state"] == "succeeded", done["reason"]
    _, script = service.request("GET", f"/experiments/{exp_id}/sbatch", raw=True)
    return records, allocated, script, job_id


def job_environment(conf, job_id):
    """The environment tfslurmd submitted with the job, as slurmctld saved it
    (StateSaveLocation/hash.N/job.ID/environment: a count, then NUL-separated
    NAME=value strings; _copy_job_desc_to_file in src/slurmctld/job_mgr.c,
    slurm-22-05-8-1)."""
    state = os.path.join(os.path.dirname(os.path.dirname(conf)), "state")
    path = os.path.join(state, f"hash.{int(job_id) % 10}", f"job.{job_id}", "environment")
    return [e.decode(errors="replace") for e in open(path, "rb").read()[4:].split(b"\0") if e]


def test_gpus_per_task_gives_each_task_its_own_gpu_as_slurm_bound_it(gpu_service, slurm_cluster):
    records, allocated, script, job_id = run_and_read(
        gpu_service, slurm_cluster, spec("gpt-1", {"gpus_per_task": 1}))
    assert "#SBATCH --gpus-per-task=1\n" in script, script
    assert "CUDA_VISIBLE_DEVICES=" not in script, script
    nodes = {r["SLURMD_NODENAME"] for r in records}
    assert len(nodes) == 1, records
    node = nodes.pop()
    assert len(allocated[node]) == 2, allocated

    seen = []
    for r in records:
        # Slurm's own per-task binding: the task's SLURM_STEP_GPUS (global
        # indices, what slurmstepd bound this task to) is its
        # CUDA_VISIBLE_DEVICES; without ConstrainDevices they are the same.
        cvd = devices(r["CUDA_VISIBLE_DEVICES"])
        assert len(cvd) == 1, r
        assert cvd == devices(r["SLURM_STEP_GPUS"]) == devices(r["GPU_DEVICE_ORDINAL"]), r
        seen += cvd
    assert len(set(seen)) == 2, f"the two tasks share a GPU: {records}"
    assert set(seen) == allocated[node], (records, allocated)

    fields = subprocess.run(["scontrol", "-o", "show", "job", job_id], env=slurm_env(slurm_cluster),
                            stdout=subprocess.PIPE, text=True).stdout
    assert "TresPerTask=gres:gpu:1" in fields, fields
    env = job_environment(slurm_cluster, job_id)
    assert "SLURM_GPUS_PER_TASK=1" in env, env
    assert not any(e.startswith("CUDA_VISIBLE_DEVICES=") for e in env), env


def test_gpus_per_node_are_shared_by_the_nodes_tasks(gpu_service, slurm_cluster):
    records, allocated, script, job_id = run_and_read(
        gpu_service, slurm_cluster, spec("gpn-2", {"gpus_per_node": 2}))
    assert "#SBATCH --gpus-per-node=2\n" in script, script
    node = records[0]["SLURMD_NODENAME"]
    assert {r["SLURMD_NODENAME"] for r in records} == {node}, records
    assert len(allocated[node]) == 2, allocated
    for r in records:
        # Both tasks see both of the node's GPUs: no slice per local slot.
        assert set(devices(r["CUDA_VISIBLE_DEVICES"])) == allocated[node], (r, allocated)
        assert devices(r["CUDA_VISIBLE_DEVICES"]) == devices(r["SLURM_STEP_GPUS"]), r
    env = job_environment(slurm_cluster, job_id)
    assert not any(e.startswith(("CUDA_VISIBLE_DEVICES=", "SLURM_GPUS_PER_TASK")) for e in env), env


def test_a_task_without_gpus_has_no_cuda_visible_devices(gpu_service, slurm_cluster):
    records, allocated, script, job_id = run_and_read(gpu_service, slurm_cluster, spec("nogpu-3", {}))
    assert allocated == {}, allocated
    for r in records:
        assert r["CUDA_VISIBLE_DEVICES"] is None, r
        assert r["SLURM_STEP_GPUS"] is None, r
    assert not any(e.startswith("CUDA_VISIBLE_DEVICES=") for e in job_environment(slurm_cluster, job_id))


def test_gpus_per_task_per_component_of_a_heterogeneous_job(gpu_service, slurm_cluster):
    """Workers (resources, partition compute) get a GPU each; the ps' block
    (psmem, node1) says gpus_per_node: 0 and so inherits no gpus_per_task."""
    s = spec("het-gpt-4", {"gpus_per_task": 1}, cluster={"ps": 1, "worker": 2},
             roles={"ps": {"partition": "psmem", "nodes": 1, "tasks_per_node": 1, "gpus_per_node": 0,
                           "mem_per_task_mb": 500}})
    records, allocated, script, job_id = run_and_read(gpu_service, slurm_cluster, s)
    assert script.count("#SBATCH --gpus-per-task=1\n") == 1, script
    workers = [r for r in records if r["TFSLURM_ROLE"] == "worker"]
    ps = [r for r in records if r["TFSLURM_ROLE"] == "ps"]
    assert len(workers) == 2 and len(ps) == 1, records
    node = workers[0]["SLURMD_NODENAME"]
    assert node in ("node2", "node3") and workers[1]["SLURMD_NODENAME"] == node, records
    cvd = [devices(w["CUDA_VISIBLE_DEVICES"]) for w in workers]
    assert all(len(c) == 1 for c in cvd) and cvd[0] != cvd[1], workers
    assert set(cvd[0] + cvd[1]) == allocated[node], (workers, allocated)
    assert ps[0]["SLURMD_NODENAME"] == "node1" and ps[0]["CUDA_VISIBLE_DEVICES"] is None, ps
    env = job_environment(slurm_cluster, job_id)
    assert "SLURM_GPUS_PER_TASK_HET_GROUP_0=1" in env, env
    assert not any(e.startswith(("SLURM_GPUS_PER_TASK=", "SLURM_GPUS_PER_TASK_HET_GROUP_1=")) for e in env), env


# ConstrainDevices needs task/cgroup, which the shared cluster leaves off (see
# deploy/local-slurm/README.md: cgroup paths are shared by every cluster on
# the host). This test starts a cluster of its own with it on.
CONSTRAINED_PROGRAM = r"""
import errno, json, os
node = os.environ["SLURMD_NODENAME"]
dev = os.path.join(os.environ["GPU_TEST_DEV_DIR"], node)
opens = {}
for name in sorted(os.listdir(dev)):
    try:
        os.close(os.open(os.path.join(dev, name), os.O_RDONLY))
        opens[name] = "opened"
    except OSError as e:
        # ENXIO: the cgroup let the open through to a major with no driver;
        # EPERM: the devices cgroup refused it.
        opens[name] = errno.errorcode[e.errno]
out = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"), "SLURMD_NODENAME": node,
       "opens": opens}
path = os.path.join(os.environ["MODEL_DIR"], "gpu-%s.json" % os.environ["SLURM_PROCID"])
with open(path + ".tmp", "w") as f:
    json.dump(out, f)
os.rename(path + ".tmp", path)
"""


def cgroup_v1_devices():
    return os.path.isdir("/sys/fs/cgroup/devices") and os.path.ismount("/sys/fs/cgroup/devices")


@pytest.fixture
def constrained_cluster(slurm_cluster):  # on the session's service host, its hosts apart like it
    if not cgroup_v1_devices():
        pytest.skip("no cgroup v1 devices controller at /sys/fs/cgroup/devices: task/cgroup cannot "
                    "constrain devices here")
    d = tempfile.mkdtemp(prefix="tfs-cg-", dir="/tmp")
    os.chmod(d, 0o755)  # munged, as user munge, must reach its socket dir
    try:
        out = subprocess.run([os.path.join(REPO, "deploy/local-slurm/start.sh")] + cluster_start_args() + [d],
                             stdout=subprocess.PIPE,
                             check=True, text=True, env=dict(os.environ, LOCAL_SLURM_CONSTRAIN_DEVICES="1"))
        yield d, out.stdout.strip().split("=", 1)[1]
    finally:
        subprocess.run([os.path.join(REPO, "deploy/local-slurm/stop.sh"), d], check=False)
        shutil.rmtree(d, ignore_errors=True)


def test_constrain_devices_shows_each_task_only_its_own_gpu_renumbered_from_0(constrained_cluster):
    cluster_dir, conf = constrained_cluster
    workdir = tempfile.mkdtemp(prefix="tfsd-", dir="/tmp")
    service = Service(conf, workdir).start()
    try:
        s = {"id": "cg-1", "command": ["python3", "-c", CONSTRAINED_PROGRAM],
             "env": {"GPU_TEST_DEV_DIR": os.path.join(cluster_dir, "dev")},
             "cluster": {"worker": 2},
             "resources": {"partition": "compute", "nodes": 1, "tasks_per_node": 2, "gpus_per_task": 1,
                           "time_limit": "00:05:00"},
             "restart": {"max_restarts": 0}}
        status, body = service.post("/experiments", s)
        assert status == 201, body
        done = service.wait_state("cg-1", ("succeeded", "failed"), timeout=120)
        assert done["state"] == "succeeded", done["reason"]
        records = [json.load(open(os.path.join(done["model_dir"], f"gpu-{p}.json"))) for p in range(2)]
    finally:
        service.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    own = []
    for r in records:
        # Renumbered: each task's one GPU is device 0 of what it can see.
        assert r["CUDA_VISIBLE_DEVICES"] == "0", r
        reachable = [name for name, result in r["opens"].items() if result != "EPERM"]
        assert len(r["opens"]) == 4 and len(reachable) == 1, r
        assert r["opens"][reachable[0]] == "ENXIO", r
        own.append((r["SLURMD_NODENAME"], reachable[0]))
    assert own[0][0] == own[1][0], records
    assert own[0] != own[1], f"both tasks reach the same device file: {records}"
