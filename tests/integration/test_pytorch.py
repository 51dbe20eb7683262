"""Issue 15: real PyTorch DDP on the real local Slurm cluster, from the same
rendezvous as TensorFlow.

Every test runs examples/ddp with Debian's python3-torch (gloo, CPU;
deploy/install-deps.sh installs it) under /usr/bin/python3, and asserts on
what torch itself did: its ranks' logs, the parameters each rank ends with,
the checkpoints it wrote and restored, the socket its TCPStore listens on.
"""
import glob
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import BIN, REPO, agent_hanging_task, programs, resumed_after, squeue_ids, wait_for
from test_tensorflow import job_final_state, listeners, task_log, wait_ended

TORCH_PYTHON = "/usr/bin/python3"
DDP = os.path.join(REPO, "examples", "ddp", "train.py")


@pytest.fixture(scope="module", autouse=True)
def torch_installed():
    probe = subprocess.run([TORCH_PYTHON, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if probe.returncode != 0:
        pytest.fail(f"no torch with gloo for {TORCH_PYTHON}: deploy/install-deps.sh installs python3-torch\n"
                    + probe.stdout[-1000:])


def ddp_spec(exp_id, args, nodes=3, tasks_per_node=2, restart=None, **extra):
    spec = {
        "id": exp_id,
        "framework": "pytorch",
        "command": [TORCH_PYTHON, DDP] + list(args),
        "workdir": os.path.dirname(DDP),
        "resources": {"partition": "debug", "nodes": nodes, "tasks_per_node": tasks_per_node,
                      "time_limit": "00:10:00"},
        "pytorch": {"omp_num_threads": 1},  # six ranks share this machine's 2 cores
        "restart": restart or {"max_restarts": 0},
    }
    spec.update(extra)
    return spec


def rank_pid(exp_id, rank, attempt=None):
    """The pid of one rank's training program, found by its environment."""
    want = {f"EXPERIMENT_ID={exp_id}", f"RANK={rank}"}
    if attempt is not None:
        want.add(f"TFSLURM_ATTEMPT={attempt}")
    return next(iter(programs(want)), None)


# Loads checkpoints with torch as the next attempt would (examples/ddp: into
# the example's model and optimizer, which raises unless they are whole and
# of that shape), and digests their parameters as the ranks digest theirs.
CHECKPOINT_PROBE = """
import json, sys
import torch
sys.path.insert(0, sys.argv[1])
from train import FEATURES, parameters_digest
found = {}
for path in sys.argv[2:]:
    state = torch.load(path, map_location="cpu")
    model = torch.nn.Linear(FEATURES, 1)
    model.load_state_dict(state["model"])
    torch.optim.SGD(model.parameters(), lr=0.05).load_state_dict(state["optimizer"])
    found[path] = {"step": state["step"], "digest": parameters_digest(model)}
print(json.dumps(found))
"""


def load_checkpoints(paths):
    """{path: {"step", "digest"}} as torch reads each checkpoint back."""
    out = subprocess.run([TORCH_PYTHON, "-c", CHECKPOINT_PROBE, os.path.dirname(DDP)] + list(paths),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert out.returncode == 0, out.stdout[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def digests(model_dir):
    found = {}
    for path in glob.glob(os.path.join(model_dir, "digests", "rank-*.txt")):
        found[os.path.basename(path)] = tuple(open(path).read().split())
    return found


def test_ddp_over_three_nodes_every_rank_ends_with_the_same_parameters(service, slurm_cluster):
    steps = 120
    spec = ddp_spec("ddp-ok", ["--steps", str(steps), "--checkpoint-every", "40", "--step-delay-ms", "20"])
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    exp = wait_for(lambda: (lambda e: e if "step=" in task_log(e, 0) else None)(service.experiment("ddp-ok")),
                   180, "rank 0's first training step")

    # The world tfslurm gave torch: rank = task, LOCAL_RANK = slot on the node,
    # NODE_RANK = node, and every rank's MASTER_ADDR:PORT is rank 0's address.
    master = exp["tasks"][0]["address"]
    master_port = int(master.rsplit(":", 1)[1])
    assert [(t["role"], t["index"], t["local_rank"]) for t in exp["tasks"]] == [
        ("rank", r, r % 2) for r in range(6)], exp["tasks"]
    # Rank 0's TCPStore listens on the port rank 0's agent reserved and
    # reported: the only listener there, and it is the program.
    pid0 = rank_pid("ddp-ok", 0)
    assert pid0
    on = (slurm_cluster, exp["tasks"][0]["node"])
    assert [p for p, _ in listeners(master_port, *on)] == [pid0], listeners(master_port, *on)

    done = wait_ended(service, "ddp-ok", 300)
    assert done["state"] == "succeeded", done["reason"]
    assert "every rank exited 0 (6 ranks)" in done["reason"], done["reason"]
    assert [t["state"] for t in done["tasks"]] == ["succeeded"] * 6, done["tasks"]
    assert [t["node"] for t in done["tasks"]] == ["node1", "node1", "node2", "node2", "node3", "node3"]
    for t in done["tasks"]:
        rank = t["index"]
        log = task_log(done, t["proc_id"])
        assert (f"ddp: rank={rank} local_rank={rank % 2} world=6 node_rank={rank // 2} "
                f"master={master} attempt=1 start_step=0") in log, log[-2000:]
    # Each rank trained on its own shard; only DDP's all-reduce leaves their
    # parameters equal.
    found = digests(done["model_dir"])
    assert len(found) == 6, found
    assert len(set(found.values())) == 1, found
    assert next(iter(found.values()))[0] == str(steps)
    # Rank 0's torch.save checkpoints, as the agent reported them, and as
    # torch loads them: each holds its step, and the last one the very
    # parameters every rank ended with.
    paths = sorted(glob.glob(os.path.join(done["model_dir"], "ckpt-*.pt")))
    assert sorted(os.path.basename(p) for p in paths) == ["ckpt-120.pt", "ckpt-40.pt", "ckpt-80.pt"]
    assert done["checkpoint"]["step"] == steps, done["checkpoint"]
    loaded = {os.path.basename(p): c for p, c in load_checkpoints(paths).items()}
    assert {name: c["step"] for name, c in loaded.items()} == {
        "ckpt-40.pt": 40, "ckpt-80.pt": 80, "ckpt-120.pt": 120}, loaded
    assert loaded["ckpt-120.pt"]["digest"] == next(iter(found.values()))[1], (loaded, found)
    assert loaded["ckpt-40.pt"]["digest"] != loaded["ckpt-120.pt"]["digest"], loaded
    assert "ranks, MASTER_ADDR and MASTER_PORT sent" in " ".join(e["why"] for e in done["events"])
    assert job_final_state(slurm_cluster, done["slurm_job_id"]) == "COMPLETED"

    # A rank's log is served by rank:N.
    status, text = service.request("GET", "/experiments/ddp-ok/logs?task=rank:5", raw=True)
    assert status == 200 and "ddp: rank=5 local_rank=1 world=6" in text, (status, text[-500:])

    # tfctl shows ranks, not roles.
    out = subprocess.run([os.path.join(BIN, "tfctl"), "status", "ddp-ok"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ, TFSLURM_URL=service.url), timeout=60)
    assert out.returncode == 0, out.stderr
    header = next(line for line in out.stdout.splitlines() if line.startswith("RANK"))
    assert header.split()[:4] == ["RANK", "NODE", "LOCAL", "RANK"], out.stdout
    assert re.search(r"^5\s+node3\s+1\s+", out.stdout, re.M), out.stdout


def test_a_rank_killed_fails_the_attempt_at_once_and_the_restart_resumes_from_the_checkpoint(service, slurm_cluster):
    steps = 400
    spec = ddp_spec("ddp-kill", ["--steps", str(steps), "--checkpoint-every", "50", "--step-delay-ms", "25"],
                    restart={"max_restarts": 1, "on": ["retryable_exit"], "backoff_s": 1})
    assert service.post("/experiments", spec)[0] == 201
    wait_for(lambda: (lambda e: e if e["checkpoint"] and e["checkpoint"]["step"] >= 50 else None)(
        service.experiment("ddp-kill")), 240, "rank 0's first checkpoint")
    pid = rank_pid("ddp-kill", 3, attempt=1)
    assert pid
    os.kill(pid, signal.SIGKILL)
    killed_at, killed_wall = time.monotonic(), time.time()

    def attempt1_reaped():
        events = [e for e in service.experiment("ddp-kill")["events"] if e["attempt"] == 1]
        reaped = [e for e in events if e["what"] == "reaped"]
        return events if len(reaped) == 5 else None
    events = wait_for(attempt1_reaped, 60, "the other five ranks of attempt 1 to be reaped")
    reaped_in = time.monotonic() - killed_at
    whys = [e["why"] for e in events]
    assert any(w.startswith("rank 3 (on node2) was killed by signal 9") for w in whys), whys
    reaping = next(w for w in whys if w.startswith("Shutdown sent to"))
    assert all(f"rank {r} " in reaping for r in (0, 1, 2, 4, 5)), reaping
    # Fail fast: nobody waits in a collective for gloo's timeout (300 s here).
    assert reaped_in < 30, f"attempt 1 took {reaped_in:.1f} s to reap its ranks after the kill"
    wait_for(lambda: not programs({"EXPERIMENT_ID=ddp-kill", "TFSLURM_ATTEMPT=1"}), 30,
             "every program of attempt 1 to be gone")

    done = wait_ended(service, "ddp-kill", 360)
    assert done["state"] == "succeeded", done["reason"]
    first, second = done["attempts"]
    assert first["end_reason"] == "retryable_exit" and "rank 3" in first["reason"], first
    # restart.in_allocation (the default): every rank restarted inside the same job.
    assert second["in_place"] and second["slurm_job_id"] == first["slurm_job_id"], done["attempts"]
    assert job_final_state(slurm_cluster, first["slurm_job_id"]) == "COMPLETED"
    log = task_log(done, 0, attempt=2)
    restored = re.search(r"ddp: restored step=(\d+)", log)
    assert restored and int(restored.group(1)) >= 50, log[-2000:]
    start = int(re.search(r"attempt=2 start_step=(\d+)", log).group(1))
    assert start == int(restored.group(1)) == second["start_step"], (start, restored.groups(), second)
    found = digests(done["model_dir"])
    assert len(found) == 6 and len(set(found.values())) == 1, found
    assert next(iter(found.values()))[0] == str(steps)
    # The last checkpoint, as torch loads it (the one attempt 2 started from
    # is gone by now: rank 0 keeps the last three).
    last_path = os.path.join(done["model_dir"], f"ckpt-{steps}.pt")
    last = load_checkpoints([last_path])[last_path]
    assert last["step"] == steps and last["digest"] == next(iter(found.values()))[1], (last, found)
    resumed = resumed_after(done, 2, killed_wall)
    assert resumed is not None and resumed < 30, resumed
    print(f"ddp-kill: the other ranks were reaped {reaped_in:.2f} s after rank 3's kill -9; attempt 2 "
          f"(in place) checkpointed past its start step {resumed:.2f} s after it")


def test_time_limit_signal_makes_rank_0_save_and_the_next_attempt_starts_there(service):
    # One-minute attempts; SIGUSR1 5 to 35 s before the end (docs/restarts.md:
    # slurmctld's 30 s check period), so never while rank 0 still starts. The
    # target is out of reach: the test ends the experiment once attempt 2 has
    # started.
    spec = ddp_spec("ddp-limit", ["--steps", str(10 ** 7), "--checkpoint-every", str(10 ** 6),
                                  "--step-delay-ms", "20"],
                    restart={"max_restarts": 1, "on": ["timeout"], "backoff_s": 1},
                    checkpoint={"signal_grace_s": 5})
    spec["resources"]["time_limit"] = "1"
    assert service.post("/experiments", spec)[0] == 201
    try:
        e = wait_for(lambda: (lambda x: x if len(x["attempts"]) == 2 and "start_step=" in task_log(
            x, 0, attempt=2) else None)(service.experiment("ddp-limit")), 300, "attempt 2's rank 0 to start")
    except AssertionError as timed_out:
        x = service.experiment("ddp-limit")
        raise AssertionError(f"{timed_out}\nstate {x['state']}: {x['reason']}\nattempts: {x['attempts']}\n" + "\n".join(
            f"--- rank 0, attempt {n}:\n{task_log(x, 0, attempt=n)[-2000:]}" for n in (1, 2))) from None
    first, second = e["attempts"]
    assert first["end_reason"] == "timeout" and first["slurm_state"] == "TIMEOUT", first
    # Only the signal saved in attempt 1 (--checkpoint-every is out of reach).
    on_signal = [int(x) for x in re.findall(r"ddp: checkpoint on signal SIGUSR1 step=(\d+)", task_log(e, 0, attempt=1))]
    assert on_signal and on_signal[0] > 0, task_log(e, 0, attempt=1)[-3000:]
    log2 = task_log(e, 0, attempt=2)
    start = int(re.search(r"attempt=2 start_step=(\d+)", log2).group(1))
    assert start == on_signal[-1] == second["start_step"], (start, on_signal, second)
    assert f"ddp: restored step={start}" in log2, log2[-2000:]
    # The checkpoint written on the signal, as torch loads it.
    on_signal_path = os.path.join(e["model_dir"], f"ckpt-{start}.pt")
    assert load_checkpoints([on_signal_path])[on_signal_path]["step"] == start
    assert service.request("DELETE", "/experiments/ddp-limit")[0] in (200, 202)
    service.wait_state("ddp-limit", "cancelled", timeout=60)


def test_a_rank_that_never_registers_fails_the_barrier_naming_it(service_factory, slurm_cluster):
    service = service_factory(["--agent-path", agent_hanging_task(4), "--barrier-timeout-s", "8"])
    status, body = service.post("/experiments", ddp_spec("ddp-barrier", ["--steps", "10"]))
    assert status == 201, body
    failed = service.wait_state("ddp-barrier", "failed", timeout=120)
    assert "barrier timeout" in failed["reason"], failed["reason"]
    assert "1 of 6 tasks never registered: rank 4" in failed["reason"], failed["reason"]
    wait_for(lambda: body["slurm_job_id"] not in squeue_ids(slurm_cluster), 60, "the job to be cancelled")
    # The five that registered never got their world: no program started.
    assert not glob.glob(os.path.join(failed["model_dir"], "digests", "*")), failed["model_dir"]


def test_framework_fields_of_the_other_framework_are_refused_naming_them(service):
    torch_with_cluster = ddp_spec("ddp-bad", ["--steps", "10"], cluster={"worker": 6})
    status, body = service.post("/experiments", torch_with_cluster)
    assert status == 400, body
    assert [f["field"] for f in body["error"]["fields"]] == ["cluster"], body
    assert "does not apply to framework pytorch" in body["error"]["fields"][0]["reason"], body
    tf_with_pytorch = {"id": "tf-bad", "command": ["true"], "cluster": {"worker": 1},
                       "pytorch": {"omp_num_threads": 2}}
    status, body = service.post("/experiments", tf_with_pytorch)
    assert status == 400, body
    assert [f["field"] for f in body["error"]["fields"]] == ["pytorch"], body
    assert "applies only to framework pytorch" in body["error"]["fields"][0]["reason"], body
    status, body = service.post("/experiments", ddp_spec("ddp-bad", ["--steps", "10"], env={"MASTER_PORT": "1"}))
    assert status == 400 and body["error"]["fields"][0]["field"] == "env.MASTER_PORT", body
    # Nothing was stored.
    for exp_id in ("ddp-bad", "tf-bad"):
        assert service.get(f"/experiments/{exp_id}")[0] == 404
