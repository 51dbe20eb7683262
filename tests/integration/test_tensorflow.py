"""Issue 14: real TensorFlow on the real local Slurm cluster.

Every test runs a real TF program (examples/mnist_tf, mwms_tf, tf1_ps) with
the TensorFlow that deploy/install-tf.sh installs (tests/run.sh runs it and
exports TFSLURM_TF_PYTHON), and asserts on what TF itself did (its logs, its
checkpoints, the sockets its gRPC servers listen on), not only on tfslurm's
states.
"""
import glob
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import REPO, program_pid, resumed_after, scontrol_job, wait_for
from helpers import hosts

# Quiet TF's C++ INFO lines; one intra-op thread per process, since up to six
# TF processes share this machine's 2 cores.
TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_NUM_INTRAOP_THREADS": "1"}


@pytest.fixture(scope="module")
def tf_python():
    python = os.environ.get("TFSLURM_TF_PYTHON", "/opt/tfslurm/venv-tf/bin/python")
    if not os.access(python, os.X_OK):
        pytest.fail(f"no TensorFlow python at {python}: run deploy/install-tf.sh (tests/run.sh does) "
                    "and set TFSLURM_TF_PYTHON to the path it prints")
    return python


def tf_spec(tf_python, exp_id, example, args, cluster, nodes, tasks_per_node=2, restart=None, **extra):
    spec = {
        "id": exp_id,
        "command": [tf_python, os.path.join(REPO, "examples", example, "train.py")] + list(args),
        "workdir": os.path.join(REPO, "examples", example),
        "env": dict(TF_ENV),
        "cluster": cluster,
        "resources": {"partition": "debug", "nodes": nodes, "tasks_per_node": tasks_per_node,
                      "time_limit": "00:10:00"},
        "restart": restart or {"max_restarts": 0},
    }
    spec.update(extra)
    return spec


def ps_spec(tf_python, exp_id, steps, extra_args=(), **extra):
    """examples/mnist_tf: 1 chief, 2 ps, 2 workers, 1 evaluator over 3 nodes x 2 tasks."""
    args = ["--data", "synthetic", "--steps", str(steps), "--checkpoint-every", "50",
            "--steps-per-dispatch", "25", "--eval-interval", "1"] + list(extra_args)
    return tf_spec(tf_python, exp_id, "mnist_tf", args, {"chief": 1, "ps": 2, "worker": 2, "evaluator": 1},
                   nodes=3, success="chief", **extra)


def task_log(exp, proc, attempt=1):
    path = os.path.join(exp["model_dir"], "logs", f"attempt-{attempt}", f"task-{proc}.out")
    return open(path, errors="replace").read() if os.path.exists(path) else ""


def proc_of(exp, role, index=0):
    return next(t["proc_id"] for t in exp["tasks"] if t["role"] == role and t["index"] == index)


def wait_ended(service, exp_id, timeout):
    """Waits for the experiment to succeed or fail; on a timeout, says what each
    task of its current attempt was doing (its state and the tail of its
    output). Every framework's tests use it: a task is role:index (rank:3,
    process:3 for PyTorch and JAX)."""
    try:
        return service.wait_state(exp_id, ("succeeded", "failed"), timeout=timeout)
    except AssertionError as timed_out:
        exp = service.experiment(exp_id)
        tails = "\n".join(f"--- {t['role']}:{t['index']} ({t['state']}):\n"
                          f"{task_log(exp, t['proc_id'], exp['attempt'])[-1500:]}" for t in exp["tasks"])
        raise AssertionError(f"{timed_out}\nstate {exp['state']}: {exp['reason']}\n{tails}") from None


def all_ended(service, exp_id):
    return wait_for(lambda: (lambda e: e if all(t["state"] != "running" for t in e["tasks"]) else None)(
        service.experiment(exp_id)), 60, f"every task of {exp_id} to end")


def job_final_state(conf, job_id):
    return wait_for(lambda: (lambda j: j.get("JobState") if j.get("JobState") not in (
        None, "RUNNING", "PENDING", "COMPLETING") else None)(scontrol_job(conf, job_id)), 60,
        f"job {job_id} to end")


def latest_checkpoint(tf_python, model_dir):
    """What TensorFlow itself says is the latest checkpoint in model_dir."""
    out = subprocess.run([tf_python, "-c", "import sys, tensorflow as tf; print(tf.train.latest_checkpoint(sys.argv[1]))",
                          model_dir], env=dict(os.environ, **TF_ENV), stdout=subprocess.PIPE, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def wait_checkpoint(service, exp_id, step):
    """Waits until the chief's agent has reported a checkpoint at step or later."""
    return wait_for(lambda: (lambda e: e if e["checkpoint"] and e["checkpoint"]["step"] >= step else None)(
        service.experiment(exp_id)), 240, f"a checkpoint of {exp_id} at step {step} or later")


def listeners(port, conf, node):
    """(pid, local address) of every TCP socket listening on port on `node`, from ss."""
    found = []
    for line in hosts.ss(conf, node, ["-Hltnp", f"sport = :{port}"]).splitlines():
        fields = line.split()
        pids = re.findall(r"pid=(\d+)", line)
        found.append((int(pids[0]) if pids else None, fields[3]))
    return found


def test_tf2_parameter_server_strategy_chief_decides_and_the_rest_are_reaped(service, slurm_cluster, tf_python):
    steps = 300
    status, body = service.post("/experiments", ps_spec(tf_python, "tf-ps", steps))
    assert status == 201, body
    exp = wait_for(lambda: (lambda e: e if "step=" in task_log(e, proc_of(e, "chief")) else None)(
        service.experiment("tf-ps")), 180, "the chief's first training step")

    # TF's own gRPC server, with TF's defaults (no TF_GRPC_REUSE_PORT), listens
    # on the port the agent reserved and reported: the only listener there,
    # and it is the program, not the agent.
    for t in exp["tasks"]:
        if t["role"] not in ("ps", "worker"):
            continue
        port = int(t["address"].rsplit(":", 1)[1])
        pid = program_pid("tf-ps", t["role"], t["index"])
        assert pid, t
        assert [p for p, _ in listeners(port, slurm_cluster, t["node"])] == [pid], \
            (t, listeners(port, slurm_cluster, t["node"]))
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        assert not any(v.startswith(b"TF_GRPC_REUSE_PORT=") for v in env), t

    done = wait_ended(service, "tf-ps", 300)
    assert done["state"] == "succeeded", done["reason"]
    assert "the chief exited 0" in done["reason"], done["reason"]
    done = all_ended(service, "tf-ps")
    states = {f'{t["role"]}:{t["index"]}': t["state"] for t in done["tasks"]}
    assert states == {"chief:0": "succeeded", "ps:0": "reaped", "ps:1": "reaped", "worker:0": "reaped",
                      "worker:1": "reaped", "evaluator:0": "reaped"}, states

    chief_log = task_log(done, proc_of(done, "chief"))
    assert f"mnist_tf: done step={steps}" in chief_log, chief_log[-2000:]
    assert "mnist_tf: role=evaluator index=0" in task_log(done, proc_of(done, "evaluator"))
    evaluations = re.findall(r"mnist_tf: eval step=(\d+) accuracy=([0-9.]+)", task_log(done, proc_of(done, "evaluator")))
    assert evaluations, task_log(done, proc_of(done, "evaluator"))[-2000:]
    assert all(int(step) > 0 for step, _ in evaluations), evaluations
    # The checkpoint TF wrote (CheckpointManager), as TF reads it back and as
    # the agent's watcher reported it.
    assert latest_checkpoint(tf_python, done["model_dir"]) == os.path.join(done["model_dir"], f"model.ckpt-{steps}")
    assert done["checkpoint"]["step"] == steps, done["checkpoint"]
    assert job_final_state(slurm_cluster, done["slurm_job_id"]) == "COMPLETED"

    # The tf.summary scalars TF wrote (the chief's loss, the evaluator's
    # accuracy, both under MODEL_DIR/tensorboard), as the chief's agent read
    # them: the same steps and values as the logs print.
    status, metrics = service.get("/experiments/tf-ps/metrics")
    assert status == 200, metrics
    series = {s["tag"]: s for s in metrics["series"]}
    logged = [(int(st), float(v)) for st, v in re.findall(r"mnist_tf: step=(\d+) loss=([0-9.]+)", chief_log)]
    loss = series["tensorboard/train/loss"]
    # (float32 in the event file, 4 decimals in the log)
    assert loss["step"] == [st for st, _ in logged], (loss, logged)
    assert all(abs(v - lv) < 6e-5 for v, (_, lv) in zip(loss["value"], logged)), (loss, logged)
    # mnist_tf's evaluator writes one: a series that is missing or empty is a
    # failure, not a pass over nothing.
    assert "tensorboard/eval/accuracy" in series, sorted(series)
    accuracy = series["tensorboard/eval/accuracy"]
    assert accuracy["step"], accuracy
    evaluated = {int(st): float(a) for st, a in evaluations}
    assert set(accuracy["step"]) <= set(evaluated), (accuracy, evaluations)
    assert all(abs(v - evaluated[st]) < 6e-5 for st, v in zip(accuracy["step"], accuracy["value"])), \
        (accuracy, evaluations)


def test_tf2_multi_worker_mirrored_every_worker_exits_0_with_equal_variables(service, slurm_cluster, tf_python):
    steps = 100
    spec = tf_spec(tf_python, "tf-mwms", "mwms_tf", ["--steps", str(steps), "--checkpoint-every", "50"],
                   {"worker": 4}, nodes=2)
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    done = wait_ended(service, "tf-mwms", 300)
    assert done["state"] == "succeeded", done["reason"]
    assert sorted(t["state"] for t in done["tasks"]) == ["succeeded"] * 4, done["tasks"]
    assert {t["node"] for t in done["tasks"]} == {"node1", "node2"}, done["tasks"]
    for t in done["tasks"]:
        assert f"mwms_tf: role=worker index={t['index']} workers=4 " in task_log(done, t["proc_id"])
    # Each worker trained on its own shard; only a real all-reduce leaves
    # their variables equal.
    digests = {}
    for path in glob.glob(os.path.join(done["model_dir"], "digests", "worker-*.txt")):
        digests[os.path.basename(path)] = open(path).read().split()
    assert len(digests) == 4, digests
    assert len({tuple(d) for d in digests.values()}) == 1, digests
    assert next(iter(digests.values()))[0] == str(steps)
    assert done["checkpoint"]["step"] == steps, done["checkpoint"]
    assert job_final_state(slurm_cluster, done["slurm_job_id"]) == "COMPLETED"


def test_tf1_servers_between_graph_monitored_training_session(service, slurm_cluster, tf_python):
    steps = 300
    spec = tf_spec(tf_python, "tf1-ps", "tf1_ps", ["--steps", str(steps), "--checkpoint-every", "100"],
                   {"ps": 2, "worker": 2}, nodes=2)
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    done = wait_ended(service, "tf1-ps", 300)
    assert done["state"] == "succeeded", done["reason"]
    assert "every worker exited 0" in done["reason"], done["reason"]
    done = all_ended(service, "tf1-ps")
    states = sorted(f'{t["role"]}:{t["state"]}' for t in done["tasks"])
    assert states == ["ps:reaped", "ps:reaped", "worker:succeeded", "worker:succeeded"], states
    for t in done["tasks"]:
        if t["role"] == "worker":
            assert re.search(r"tf1_ps: done step=\d+", task_log(done, t["proc_id"])), task_log(done, t["proc_id"])[-2000:]
    # The Saver's checkpoint (model.ckpt-<global step>, absolute paths in the
    # state file), as TF reads it and as tfslurm reported it.
    latest = latest_checkpoint(tf_python, done["model_dir"])
    step = int(re.fullmatch(r".*/model\.ckpt-(\d+)", latest).group(1))
    assert step >= steps, latest
    assert done["checkpoint"]["step"] == step, (done["checkpoint"], latest)
    assert job_final_state(slurm_cluster, done["slurm_job_id"]) == "COMPLETED"


def test_chief_killed_restarts_and_tf_restores_the_latest_checkpoint(service, slurm_cluster, tf_python):
    steps = 600
    spec = ps_spec(tf_python, "tf-kill9", steps, restart={"max_restarts": 1, "on": ["retryable_exit"], "backoff_s": 1})
    assert service.post("/experiments", spec)[0] == 201
    wait_checkpoint(service, "tf-kill9", 50)
    pid = wait_for(lambda: program_pid("tf-kill9", "chief", 0), 30, "the chief's program")
    os.kill(pid, signal.SIGKILL)
    killed = time.time()
    done = wait_ended(service, "tf-kill9", 360)
    assert done["state"] == "succeeded", done["reason"]
    first, second = done["attempts"]
    assert first["end_reason"] == "retryable_exit" and "chief:0" in first["reason"] and "signal 9" in first["reason"], first
    # restart.in_allocation (the default): the next attempt ran in the same job.
    assert second["in_place"] and second["slurm_job_id"] == first["slurm_job_id"], done["attempts"]
    assert job_final_state(slurm_cluster, first["slurm_job_id"]) == "COMPLETED"
    chief_log = task_log(done, proc_of(done, "chief"), attempt=2)
    restored = re.search(r"mnist_tf: restored step=(\d+) path=(\S+)", chief_log)
    assert restored and int(restored.group(1)) > 0, chief_log[-2000:]
    start = int(re.search(r"attempt=2 start_step=(\d+)", chief_log).group(1))
    assert start == int(restored.group(1)) == second["start_step"], (start, restored.groups(), second)
    assert f"mnist_tf: done step={steps}" in chief_log
    assert latest_checkpoint(tf_python, done["model_dir"]).endswith(f"model.ckpt-{steps}")
    resumed = resumed_after(done, 2, killed)
    assert resumed is not None and resumed < 60, resumed
    print(f"tf-kill9: attempt 2 (in place) checkpointed past its start step {resumed:.2f} s after the chief's kill -9")


def test_time_limit_signal_reaches_tf_which_saves_and_the_next_attempt_starts_there(service, tf_python):
    # One-minute attempts; SIGUSR1 5 to 35 s before the end (docs/restarts.md:
    # slurmctld's 30 s check period), so never while the chief still imports
    # TF. The target is out of reach: the test ends the experiment once
    # attempt 2 has started.
    spec = ps_spec(tf_python, "tf-limit", 10 ** 7, restart={"max_restarts": 1, "on": ["timeout"], "backoff_s": 1},
                   checkpoint={"signal_grace_s": 5})
    spec["resources"]["time_limit"] = "1"
    assert service.post("/experiments", spec)[0] == 201
    try:
        e = wait_for(lambda: (lambda x: x if len(x["attempts"]) == 2 and "start_step=" in task_log(
            x, proc_of(x, "chief"), attempt=2) else None)(service.experiment("tf-limit")), 300,
            "attempt 2's chief to start")
    except AssertionError as timed_out:
        x = service.experiment("tf-limit")
        chief = proc_of(x, "chief")
        raise AssertionError(f"{timed_out}\nstate {x['state']}: {x['reason']}\nattempts: {x['attempts']}\n" + "\n".join(
            f"--- chief, attempt {n}:\n{task_log(x, chief, attempt=n)[-2000:]}" for n in (1, 2))) from None
    first = e["attempts"][0]
    assert first["end_reason"] == "timeout" and first["slurm_state"] == "TIMEOUT", first
    first_log = task_log(e, proc_of(e, "chief"), attempt=1)
    on_signal = [int(x) for x in re.findall(r"mnist_tf: checkpoint on signal signal=SIGUSR1 step=(\d+)", first_log)]
    assert on_signal and on_signal[0] > 0, first_log[-3000:]
    start = int(re.search(r"attempt=2 start_step=(\d+)", task_log(e, proc_of(e, "chief"), attempt=2)).group(1))
    # SIGTERM at the limit may have saved once more after the SIGUSR1 save.
    assert start >= on_signal[0] > 0, (start, on_signal)
    assert service.request("DELETE", "/experiments/tf-limit")[0] in (200, 202)
    service.wait_state("tf-limit", "cancelled", timeout=60)


def test_chief_raising_fails_the_attempt_at_once_with_its_traceback_in_the_log(service_factory, slurm_cluster,
                                                                                  tf_python):
    # tfslurmd cancels a failed attempt's job only if its step has not ended
    # by the reap deadline (the shutdown grace + 5 s); with a grace of 60 s
    # the step always ends first, on its own, so Slurm's end state is the
    # chief's exit through srun and nothing else.
    service = service_factory(["--shutdown-grace-ms", "60000"])
    spec = ps_spec(tf_python, "tf-raise", 10 ** 6, extra_args=["--fail-at-step", "50"])
    assert service.post("/experiments", spec)[0] == 201
    failed = wait_ended(service, "tf-raise", 240)
    assert failed["state"] == "failed", failed["reason"]
    assert "chief:0" in failed["reason"] and "exited with code 1" in failed["reason"], failed["reason"]
    chief_log = task_log(failed, proc_of(failed, "chief"))
    assert "Traceback (most recent call last)" in chief_log, chief_log[-2000:]
    assert "RuntimeError: injected failure at step 50" in chief_log, chief_log[-2000:]
    failed = all_ended(service, "tf-raise")
    assert sorted(t["state"] for t in failed["tasks"]) == ["failed"] + ["reaped"] * 5, failed["tasks"]
    # The batch script execs srun, which exits with its tasks' highest status:
    # the chief's agent's 1 (the program's own, agent/README.md).
    assert job_final_state(slurm_cluster, failed["slurm_job_id"]) == "FAILED"
    assert scontrol_job(slurm_cluster, failed["slurm_job_id"])["ExitCode"] == "1:0"


# Bounds on a lone worker's recovery (tfslurm restarts its program, which
# imports TensorFlow and serves again; the chief's coordinator then takes it
# back): from the kill when nothing holds the chief, and from the chief's
# resumption when it was held. bench/lone_restart.sh measures about 5 s from
# the kill on an idle machine, and this test 10.5 s at a load of 20 on two
# cores: TensorFlow's import is most of it.
RECOVERY_AFTER_KILL_S = 45
RECOVERY_AFTER_RESUME_S = 20


@pytest.mark.parametrize("hold_chief", [True, False], ids=["chief-held", "chief-free"])
def test_a_killed_worker_restarts_alone_and_the_chief_trains_on(service, tf_python, hold_chief):
    """TF2's ClusterCoordinator survives a worker's loss: it retries the lost
    worker's closures on the others and waits for the worker to answer again
    at its address (WorkerPreemptionHandler in cluster_coordinator.py). So
    tfslurm restarts only that worker's program, on its node and port, and the
    attempt runs on to the chief's success (restart.max_task_restarts).

    chief-free: nothing holds the chief, whose runway past the kill (some 65
    dispatch rounds, each followed by a 1 s --dispatch-pause) is longer than
    the bound: TF must have the worker back within RECOVERY_AFTER_KILL_S of
    its kill. That is the race CI once lost (the chief reached its last step
    before TF took the worker back); a slower recovery now fails on the
    bound, with the chief still training. The run is then cancelled: the
    rest is chief-held's.
    chief-held: the chief is stopped (SIGSTOP) once it has trained 50 steps
    without the worker, until the worker's new program serves, so that the
    whole run is seen to its success. TF caps gRPC's reconnect backoff at 1 s
    (GetChannelArguments in
    tensorflow/core/distributed_runtime/rpc/grpc_channel.cc): the chief must
    have the worker back within RECOVERY_AFTER_RESUME_S of resuming."""
    exp_id = "tf-lostworker" if hold_chief else "tf-lostworker-free"
    steps = 800 if hold_chief else 1700
    extra = [] if hold_chief else ["--dispatch-pause", "1"]
    assert service.post("/experiments", ps_spec(tf_python, exp_id, steps, extra_args=extra))[0] == 201
    wait_checkpoint(service, exp_id, 50)
    before = service.experiment(exp_id)
    chief_proc = proc_of(before, "chief")
    worker1 = next(t for t in before["tasks"] if t["role"] == "worker" and t["index"] == 1)

    def chief_log():
        return task_log(service.experiment(exp_id), chief_proc)

    def recovered_by(deadline, what):
        wait_for(lambda: "Worker /job:worker/replica:0/task:1 has been recovered" in chief_log(),
                 max(deadline - time.monotonic(), 0.1), what, interval=0.2)
        return time.monotonic()

    pid = wait_for(lambda: program_pid(exp_id, "worker", 1), 30, "worker 1's program")
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    again = wait_for(lambda: (lambda p: p if p and p != pid else None)(program_pid(exp_id, "worker", 1)),
                     60, "worker 1's program to start again")
    restarted_in = time.monotonic() - killed_at
    if not hold_chief:
        at = recovered_by(killed_at + RECOVERY_AFTER_KILL_S,
                          f"TF's coordinator to have worker 1 back within {RECOVERY_AFTER_KILL_S} s of its kill")
        assert f"mnist_tf: done step={steps}" not in chief_log(), "the runway was too short: the chief finished"
        # ... and the chief trains on with it, in the same attempt.
        wait_checkpoint(service, exp_id, service.experiment(exp_id)["checkpoint"]["step"] + 50)
        e = service.experiment(exp_id)
        assert len(e["attempts"]) == 1 and e["state"] == "running", (e["state"], e["attempts"])
        restarted = next(t for t in e["tasks"] if t["role"] == "worker" and t["index"] == 1)
        assert restarted["restarts"] == 1 and restarted["address"] == worker1["address"], (worker1, restarted)
        print(f"{exp_id}: worker 1's program ran again {restarted_in:.2f} s after its kill -9 (pid {again}); "
              f"TF had it back {at - killed_at:.2f} s after the kill, the chief not held")
        assert service.request("DELETE", f"/experiments/{exp_id}")[0] in (200, 202)
        service.wait_state(exp_id, "cancelled", timeout=60)
        return

    # The chief trains on without worker 1 ...
    trained_on = wait_checkpoint(service, exp_id, before["checkpoint"]["step"] + 50)["checkpoint"]["step"]
    # ... and is then held until worker 1's new program serves, so that it
    # cannot reach its last step before TF's import on a loaded machine lets
    # TF take the worker back.
    chief_pid = wait_for(lambda: program_pid(exp_id, "chief", 0), 30, "the chief's program")
    os.kill(chief_pid, signal.SIGSTOP)
    try:
        wait_for(lambda: task_log(service.experiment(exp_id), proc_of(before, "worker", 1)).count(
            "role=worker index=1 serving") == 2, 120, "worker 1's new program to serve")
    finally:
        os.kill(chief_pid, signal.SIGCONT)
        resumed_at = time.monotonic()
    at = recovered_by(resumed_at + RECOVERY_AFTER_RESUME_S,
                      f"TF's coordinator to have worker 1 back within {RECOVERY_AFTER_RESUME_S} s of the chief's "
                      "resumption")
    # The evaluator, a side-car nobody waits for, restarts alone the same way.
    evaluator_pid = wait_for(lambda: program_pid(exp_id, "evaluator", 0), 30, "the evaluator's program")
    os.kill(evaluator_pid, signal.SIGKILL)
    wait_for(lambda: (lambda p: p if p and p != evaluator_pid else None)(program_pid(exp_id, "evaluator", 0)),
             60, "the evaluator's program to start again")
    done = wait_ended(service, exp_id, 300)
    assert done["state"] == "succeeded", done["reason"]
    done = all_ended(service, exp_id)
    assert len(done["attempts"]) == 1, done["attempts"]
    after = next(t for t in done["tasks"] if t["role"] == "worker" and t["index"] == 1)
    assert after["restarts"] == 1, after
    assert after["address"] == worker1["address"] and after["node"] == worker1["node"], (worker1, after)
    assert after["state"] == "reaped", after  # ended by the Shutdown at the chief's success, as every worker
    evaluator = next(t for t in done["tasks"] if t["role"] == "evaluator")
    assert evaluator["restarts"] == 1, evaluator
    whys = [e["why"] for e in done["events"] if e["what"] == "restarted_alone"]
    assert len(whys) == 2 and whys[0].startswith("worker:1 ") and "signal 9" in whys[0], whys
    assert f"alone at {worker1['address']} (restart 1 of 3 in this attempt)" in whys[0], whys
    assert whys[1].startswith("evaluator:0 ") and "(restart 2 of 3 in this attempt)" in whys[1], whys
    final_log = task_log(done, proc_of(done, "chief"))
    assert f"mnist_tf: done step={steps}" in final_log, final_log[-2000:]
    # TF saw the worker go, trained on, and took it back at the same address.
    assert "remote target /job:worker/replica:0/task:1" in final_log, final_log[-3000:]
    assert "Worker /job:worker/replica:0/task:1 has been recovered" in final_log, final_log[-3000:]
    worker_log = task_log(done, proc_of(done, "worker", 1))
    assert worker_log.count("role=worker index=1 serving") == 2, worker_log[-3000:]
    port = worker1["address"].rsplit(":", 1)[1]
    assert f"restarts this task's program alone in attempt 1, on the same port {port}" in worker_log, \
        worker_log[-3000:]
    print(f"{exp_id}: worker 1's program ran again {restarted_in:.2f} s after its kill -9 (pid {again}); "
          f"the chief trained on to step {trained_on} without it; TF had it back {at - resumed_at:.2f} s "
          f"after the chief resumed")
