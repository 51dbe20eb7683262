"""tfslurm.task, the helper inside the training program, on the environments
tfslurm gives each framework's tasks (service/core/attempt_run.cc TaskEnv,
AddTorchEnv, AddJaxEnv)."""
import json
import math
import os
import signal
import subprocess
import sys

import pytest

from tfslurm import task as tasklib
from tfslurm.task import Task, latest_checkpoint_step

TF_CLUSTER = {"chief": ["n1:1"], "ps": ["n1:2", "n2:3"], "worker": ["n2:4", "n3:5"]}


def tf_env(role, index, cluster=TF_CLUSTER, **more):
    env = {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": role, "index": index}}),
           "EXPERIMENT_ID": "e1", "MODEL_DIR": "/m", "TFSLURM_ROLE": role, "TFSLURM_INDEX": str(index),
           "TFSLURM_ATTEMPT": "3", "TFSLURM_PORT": "4444"}
    env.update(more)
    return env


def test_tensorflow_tasks():
    chief = Task(tf_env("chief", 0, TFSLURM_SCALARS_FILE="/m/tfslurm-scalars.jsonl"))
    assert (chief.framework, chief.role, chief.index, chief.is_chief) == ("tensorflow", "chief", 0, True)
    assert (chief.attempt, chief.port, chief.model_dir, chief.experiment_id) == (3, 4444, "/m", "e1")
    assert chief.num_tasks == 5 and chief.name == "chief:0" and chief.under_tfslurm
    worker0 = Task(tf_env("worker", 0))
    assert not worker0.is_chief, "worker 0 reports only without a chief"
    no_chief = {"ps": ["a:1"], "worker": ["b:2", "c:3"]}
    assert Task(tf_env("worker", 0, no_chief)).is_chief
    assert not Task(tf_env("worker", 1, no_chief)).is_chief
    assert Task(tf_env("evaluator", 0)).num_tasks == 6  # outside the cluster, one more task


def test_pytorch_and_jax_tasks():
    torch_env = {"RANK": "3", "WORLD_SIZE": "6", "LOCAL_RANK": "1", "MASTER_ADDR": "n1", "MASTER_PORT": "5",
                 "EXPERIMENT_ID": "e", "MODEL_DIR": "/m", "TFSLURM_ATTEMPT": "2"}
    t = Task(torch_env)
    assert (t.framework, t.role, t.index, t.num_tasks, t.local_rank, t.is_chief) == (
        "pytorch", "rank", 3, 6, 1, False)
    assert Task(dict(torch_env, RANK="0")).is_chief
    jax_env = {"JAX_PROCESS_ID": "0", "JAX_NUM_PROCESSES": "4", "JAX_COORDINATOR_ADDRESS": "n1:7",
               "EXPERIMENT_ID": "e", "MODEL_DIR": "/m", "SLURM_LOCALID": "1"}
    j = Task(jax_env)
    assert (j.framework, j.role, j.index, j.num_tasks, j.is_chief, j.local_rank) == ("jax", "rank", 0, 4, True, 1)


def test_outside_tfslurm_one_task_that_reports(tmp_path):
    t = Task({}, model_dir=str(tmp_path))
    assert (t.framework, t.role, t.index, t.is_chief, t.attempt, t.num_tasks) == (None, "chief", 0, True, 1, 1)
    assert t.model_dir == str(tmp_path) and not t.under_tfslurm
    assert Task({"MODEL_DIR": "/from/env"}, model_dir="/arg").model_dir == "/from/env"
    with pytest.raises(ValueError, match="TFSLURM_ATTEMPT='x' is not an integer"):
        Task({"TFSLURM_ATTEMPT": "x"})


def test_start_step_follows_tfslurms_checkpoint_rules(tmp_path):
    d = str(tmp_path)
    assert latest_checkpoint_step(d) is None
    # PyTorch: <name>-<step>.pt (or .pth, or _), the largest step; others are not checkpoints.
    for name in ["ckpt-100.pt", "ckpt-250.pth", "model_30.pt", "ckpt-900.pt.tmp", "12.pt", "ckpt.pt",
                 "-5.pt", "ckpt-1234567890123456789.pt"]:
        (tmp_path / name).write_text("")
    assert latest_checkpoint_step(d, "pytorch") == 250
    # JAX: <step>/ directories whole (a file of that name, or Orbax's tmp, is not one).
    (tmp_path / "300").mkdir()
    (tmp_path / "400.orbax-checkpoint-tmp").mkdir()
    (tmp_path / "500").write_text("a file")
    assert latest_checkpoint_step(d, "jax") == 300
    assert latest_checkpoint_step(d) == 300
    # TensorFlow: the state file's model_checkpoint_path wins, whatever else is there.
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-1200"\n'
                                         'all_model_checkpoint_paths: "model.ckpt-1300"\n')
    assert latest_checkpoint_step(d) == 1200 == latest_checkpoint_step(d, "tensorflow")
    assert Task({"MODEL_DIR": d, "TF_CONFIG": json.dumps({"cluster": {"worker": ["a:1"]},
                                                           "task": {"type": "worker", "index": 0}})}).start_step == 1200
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt"\n')
    assert latest_checkpoint_step(d, "tensorflow") is None
    assert Task({"MODEL_DIR": str(tmp_path / "absent")}).start_step == 0


def read_lines(path):
    return [json.loads(line) for line in open(path)]


def test_report_writes_the_scalars_file_only_on_the_reporting_task(tmp_path):
    path = tmp_path / "sub" / "tfslurm-scalars.jsonl"
    t = Task(tf_env("chief", 0, TFSLURM_SCALARS_FILE=str(path)))
    assert t.report(10, loss=0.5, accuracy=1, lr=float("nan"))
    assert t.report(20, loss=float("inf"))
    lines = read_lines(path)
    assert [(x["step"], x["loss"]) for x in lines] == [(10, 0.5), (20, math.inf)]
    assert lines[0]["accuracy"] == 1.0 and math.isnan(lines[0]["lr"])
    assert all(isinstance(x["wall_time"], float) for x in lines)
    # The agent's reader (agent/scalars_jsonl.cc) takes NaN and Infinity as Python writes them.
    assert "NaN" in path.read_text() and "Infinity" in path.read_text()
    worker = Task(tf_env("worker", 1))
    assert worker.report(10, loss=1.0) is False


def test_report_refuses_what_the_service_would_drop(tmp_path):
    t = Task(tf_env("chief", 0, TFSLURM_SCALARS_FILE=str(tmp_path / "s.jsonl")))
    with pytest.raises(TypeError, match="scalar 'loss' must be a number, got 'high'"):
        t.report(1, loss="high")
    with pytest.raises(TypeError):
        t.report(1.5, loss=1.0)  # a step is an integer
    with pytest.raises(ValueError, match=r"U\+202E is not allowed"):
        t.report(1, **{"lo\u202ess": 1.0})
    with pytest.raises(ValueError, match=r"U\+200B is not allowed"):
        t.report(1, **{"lo\u200bss": 1.0})
    with pytest.raises(ValueError, match="1 to 256 bytes"):
        t.report(1, **{"x" * 257: 1.0})
    assert not (tmp_path / "s.jsonl").exists()


class FakeScalar:
    """A framework's 0-d tensor: float() works."""
    def __float__(self):
        return 0.25


def test_report_takes_framework_scalars(tmp_path):
    t = Task(tf_env("chief", 0, TFSLURM_SCALARS_FILE=str(tmp_path / "s.jsonl")))
    t.report(5, loss=FakeScalar())
    assert read_lines(tmp_path / "s.jsonl")[0]["loss"] == 0.25


def test_the_warning_is_said_once_and_runs_callbacks(tmp_path):
    tasklib._reset_for_tests()
    try:
        calls = []
        previous = []
        signal.signal(signal.SIGUSR1, lambda *a: previous.append(1))  # the program's own
        t = tasklib.init()
        assert tasklib.init() is t and tasklib.current() is t
        t.on_time_limit(lambda: calls.append("cb"))
        assert not t.should_checkpoint() and not t.time_limit_warned
        os.kill(os.getpid(), signal.SIGUSR1)
        assert t.time_limit_warned and t.warning_at is not None
        assert calls == ["cb"] and previous == [1], "callbacks and the program's own handler ran"
        assert t.should_checkpoint() is True
        assert t.should_checkpoint() is False, "once per warning"
        os.kill(os.getpid(), signal.SIGUSR1)
        assert t.should_checkpoint() is True
    finally:
        tasklib._reset_for_tests()
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)


def test_init_from_another_thread_says_why(tmp_path):
    import threading
    tasklib._reset_for_tests()
    errors = []
    thread = threading.Thread(target=lambda: errors.append(_catch(tasklib.init)))
    thread.start()
    thread.join()
    tasklib._reset_for_tests()
    assert "must run in the main thread" in str(errors[0])


def _catch(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return e
    return None


def test_a_program_started_with_sigusr1_ignored_survives_and_then_handles_it(tmp_path):
    # As the agent starts programs (agent/README.md): SIGUSR1 ignored; init() handles it.
    code = ("import os, signal, sys; sys.path[:0] = sys.argv[1:2]\n"
            "from tfslurm import task\n"
            "assert signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN\n"
            "os.kill(os.getpid(), signal.SIGUSR1)  # ignored: before init\n"
            "t = task.init()\n"
            "os.kill(os.getpid(), signal.SIGUSR1)\n"
            "print(t.should_checkpoint(), t.should_checkpoint())\n")
    src = os.path.dirname(os.path.dirname(tasklib.__file__))
    out = subprocess.run([sys.executable, "-c", code, src], stdout=subprocess.PIPE, text=True, check=True,
                         preexec_fn=lambda: signal.signal(signal.SIGUSR1, signal.SIG_IGN))
    assert out.stdout.split() == ["True", "False"]


def test_no_framework_and_no_client_is_imported_until_asked(tmp_path):
    code = ("import sys; sys.path[:0] = sys.argv[1:2]\n"
            "from tfslurm import task\n"
            "t = task.init()\n"
            "t.report(1, loss=1.0); t.should_checkpoint(); t.start_step\n"
            "loaded = [m for m in ('tensorflow', 'torch', 'jax', 'numpy', 'tfslurm.client', 'http.client', 'ssl')"
            " if m in sys.modules]\n"
            "print(loaded)\n")
    src = os.path.dirname(os.path.dirname(tasklib.__file__))
    env = dict(os.environ, TFSLURM_SCALARS_FILE=str(tmp_path / "s.jsonl"), MODEL_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code, src], stdout=subprocess.PIPE, text=True, check=True,
                         env=env)
    assert out.stdout.strip() == "[]"


def test_frameworks_refuse_the_wrong_framework():
    t = Task({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "h", "MASTER_PORT": "1"})
    with pytest.raises(RuntimeError, match="tf_cluster_resolver\\(\\) is for framework: tensorflow; this task "
                                           "runs under framework: pytorch"):
        t.tf_cluster_resolver()
    with pytest.raises(RuntimeError, match="jax_initialize"):
        t.jax_initialize()
    with pytest.raises(RuntimeError, match="there is no TF_CONFIG"):
        Task({}).tf_cluster_resolver()


def test_saving_renames_only_a_complete_checkpoint(tmp_path):
    t = Task({"MODEL_DIR": str(tmp_path)})
    path = t.checkpoint_file(40)
    assert path == str(tmp_path / "ckpt-40.pt")
    with t.saving(path) as tmp:
        assert not tmp.endswith(".pt")  # never a checkpoint's name while written
        open(tmp, "w").write("weights")
    assert open(path).read() == "weights" and os.listdir(tmp_path) == ["ckpt-40.pt"]
    with pytest.raises(RuntimeError):
        with t.saving(t.checkpoint_file(50)) as tmp:
            open(tmp, "w").write("half")
            raise RuntimeError("killed while saving")
    assert os.listdir(tmp_path) == ["ckpt-40.pt"]
    with t.saving(str(tmp_path / "60")) as tmp:  # a JAX step directory
        os.makedirs(tmp)
        open(os.path.join(tmp, "params.npz"), "w").write("p")
    assert latest_checkpoint_step(str(tmp_path)) == 60


def test_tf_config_too_long_for_the_environment_is_read_from_the_agents_file(tmp_path):
    # Past 131,072 bytes the agent passes TF_CONFIG in a file (agent/tf_config_file.h);
    # its sitecustomize loads it, and Task reads the file itself under python -S or -I.
    workers = ["node%d:%d" % (i // 8, 40000 + i % 8) for i in range(1, 16384)]
    path = tmp_path / "tf_config.json"
    path.write_text(json.dumps({"cluster": {"chief": ["node0:40000"], "worker": workers},
                                "task": {"type": "worker", "index": 7}}))
    task = Task({"TFSLURM_TF_CONFIG_FILE": str(path), "MODEL_DIR": "/m"})
    assert (task.framework, task.role, task.index, task.num_tasks) == ("tensorflow", "worker", 7, 16384)
    # A TF_CONFIG in the environment wins over a file.
    small = tf_env("chief", 0, TFSLURM_TF_CONFIG_FILE=str(path))
    assert (Task(small).role, Task(small).num_tasks) == ("chief", 5)
