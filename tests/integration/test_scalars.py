"""Issue 18, parts 1 and 2: training scalars without changing the program.
Real programs on the local Slurm cluster: a TensorFlow program writes
tf.summary scalars (TensorBoard event files under MODEL_DIR), another writes
JSON lines to $TFSLURM_SCALARS_FILE and restarts once. The chief's agent reads
them; GET /experiments/{id}/metrics and `tfctl metrics` show them."""
import json
import math
import os
import subprocess

from conftest import BIN, wait_for
from test_tensorflow import TF_ENV, tf_python  # noqa: F401 (a fixture)

# A chief and a worker, each writing v2 summaries to two runs (train/, eval/)
# under MODEL_DIR/tb/<role>, and a histogram (not a scalar). The chief's agent
# reads every event file under MODEL_DIR (the directory is shared): the
# worker's are runs of their own, as TensorBoard shows them. Only the chief
# writes a NaN.
TF_PROGRAM = r'''
import os, time
import tensorflow as tf
role = os.environ["TFSLURM_ROLE"]
logdir = os.path.join(os.environ["MODEL_DIR"], "tb", role)
train = tf.summary.create_file_writer(os.path.join(logdir, "train"))
evaluation = tf.summary.create_file_writer(os.path.join(logdir, "eval"))
for step in range(1, 6):
    with train.as_default():
        tf.summary.scalar("loss", 1.0 / step, step=step)
        tf.summary.histogram("weights", tf.random.normal([10]), step=step)
    if step % 2 == 0:
        with evaluation.as_default():
            tf.summary.scalar("accuracy", step / 10.0, step=step)
    train.flush()
    evaluation.flush()
    time.sleep(0.3)
if role == "chief":
    with train.as_default():
        tf.summary.scalar("loss", float("nan"), step=6)  # a diverged step
    train.flush()
print("scalars written", flush=True)
'''


def test_tf_summary_scalars_of_the_chief_are_served_by_get_and_tfctl(service, tf_python, tmp_path):
    program = tmp_path / "summaries.py"
    program.write_text(TF_PROGRAM)
    spec = {"id": "scalars-tf", "command": [tf_python, str(program)], "env": dict(TF_ENV),
            "cluster": {"chief": 1, "worker": 1}, "success": "chief",
            "resources": {"partition": "debug", "nodes": 1, "tasks_per_node": 2, "time_limit": "00:10:00"}}
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    done = service.wait_state("scalars-tf", ("succeeded", "failed"), timeout=180)
    assert done["state"] == "succeeded", done["reason"]

    status, m = service.get("/experiments/scalars-tf/metrics")
    assert status == 200, m
    by_tag = {s["tag"]: s for s in m["series"]}
    assert sorted(by_tag) == ["tb/chief/eval/accuracy", "tb/chief/train/loss", "tb/worker/eval/accuracy",
                              "tb/worker/train/loss"], sorted(by_tag)
    assert by_tag["tb/worker/train/loss"]["step"] == [1, 2, 3, 4, 5]
    loss = by_tag["tb/chief/train/loss"]
    assert loss["step"] == [1, 2, 3, 4, 5, 6]
    # float32 as TF wrote them; the NaN of step 6 is kept as null.
    assert [round(v, 6) for v in loss["value"][:5]] == [1.0, 0.5, 0.333333, 0.25, 0.2]
    assert loss["value"][5] is None
    assert loss["attempt"] == [1] * 6
    assert all(0 < b - a < 60 for a, b in zip(loss["wall_time"], loss["wall_time"][1:]))
    accuracy = by_tag["tb/chief/eval/accuracy"]
    # tf.summary.scalar stores float32 whatever the dtype it is given.
    assert accuracy["step"] == [2, 4] and [round(v, 6) for v in accuracy["value"]] == [0.2, 0.4], accuracy
    tags = {t["tag"]: t for t in m["tags"]}
    assert tags["tb/chief/train/loss"]["last"]["step"] == 6
    assert tags["tb/chief/train/loss"]["points"] == tags["tb/chief/train/loss"]["reported"] == 6
    assert m["steps_per_second"]["tag"] == "tb/chief/train/loss"
    assert all(v > 0 for v in m["steps_per_second"]["value"])
    assert m["tensorboard"]["logdir"] == done["model_dir"]
    assert m["tensorboard"]["command"] == f"tensorboard --logdir '{done['model_dir']}'"

    status, only = service.get("/experiments/scalars-tf/metrics?tag=tb/chief/eval/accuracy")
    assert status == 200 and [s["tag"] for s in only["series"]] == ["tb/chief/eval/accuracy"], only

    env = dict(os.environ, HOME=str(tmp_path), TFSLURM_URL=service.url)
    out = subprocess.run([os.path.join(BIN, "tfctl"), "metrics", "scalars-tf"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["TAG", "STEP", "VALUE", "ATTEMPT", "POINTS"], out.stdout
    assert lines[1].split() == ["tb/chief/eval/accuracy", "4", "0.4", "1", "2"], out.stdout
    assert lines[2].split() == ["tb/chief/train/loss", "6", "NaN/inf", "1", "6"], out.stdout
    assert lines[4].split() == ["tb/worker/train/loss", "5", "0.2", "1", "5"], out.stdout
    assert "TensorBoard: tensorboard --logdir" in out.stdout
    out = subprocess.run([os.path.join(BIN, "tfctl"), "metrics", "scalars-tf", "--tag",
                          "tb/chief/train/loss", "-o", "json"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert [s["tag"] for s in json.loads(out.stdout)["series"]] == ["tb/chief/train/loss"]


# JSON lines, no TensorFlow: attempt 1 logs steps 1-3 and fails with a
# retryable exit; attempt 2 logs steps 3-5 (it resumed from step 2). A bad
# line is skipped. Attempt 1's lines are in the file when attempt 2 starts,
# and must not be reported again as attempt 2's. Each attempt writes its
# first two points, waits until the test has seen the service hold them
# (the agent's periodic read), then writes its last point and exits at
# once: only the agent's last read, as the program exits, can see that one.
JSONL_PROGRAM = r'''
import json, os, sys, time
path = os.environ["TFSLURM_SCALARS_FILE"]
attempt = int(os.environ["TFSLURM_ATTEMPT"])
go = f"{sys.argv[1]}-{attempt}"
steps = [1, 2, 3] if attempt == 1 else [3, 4, 5]
with open(path, "a") as f:
    for step in steps:
        if step == steps[-1]:
            while not os.path.exists(go):
                time.sleep(0.05)
        f.write(json.dumps({"step": step, "loss": 10.0 * attempt + step, "lr": 0.1}) + "\n")
        if step == 2:
            f.write("not json\n")
        f.flush()
os._exit(137 if attempt == 1 else 0)
'''


def test_json_lines_scalars_across_a_restart_are_marked_by_attempt(service, tmp_path):
    program = tmp_path / "jsonl.py"
    program.write_text(JSONL_PROGRAM)
    go = tmp_path / "go"
    spec = {"id": "scalars-jsonl", "command": ["/usr/bin/python3", str(program), str(go)], "cluster": {"worker": 1},
            "resources": {"partition": "debug", "nodes": 1, "tasks_per_node": 1, "time_limit": "00:10:00"},
            "restart": {"max_restarts": 1, "backoff_s": 1}}
    status, body = service.post("/experiments", spec)
    assert status == 201, body

    def loss_points():
        status, m = service.get("/experiments/scalars-jsonl/metrics")
        assert status == 200, m
        loss = next((s for s in m["series"] if s["tag"] == "loss"), None)
        return list(zip(loss["attempt"], loss["step"], loss["value"])) if loss else []
    for attempt, first_two in ((1, [(1, 1, 11.0), (1, 2, 12.0)]), (2, [(2, 3, 23.0), (2, 4, 24.0)])):
        wait_for(lambda: first_two[-1] in loss_points(), 120, f"attempt {attempt}'s first points in the service")
        assert loss_points()[-2:] == first_two, loss_points()
        go.with_name(f"go-{attempt}").touch()
    done = service.wait_state("scalars-jsonl", ("succeeded", "failed"), timeout=180)
    assert done["state"] == "succeeded", done["reason"]
    status, m = service.get("/experiments/scalars-jsonl/metrics")
    assert status == 200, m
    loss = next(s for s in m["series"] if s["tag"] == "loss")
    # (1, 3) and (2, 5) were written just before each program's exit.
    assert list(zip(loss["attempt"], loss["step"], loss["value"])) == [
        (1, 1, 11.0), (1, 2, 12.0), (1, 3, 13.0), (2, 3, 23.0), (2, 4, 24.0), (2, 5, 25.0)], loss
    assert sorted(t["tag"] for t in m["tags"]) == ["loss", "lr"]
    assert all(math.isclose(v, 0.1) for s in m["series"] if s["tag"] == "lr" for v in s["value"])


def test_scalars_of_an_unknown_experiment_are_404_and_none_yet_is_empty(service):
    status, body = service.get("/experiments/nobody/metrics")
    assert status == 404, body
    spec = {"id": "scalars-none", "command": ["/bin/true"], "cluster": {"worker": 1},
            "resources": {"partition": "debug", "nodes": 1, "tasks_per_node": 1, "time_limit": "00:05:00"}}
    assert service.post("/experiments", spec)[0] == 201
    service.wait_state("scalars-none", ("succeeded", "failed"), timeout=120)
    status, m = service.get("/experiments/scalars-none/metrics")
    assert status == 200 and m["tags"] == [] and m["series"] == [] and m["steps_per_second"] is None, m
