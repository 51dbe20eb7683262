"""Issue 47: the Python package against a real tfslurmd and the local Slurm
cluster. The client (client/python, from the tree) drives real TensorFlow,
PyTorch and JAX runs written with tfslurm.task, waits for them, reads their
metrics, resumes them with a longer time limit and runs a small sweep; the
helper's time-limit hook saves a checkpoint on Slurm's warning and the next
attempt starts from it; a plain script with no handler under the same
one-minute limit ends its attempts as `timeout` and chains them, instead of
dying of signal 10 (issue 48 point 1); a program that sets SIGUSR1 back to
its default and dies of it is told what to do; and the client proves its
user with MUNGE where tfctl does.

The tasks import tfslurm from the tree (PYTHONPATH in the spec's env), as
examples/*/experiment_with_helper.yaml do."""
import io
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, wait_for
from helpers import hosts
from unix_users import ALICE, as_unix, ok, site  # noqa: F401 (site: a fixture)

SRC = os.path.join(REPO, "client", "python", "src")
sys.path.insert(0, SRC)
import tfslurm  # noqa: E402

TORCH_PYTHON = "/usr/bin/python3"
TASK_ENV = {"PYTHONPATH": SRC}


@pytest.fixture(scope="module")
def tf_python():
    python = os.environ.get("TFSLURM_TF_PYTHON", "/opt/tfslurm/venv-tf/bin/python")
    if not os.path.exists(python):
        pytest.fail(f"no TensorFlow python at {python}: run deploy/install-tf.sh (tests/run.sh does) "
                    "and set TFSLURM_TF_PYTHON to the path it prints")
    return python


@pytest.fixture(scope="module")
def jax_python():
    python = os.environ.get("TFSLURM_JAX_PYTHON", "/opt/tfslurm/venv-jax/bin/python")
    if not os.access(python, os.X_OK):
        pytest.fail(f"no JAX python at {python}: run deploy/install-jax.sh (tests/run.sh does) and set "
                    "TFSLURM_JAX_PYTHON to the path it prints")
    return python


def client(service):
    return tfslurm.Client(service.url, config_path="")  # the test's tfslurmd runs --no-auth


def attempt(e, n):
    return next(a for a in e.attempts if a.number == n)


def test_client_runs_tensorflow_and_pytorch_reads_metrics_resumes_longer_and_sweeps(service, tf_python,
                                                                                    jax_python):
    c = client(service)
    # A bad spec first: refused, every field named with its value and what is allowed.
    with pytest.raises(tfslurm.InvalidArgument) as refused:
        c.submit({"command": ["python3"], "cluster": {"worker": 1}, "resources": {"nodes": 0},
                  "placement": "zig"})
    nodes = refused.value.field("resources.nodes")
    assert (nodes.value, nodes.allowed) == ("0", "from 1 to 10000"), refused.value
    assert refused.value.field("placement").allowed == "one of spread | pack", refused.value
    assert c.dry_run({"command": ["python3"], "cluster": {"worker": 1}}, id="dry").job_name == "tfx-dry-a1"

    ddp = tfslurm.ExperimentSpec(
        id="py-ddp", framework="pytorch", workdir=os.path.join(REPO, "examples", "ddp"), env=TASK_ENV,
        command=[TORCH_PYTHON, "train_with_helper.py", "--steps", "100", "--checkpoint-every", "50"],
        resources=tfslurm.Resources(nodes=2, tasks_per_node=1, time_limit="00:05:00"),
        pytorch=tfslurm.PytorchOptions(omp_num_threads=1), restart=tfslurm.RestartPolicy(max_restarts=0))
    tf_spec = {"id": "py-tf", "workdir": os.path.join(REPO, "examples", "mnist_tf"),
               "command": [tf_python, "train_with_helper.py", "--steps", "200", "--steps-per-dispatch", "50",
                           "--checkpoint-every", "100", "--data", "synthetic", "--batch-size", "16"],
               "env": dict(TASK_ENV, TF_CPP_MIN_LOG_LEVEL="2"),
               "cluster": {"chief": 1, "ps": 1, "worker": 1},
               "resources": {"nodes": 1, "tasks_per_node": 3, "time_limit": "00:05:00"},
               "restart": {"max_restarts": 0}}
    sweep_spec = {
        "id": "py-lr",
        "experiment": {"command": ["python3", os.path.join(REPO, "examples/linear_ps/train.py"), "--steps=40",
                                   "--log-every=5", "--checkpoint-every=20", "--step-sleep=0.05"],
                       "workdir": os.path.join(REPO, "examples/linear_ps"), "cluster": {"ps": 1, "worker": 1},
                       "resources": {"nodes": 1, "tasks_per_node": 2, "time_limit": "00:05:00"},
                       "restart": {"max_restarts": 0}},
        "parameters": {"arg.--lr": {"values": [0.1, 0.0001]}},
        "max_concurrent": 2, "objective": {"tag": "loss", "goal": "min"}}
    jax_spec = {"id": "py-jax", "framework": "jax", "workdir": os.path.join(REPO, "examples", "jax"),
                "command": [jax_python, "train_with_helper.py", "--steps", "60", "--checkpoint-every", "30"],
                "env": dict(TASK_ENV, JAX_PLATFORMS="cpu",
                            XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"),
                "resources": {"nodes": 2, "tasks_per_node": 1, "time_limit": "00:05:00"},
                "restart": {"max_restarts": 0}}
    a, b, j = c.submit(ddp), c.submit(tf_spec), c.submit(jax_spec)
    sweep = c.submit_sweep(sweep_spec)
    assert (a.state, b.state, sweep.state) == ("queued", "queued", "running")

    events = io.StringIO()
    a, b = a.wait(out=events, timeout=300, tag="loss"), b.wait(progress=False, timeout=300)
    assert a.succeeded, a.reason
    assert b.succeeded, b.reason
    assert re.search(r"attempt 1  state: \w+ -> succeeded: every rank exited 0", events.getvalue()), \
        events.getvalue()
    j = j.wait(progress=False, timeout=300)
    assert j.succeeded, j.reason
    for e, last in ((a, 100), (b, 200), (j, 60)):
        m = e.metrics()
        points = m.points("loss")
        assert points and points[-1].step == last and all(p.attempt == 1 for p in points), (e.id, points)
        assert e.checkpoint.step == last, e.checkpoint

    # Resumed with a longer limit and more steps: attempt 2 starts from attempt 1's
    # last checkpoint, as the task's start_step said too.
    a = a.resume(time_limit="00:10:00", command=ddp.command[:2] + ["--steps", "150", "--checkpoint-every", "50"])
    b = b.resume(time_limit="00:10:00", set={"command": tf_spec["command"][:3] + ["300"] + tf_spec["command"][4:]})
    assert a.spec_revision == b.spec_revision == 2
    assert a.spec.resources.time_limit == b.spec.resources.time_limit == "00:10:00"
    a, b = a.wait(progress=False, timeout=300), b.wait(progress=False, timeout=300)
    assert a.succeeded and b.succeeded, (a.reason, b.reason)
    assert attempt(a, 2).start_step == 100 and attempt(b, 2).start_step == 200
    assert "ddp-helper: rank=0 local_rank=0 world=2 attempt=2 start_step=100" in a.logs("rank:0", attempt=2)
    assert "role=chief attempt=2 start_step=200 (tfslurm read 200)" in b.logs("chief:0", attempt=2)
    for e, last in ((a, 150), (b, 300)):
        points = e.metrics(["loss"]).points("loss")
        assert points[-1].step == last and points[-1].attempt == 2, (e.id, points[-3:])

    # The log of an ended attempt, followed: the service's chunked follow,
    # ended when the job has; then the experiment deleted with its files.
    followed = "".join(a.follow_logs("rank:0", attempt=1))
    assert "ddp-helper: done step=100" in followed and followed == a.logs("rank:0", attempt=1), followed[-500:]
    deleted = a.delete(files=True)
    assert deleted.deleted and deleted.entries_removed > 0 and deleted.files_removed_from.endswith("/py-ddp")
    with pytest.raises(tfslurm.NotFound, match="no experiment with id 'py-ddp'"):
        c.get("py-ddp")

    sweep = c.wait_sweep("py-lr", progress=False, timeout=300)
    assert sweep.state == "completed" and len(sweep.trials) == 2, sweep
    assert sweep.best_trial.params == {"arg.--lr": 0.1}, sweep.best_trial
    assert sweep.best_experiment().succeeded


# The programs of the time-limit test: each trains one step per 0.2 s (a
# target out of reach of a one-minute attempt), checkpoints in TensorFlow's
# state-file layout, and logs where it starts.
HELPER = textwrap.dedent("""
    import os, time
    from tfslurm import task
    t = task.init()  # handles SIGUSR1
    print(f"starts at step {t.start_step} attempt {t.attempt}", flush=True)
    step = t.start_step
    while True:
        step += 1
        time.sleep(0.2)
        t.report(step, loss=1.0 / step)
        if t.should_checkpoint():  # the warning: save now, train on to the limit
            with open(os.path.join(t.model_dir, "checkpoint.tmp"), "w") as f:
                f.write(f'model_checkpoint_path: "model.ckpt-{step}"\\n')
            os.replace(os.path.join(t.model_dir, "checkpoint.tmp"), os.path.join(t.model_dir, "checkpoint"))
            print(f"checkpoint on the warning step={step}", flush=True)
""")
PLAIN = textwrap.dedent("""
    import json, os, re, signal, sys, time
    if len(sys.argv) > 1:  # the program that sets SIGUSR1's default back: it dies of the warning
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    model_dir = os.environ["MODEL_DIR"]
    state = os.path.join(model_dir, "checkpoint")
    step = int(re.search(r"-(\\d+)", open(state).read()).group(1)) if os.path.exists(state) else 0
    print(f"starts at step {step}", flush=True)
    while True:
        step += 1
        time.sleep(0.2)
        if step % 25 == 0:  # no handler: it saves as it goes
            with open(state + ".tmp", "w") as f:
                f.write(f'model_checkpoint_path: "model.ckpt-{step}"\\n')
            os.replace(state + ".tmp", state)
""")


def limited(exp_id, script, *args):
    return {"id": exp_id, "command": ["/usr/bin/python3", script, *args], "env": TASK_ENV,
            "cluster": {"worker": 1}, "resources": {"nodes": 1, "tasks_per_node": 1, "time_limit": "1"},
            "checkpoint": {"signal_grace_s": 10},
            "restart": {"max_restarts": 2, "on": ["timeout"], "backoff_s": 1}}


def test_time_limit_warning_helper_saves_plain_script_times_out_default_action_is_told(service, tmp_path):
    # One-minute attempts, the warning 10 to 40 s before each end (docs/restarts.md).
    # Three experiments at once, one node each.
    for name, text in (("helper.py", HELPER), ("plain.py", PLAIN)):
        (tmp_path / name).write_text(text)
    os.chmod(tmp_path, 0o755)
    c = client(service)
    helper = c.submit(limited("py-helper", str(tmp_path / "helper.py")))
    plain = c.submit(limited("py-plain", str(tmp_path / "plain.py")))
    default = c.submit(limited("py-default", str(tmp_path / "plain.py"), "--default-action"))

    def second_attempt_started(e):
        e = e.refresh()
        try:
            return e if len(e.attempts) >= 2 and "starts at step" in e.logs("worker:0", attempt=2) else None
        except tfslurm.NotFound:  # no output yet
            return None

    try:
        helper = wait_for(lambda: second_attempt_started(helper), 300, "py-helper's attempt 2 to start")
        plain = wait_for(lambda: second_attempt_started(plain), 300, "py-plain's attempt 2 to start")
        default = wait_for(lambda: second_attempt_started(default), 300, "py-default's attempt 2 to start")
    finally:
        for e in (helper, plain, default):
            try:
                e.cancel()
            except tfslurm.FailedPrecondition:
                pass

    # The helper: a checkpoint on the warning, before the limit; attempt 2 starts there.
    first = attempt(helper, 1)
    assert (first.end_reason, first.slurm_state) == ("timeout", "TIMEOUT"), first
    log1 = helper.logs("worker:0", attempt=1)
    saved = [int(s) for s in re.findall(r"checkpoint on the warning step=(\d+)", log1)]
    assert saved, log1[-2000:]
    assert attempt(helper, 2).start_step == saved[-1]
    assert f"starts at step {saved[-1]} attempt 2" in helper.logs("worker:0", attempt=2)

    # The plain script: not killed by the warning, which the agent kept from it
    # (and Slurm's own copy found it ignoring SIGUSR1); its attempt ended at the
    # limit, as a timeout, and the next went on from its last checkpoint.
    first = attempt(plain, 1)
    assert (first.end_reason, first.slurm_state) == ("timeout", "TIMEOUT"), first
    assert "signal 10" not in json.dumps([ev.why for ev in plain.events]), [ev.why for ev in plain.events]
    log1 = plain.logs("worker:0", attempt=1)
    assert "SIGUSR1 (Slurm's warning before the time limit) not passed on: no process of the program catches " \
           "it" in log1, log1[-3000:]
    assert attempt(plain, 2).start_step and attempt(plain, 2).start_step >= 25, plain.attempts
    assert f"starts at step {attempt(plain, 2).start_step}" in plain.logs("worker:0", attempt=2)

    # A program that set SIGUSR1's default action back dies of the warning: a
    # timeout too, and the reason and the event say what it was and what to do.
    first = attempt(default, 1)
    assert first.end_reason == "timeout", first
    told = ("was killed by SIGUSR1 (signal 10), Slurm's warning 10 s before the time limit "
            "(checkpoint.signal_grace_s), which it does not catch")
    assert told in first.reason, first.reason
    assert any(ev.what == "exited" and told in ev.why for ev in default.events), [ev.why for ev in default.events]


def test_the_client_proves_its_user_with_munge_as_tfctl_does(site, tmp_path):  # noqa: F811
    service, socket, homes = site
    # On the login host when the cluster's hosts are apart, as a user runs it.
    url = service.cluster_url or service.url
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {SRC!r})
        import tfslurm
        c = tfslurm.Client({url!r}, munge_socket={socket!r}, config_path="")
        print(c.create_token().user)
        print(c.list().total)
    """)
    r = subprocess.run(hosts.on_host(service.slurm_conf, "login", as_unix(ALICE) + ["/usr/bin/python3", "-c", code]),
                       stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60, cwd=homes[ALICE],
                       env=dict({"PATH": os.environ["PATH"], "HOME": homes[ALICE]},
                                **{k: v for k, v in os.environ.items() if k == "TFSLURM_CACERT"}))
    assert ok(r).split() == [ALICE, "0"]
    # Without munged: the 401 says why no credential went.
    code = code.replace(repr(socket), repr(str(tmp_path / "no-munged.socket")))
    r = subprocess.run(hosts.on_host(service.slurm_conf, "login", as_unix(ALICE) + ["/usr/bin/python3", "-c", code]),
                       stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60, cwd=homes[ALICE],
                       env=dict({"PATH": os.environ["PATH"], "HOME": homes[ALICE]},
                                **{k: v for k, v in os.environ.items() if k == "TFSLURM_CACERT"}))
    assert r.returncode == 1 and "made no credential" in r.stderr, r.stderr
