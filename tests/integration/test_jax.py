"""Issue 32: real JAX (jax.distributed) on the real local Slurm cluster, from
the same rendezvous as TensorFlow and PyTorch.

Every test runs examples/jax with the pinned jax[cpu] of deploy/install-jax.sh
(tests/run.sh exports TFSLURM_JAX_PYTHON), and asserts on what JAX itself did:
the process count and index each process saw, the parameters each ends with,
the checkpoints it wrote and restored, the socket its coordinator listens on.
"""
import datetime
import glob
import json
import os
import re
import signal
import subprocess

import pytest

from conftest import REPO, programs, wait_for
from test_tensorflow import job_final_state, listeners, task_log, wait_ended

EXAMPLE = os.path.join(REPO, "examples", "jax", "train.py")
# Six processes share this machine's 2 cores: one XLA thread each.
JAX_ENV = {"JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}


@pytest.fixture(scope="module")
def jax_python():
    python = os.environ.get("TFSLURM_JAX_PYTHON", "/opt/tfslurm/venv-jax/bin/python")
    probe = subprocess.run([python, "-c", "import jax, jax.distributed"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True) if os.access(python, os.X_OK) else None
    if probe is None or probe.returncode != 0:
        pytest.fail(f"no JAX python at {python}: run deploy/install-jax.sh (tests/run.sh does) and set "
                    "TFSLURM_JAX_PYTHON to the path it prints\n" + (probe.stdout[-1000:] if probe else ""))
    return python


def jax_spec(python, exp_id, args, nodes=3, tasks_per_node=2, restart=None, **extra):
    spec = {
        "id": exp_id,
        "framework": "jax",
        "command": [python, EXAMPLE] + list(args),
        "workdir": os.path.dirname(EXAMPLE),
        "env": dict(JAX_ENV),
        "resources": {"partition": "debug", "nodes": nodes, "tasks_per_node": tasks_per_node,
                      "time_limit": "00:10:00"},
        "restart": restart or {"max_restarts": 0},
    }
    spec.update(extra)
    return spec


def process_pid(exp_id, process, attempt=None):
    """The pid of one process's training program, found by its environment."""
    want = {f"EXPERIMENT_ID={exp_id}", f"JAX_PROCESS_ID={process}"}
    if attempt is not None:
        want.add(f"TFSLURM_ATTEMPT={attempt}")
    return next(iter(programs(want)), None)


def digests(model_dir):
    found = {}
    for path in glob.glob(os.path.join(model_dir, "digests", "process-*.txt")):
        found[os.path.basename(path)] = tuple(open(path).read().split())
    return found


def load_checkpoint(python, model_dir, step):
    """(step, digest) of MODEL_DIR/<step>/ as the example loads it."""
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); from train import load_checkpoint, "
             "parameters_digest; s, p = load_checkpoint(sys.argv[2], int(sys.argv[3])); "
             "print(s, parameters_digest(p))")
    out = subprocess.run([python, "-c", probe, os.path.dirname(EXAMPLE), model_dir, str(step)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, **JAX_ENV))
    assert out.returncode == 0, out.stdout[-3000:]
    step_text, digest = out.stdout.split()[-2:]
    return int(step_text), digest


def ms(timestamp):
    return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000


def test_six_processes_over_three_nodes_see_their_world_and_end_equal(service, slurm_cluster, jax_python):
    steps = 120
    spec = jax_spec(jax_python, "jax-ok", ["--steps", str(steps), "--checkpoint-every", "40",
                                           "--step-delay-ms", "20"])
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    exp = wait_for(lambda: (lambda e: e if "step=10 " in task_log(e, 0) else None)(service.experiment("jax-ok")),
                   240, "process 0's tenth training step")

    # Process 0's coordinator listens on the port process 0's agent reserved
    # and reported: the only listener there, and it is the program.
    coordinator = exp["tasks"][0]["address"]
    port = int(coordinator.rsplit(":", 1)[1])
    assert [(t["role"], t["index"]) for t in exp["tasks"]] == [("rank", p) for p in range(6)], exp["tasks"]
    pid0 = process_pid("jax-ok", 0)
    assert pid0
    on = (slurm_cluster, exp["tasks"][0]["node"])
    assert [p for p, _ in listeners(port, *on)] == [pid0], listeners(port, *on)

    done = wait_ended(service, "jax-ok", 300)
    assert done["state"] == "succeeded", done["reason"]
    assert "every rank exited 0 (6 ranks)" in done["reason"], done["reason"]
    assert [t["state"] for t in done["tasks"]] == ["succeeded"] * 6, done["tasks"]
    assert [t["node"] for t in done["tasks"]] == ["node1", "node1", "node2", "node2", "node3", "node3"]
    init_s = []
    for t in done["tasks"]:
        log = task_log(done, t["proc_id"])
        # What JAX itself says: jax.process_count() and jax.process_index().
        seen = re.search(r"initialized in ([\d.]+) s: process_index=(\d+) process_count=(\d+) "
                         r"coordinator=(\S+) ", log)
        assert seen, log[-2000:]
        assert (int(seen.group(2)), int(seen.group(3)), seen.group(4)) == (t["index"], 6, coordinator), log[-2000:]
        init_s.append(float(seen.group(1)))
    # Each process trained on its own shard; only pmean's all-reduce leaves
    # their parameters equal.
    found = digests(done["model_dir"])
    assert sorted(found) == [f"process-{p}.txt" for p in range(6)], found
    assert len(set(found.values())) == 1, found
    final_step, count, digest = next(iter(found.values()))
    assert (final_step, count) == (str(steps), "6")
    # Process 0's checkpoints in Orbax's layout, as the agent reported them
    # and as the example loads them: the last holds the final parameters.
    names = sorted(n for n in os.listdir(done["model_dir"]) if n.isdigit())
    assert names == ["120", "40", "80"], os.listdir(done["model_dir"])
    assert done["checkpoint"]["step"] == steps, done["checkpoint"]
    assert load_checkpoint(jax_python, done["model_dir"], steps) == (steps, digest)
    assert load_checkpoint(jax_python, done["model_dir"], 40)[1] != digest
    # The loss reached the service as a training scalar: every point process
    # 0 wrote to its scalars file ($TFSLURM_SCALARS_FILE, full precision),
    # one every 10 steps as its log says (5 decimals there), at its step.
    written = [json.loads(line) for line in open(os.path.join(done["model_dir"], "tfslurm-scalars.jsonl"))]
    logged = [(int(st), v) for st, v in re.findall(r"^jax-example: step=(\d+) loss=(\S+)$", task_log(done, 0), re.M)]
    assert [st for st, _ in logged] == list(range(10, steps + 1, 10)), logged
    assert [(w["step"], f"{w['loss']:.5f}") for w in written] == logged, (written, logged)
    status, metrics = service.get("/experiments/jax-ok/metrics")
    assert status == 200, metrics
    loss = next((s for s in metrics["series"] if s["tag"] == "loss"), None)
    assert loss, metrics
    assert list(zip(loss["step"], loss["value"], loss["attempt"])) == [(w["step"], w["loss"], 1) for w in written], \
        (loss, written)
    events = done["events"]
    assert "process ids and JAX_COORDINATOR_ADDRESS sent" in " ".join(e["why"] for e in events)
    assert job_final_state(slurm_cluster, done["slurm_job_id"]) == "COMPLETED"

    # The rendezvous, measured: tfslurm's barrier from the first agent's
    # registration to the assignments, then jax.distributed.initialize.
    registered = [ms(t["registered_at"]) for t in done["tasks"]]
    assigned = next(ms(e["at"]) for e in events if e["what"] == "assigned")
    print(f"jax-ok rendezvous of 6 processes: registrations spread over "
          f"{(max(registered) - min(registered)) / 1000:.3f} s, first registration to barrier release "
          f"{(assigned - min(registered)) / 1000:.3f} s; jax.distributed.initialize took "
          f"{min(init_s):.3f}-{max(init_s):.3f} s")


def test_a_process_killed_restarts_the_attempt_from_the_checkpoint_saved_on_sigusr1(service, jax_python):
    # No periodic checkpoint (--checkpoint-every out of reach): the only one
    # before the kill is the one process 0 saves on SIGUSR1, as on Slurm's
    # time-limit warning, so the restart must resume at exactly that step.
    steps = 600
    spec = jax_spec(jax_python, "jax-kill", ["--steps", str(steps), "--checkpoint-every", str(10 ** 6),
                                             "--step-delay-ms", "25"],
                    restart={"max_restarts": 1, "on": ["retryable_exit"], "backoff_s": 1})
    assert service.post("/experiments", spec)[0] == 201
    wait_for(lambda: (lambda e: e if "step=10 " in task_log(e, 0) else None)(service.experiment("jax-kill")),
             240, "process 0's tenth training step")
    assert service.experiment("jax-kill")["checkpoint"] is None
    pid0 = process_pid("jax-kill", 0, attempt=1)
    assert pid0
    os.kill(pid0, signal.SIGUSR1)
    exp = wait_for(lambda: (lambda e: e if e["checkpoint"] else None)(service.experiment("jax-kill")),
                   60, "the checkpoint saved on SIGUSR1 to be reported")
    saved = exp["checkpoint"]["step"]
    on_signal = [int(x) for x in re.findall(r"checkpoint on signal SIGUSR1 step=(\d+)", task_log(exp, 0))]
    assert on_signal == [saved] and 10 <= saved < steps, (on_signal, exp["checkpoint"])
    assert exp["checkpoint"]["path"] == os.path.join(exp["model_dir"], str(saved)), exp["checkpoint"]
    pid = process_pid("jax-kill", 3, attempt=1)
    assert pid
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not programs({"EXPERIMENT_ID=jax-kill", "TFSLURM_ATTEMPT=1"}), 90,
             "every program of attempt 1 to be gone")

    done = wait_ended(service, "jax-kill", 360)
    assert done["state"] == "succeeded", done["reason"]
    first, second = done["attempts"]
    assert first["end_reason"] == "retryable_exit" and "rank 3" in first["reason"], first
    assert "killed by signal 9" in first["reason"], first
    # Every process of attempt 2 restored the step saved on the signal, the
    # step the service read for the attempt's start.
    restored = [re.search(r"jax-example: restored step=(\d+)", task_log(done, t["proc_id"], attempt=2))
                for t in done["tasks"]]
    assert all(restored), [task_log(done, t["proc_id"], attempt=2)[-500:] for t in done["tasks"]]
    assert {int(m.group(1)) for m in restored} == {saved} == {second["start_step"]}, (saved, second)
    found = digests(done["model_dir"])
    assert len(found) == 6 and len(set(found.values())) == 1, found
    final_step, count, digest = next(iter(found.values()))
    assert (final_step, count) == (str(steps), "6")
    assert load_checkpoint(jax_python, done["model_dir"], steps) == (steps, digest)


PLAIN_INITIALIZE = """
import jax
from jax._src import distributed
jax.distributed.initialize()
print("plain:", jax.process_index(), jax.process_count(), distributed.global_state.coordinator_address, flush=True)
jax.distributed.shutdown()
"""


def test_plain_initialize_uses_tfslurms_coordinator_not_jaxs_slurm_guess(service, jax_python):
    # No arguments: JAX reads JAX_COORDINATOR_ADDRESS itself, and its Slurm
    # detection fills only the count and the id (docs/jax.md), so the
    # coordinator is process 0's reserved port, not 61440 + job id % 4096.
    spec = jax_spec(jax_python, "jax-plain", [], nodes=2, tasks_per_node=2)
    spec["command"] = [jax_python, "-c", PLAIN_INITIALIZE]
    del spec["workdir"]
    assert service.post("/experiments", spec)[0] == 201
    done = wait_ended(service, "jax-plain", 240)
    assert done["state"] == "succeeded", done["reason"]
    coordinator = done["tasks"][0]["address"]  # JAX's guess would be node1:<61440 + job id % 4096>
    for t in done["tasks"]:
        log = task_log(done, t["proc_id"])
        assert f"plain: {t['index']} 4 {coordinator}" in log, log[-2000:]


def test_fields_that_do_not_apply_to_jax_are_refused_and_nothing_is_stored(service, jax_python):
    cases = {
        "cluster": {"cluster": {"worker": 6}},
        "placement": {"placement": "spread"},
        "success": {"success": "chief"},
        "roles": {"roles": {"worker": {"nodes": 1}}},
        "pytorch": {"pytorch": {"omp_num_threads": 1}},
        "env.JAX_COORDINATOR_ADDRESS": {"env": {"JAX_COORDINATOR_ADDRESS": "node1:1234"}},
        "env.JAX_PROCESS_ID": {"env": {"JAX_PROCESS_ID": "0"}},
    }
    for n, (field, extra) in enumerate(cases.items()):
        exp_id = f"jax-bad-{n}"
        status, body = service.post("/experiments", jax_spec(jax_python, exp_id, ["--steps", "10"], **extra))
        assert status == 400, (field, body)
        assert [f["field"] for f in body["error"]["fields"]] == [field], body
        reason = body["error"]["fields"][0]["reason"]
        if field.startswith("env."):
            assert "set by tfslurm for every process of a jax experiment" in reason, body
        elif field == "pytorch":
            assert "applies only to framework pytorch; this spec's framework is jax" in reason, body
        else:
            assert "does not apply to framework jax" in reason, body
        assert service.get(f"/experiments/{exp_id}")[0] == 404
    status, body = service.get("/experiments")
    assert status == 200 and not [e for e in body["experiments"] if e["id"].startswith("jax-bad")], body
