"""The helper inside a training program that tfslurm runs.

One call gives what the task is and what tfslurm expects of it:

    from tfslurm import task

    t = task.init()                 # reads the environment; installs the SIGUSR1 handler
    step = t.start_step             # the latest checkpoint's step in MODEL_DIR (0 if none)
    while step < steps:
        step += 1
        loss = train_one_step()
        t.report(step, loss=loss)   # the chief's (rank 0's) scalars: dashboard, tfctl metrics
        if step % 500 == 0 or t.should_checkpoint():   # the time-limit warning came
            save(t.model_dir, step)

- who: ``role`` ("chief", "ps", "worker", "evaluator"; "rank" under PyTorch
  and JAX), ``index``, ``is_chief`` (the task that reports checkpoints and
  scalars: the chief, else worker 0; rank 0), ``attempt``, ``num_tasks``,
  ``experiment_id``, ``model_dir``, ``start_step``;
- ``report(step, **scalars)`` appends a line to ``$TFSLURM_SCALARS_FILE``
  (docs/scalars.md), which only the reporting task has; elsewhere it does
  nothing;
- the time-limit warning: Slurm sends SIGUSR1 ``checkpoint.signal_grace_s``
  before the job's time limit (and before a preemption where the site asks
  for it); ``init()`` installs a handler, so the program never dies of it,
  and ``should_checkpoint()`` says once that it came, or ``on_time_limit``
  runs a callback at once;
- frameworks, each imported only when asked for: ``tf_cluster_resolver()``,
  ``torch_process_group()``, ``jax_initialize()``.

Outside tfslurm (a laptop, a test) the same calls work: one task, the chief,
attempt 1, MODEL_DIR as the environment or ``init(model_dir=...)`` says, and
``report`` writes nothing unless TFSLURM_SCALARS_FILE is set.

Nothing here talks to the service or imports the client: a training
environment needs only this file's standard library.
"""

from __future__ import annotations

import json
import operator
import os
import re
import shutil
import signal
import threading
import time
import uuid
from contextlib import contextmanager
from types import FrameType
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

from ._unsafe import is_unsafe

__all__ = ["Task", "init", "latest_checkpoint_step"]

WARNING_SIGNAL = signal.SIGUSR1

# The task that reports checkpoints and scalars is told by its environment;
# these are the variables tfslurm sets (docs/design.md, "The barrier").
_TF_ROLES = ("chief", "ps", "worker", "evaluator")


# ------------------------------------------------------- checkpoint steps
# The rules tfslurm uses to find the step a resumed attempt starts from, so
# that start_step is the step the service shows: schema/checkpoint_name.h
# (PyTorch's <name>-<step>.pt files, JAX's <step>/ directories) and
# service/core/checkpoint_state.cc (TensorFlow's checkpoint state file).

_STATE_LINE = re.compile(r'^\s*model_checkpoint_path\s*:\s*"((?:[^"\\]|\\.)*)"', re.M)
_STATE_STEP = re.compile(r"-(\d{1,18})$")
_TORCH_NAME = re.compile(r"^(.+)[-_](\d{1,18})\.(pt|pth)$")
_JAX_NAME = re.compile(r"^\d{1,18}$")


def tf_checkpoint_step(state_file_text: str) -> Optional[int]:
    """The step of TensorFlow's `checkpoint` state file ("model.ckpt-1200" -> 1200)."""
    m = _STATE_LINE.search(state_file_text)
    if not m:
        return None
    s = _STATE_STEP.search(m.group(1))
    return int(s.group(1)) if s else None


def torch_checkpoint_step(file_name: str) -> Optional[int]:
    """"ckpt-12.pt" -> 12; "ckpt.pt", "12.pt", "ckpt-12.pt.tmp" -> None."""
    m = _TORCH_NAME.match(file_name)
    return int(m.group(2)) if m else None


def jax_checkpoint_step(dir_name: str) -> Optional[int]:
    """An Orbax step directory's name: "1200" -> 1200; "1200.orbax-checkpoint-tmp" -> None."""
    return int(dir_name) if _JAX_NAME.match(dir_name) else None


def latest_checkpoint_step(model_dir: str, framework: Optional[str] = None) -> Optional[int]:
    """The latest checkpoint's step in `model_dir` as tfslurm reads it, or
    None. framework: "tensorflow", "pytorch", "jax", or None for whichever
    layout is there (TensorFlow's state file first)."""
    if framework in (None, "tensorflow"):
        try:
            with open(os.path.join(model_dir, "checkpoint"), encoding="utf-8",
                      errors="replace") as f:
                step = tf_checkpoint_step(f.read())
            if step is not None or framework:
                return step
        except OSError:
            if framework:
                return None
    try:
        names = os.listdir(model_dir)
    except OSError:
        return None
    steps: List[int] = []
    if framework in (None, "pytorch"):
        steps += [s for s in map(torch_checkpoint_step, names) if s is not None]
    if framework in (None, "jax"):
        steps += [s for n in names if (s := jax_checkpoint_step(n)) is not None
                  and os.path.isdir(os.path.join(model_dir, n))]
    return max(steps) if steps else None


# --------------------------------------------------------------- the task

def _int(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an integer") from None


def _check_tag(tag: str) -> None:
    encoded = tag.encode("utf-8", "surrogatepass")
    if not 1 <= len(encoded) <= 256:
        raise ValueError(f"scalar tag {tag!r}: must be 1 to 256 bytes of UTF-8")
    for ch in tag:
        if is_unsafe(ord(ch)):
            raise ValueError(f"scalar tag {tag!r}: U+{ord(ch):04X} is not allowed (control, bidi, "
                             "invisible and line-separator characters are refused, docs/scalars.md)")


class Task:
    """What this task is, read once from the environment tfslurm gave it."""

    def __init__(self, env: Optional[Mapping[str, str]] = None,
                 model_dir: Optional[str] = None) -> None:
        env = dict(os.environ if env is None else env)
        self.env = env
        self.experiment_id: str = env.get("EXPERIMENT_ID", "")
        self.attempt: int = _int(env, "TFSLURM_ATTEMPT", 1)
        self.port: Optional[int] = _int(env, "TFSLURM_PORT", 0) or None
        self.model_dir: str = env.get("MODEL_DIR") or model_dir or os.getcwd()
        self.scalars_file: str = env.get("TFSLURM_SCALARS_FILE", "")
        self.local_rank: int = _int(env, "LOCAL_RANK", _int(env, "SLURM_LOCALID", 0))
        self.tf_config: Dict[str, Any] = {}
        if "TF_CONFIG" not in env and env.get("TFSLURM_TF_CONFIG_FILE"):
            # Too long for the environment (docs/site-deployment.md): the
            # agent's sitecustomize loads it, unless Python ran with -S or -I.
            with open(env["TFSLURM_TF_CONFIG_FILE"], encoding="utf-8") as f:
                env["TF_CONFIG"] = f.read()
        if "TF_CONFIG" in env:
            try:
                self.tf_config = json.loads(env["TF_CONFIG"])
            except ValueError:
                raise ValueError("TF_CONFIG is not JSON: " + env["TF_CONFIG"][:200]) from None
        if self.tf_config:
            self.framework: Optional[str] = "tensorflow"
            task = self.tf_config.get("task", {})
            self.role: str = str(task.get("type", env.get("TFSLURM_ROLE", "")))
            self.index: int = int(task.get("index", _int(env, "TFSLURM_INDEX", 0)))
            cluster = self.tf_config.get("cluster", {})
            self.num_tasks: int = sum(len(v) for v in cluster.values()) + (
                1 if self.role == "evaluator" else 0)
            reporter = ("chief", 0) if "chief" in cluster else ("worker", 0)
            self.is_chief: bool = (self.role, self.index) == reporter
        elif "JAX_PROCESS_ID" in env:
            self.framework = "jax"
            self.role, self.index = "rank", _int(env, "JAX_PROCESS_ID", 0)
            self.num_tasks = _int(env, "JAX_NUM_PROCESSES", 1)
            self.is_chief = self.index == 0
        elif "RANK" in env and "MASTER_ADDR" in env:
            self.framework = "pytorch"
            self.role, self.index = "rank", _int(env, "RANK", 0)
            self.num_tasks = _int(env, "WORLD_SIZE", 1)
            self.is_chief = self.index == 0
        else:  # not under tfslurm: one task, the one that reports
            self.framework = None
            self.role = env.get("TFSLURM_ROLE", "chief")
            self.index = _int(env, "TFSLURM_INDEX", 0)
            self.num_tasks = 1
            self.is_chief = True
        self._start_step: Optional[int] = None
        self._scalars_fd: Optional[int] = None
        self._lock = threading.Lock()
        self._warnings = 0  # warnings received
        self._answered = 0  # of them, those should_checkpoint() has said
        self.warning_at: Optional[float] = None  # time.time() of the last warning
        self._callbacks: List[Callable[[], None]] = []
        self._previous_handler: Any = None
        self._handler_installed = False

    def __repr__(self) -> str:
        return (f"Task(role={self.role!r}, index={self.index}, is_chief={self.is_chief}, "
                f"attempt={self.attempt}, framework={self.framework!r}, "
                f"model_dir={self.model_dir!r})")

    @property
    def name(self) -> str:
        """ROLE:INDEX, as tfctl and the logs name a task."""
        return f"{self.role}:{self.index}"

    @property
    def under_tfslurm(self) -> bool:
        return bool(self.experiment_id)

    # -------------------------------------------------------- checkpoints

    @property
    def start_step(self) -> int:
        """The step of the latest checkpoint in MODEL_DIR when first asked,
        as tfslurm reads it (the attempt's start step the service shows);
        0 without one."""
        if self._start_step is None:
            self._start_step = latest_checkpoint_step(self.model_dir, self.framework) or 0
        return self._start_step

    def checkpoint_file(self, step: int, name: str = "ckpt", suffix: str = ".pt") -> str:
        """MODEL_DIR/<name>-<step>.pt: a PyTorch checkpoint tfslurm reports."""
        return os.path.join(self.model_dir, f"{name}-{operator.index(step)}{suffix}")

    @contextmanager
    def saving(self, path: str) -> Iterator[str]:
        """Write a checkpoint under a temporary name; it takes `path` only when
        complete, so tfslurm (and a restarted attempt) never sees half of one:

            with t.saving(t.checkpoint_file(step)) as tmp:
                torch.save(state, tmp)
        """
        tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
        try:
            yield tmp
            if os.path.isdir(tmp) and os.path.isdir(path):
                shutil.rmtree(path)  # the same step saved again, after a restart
            os.replace(tmp, path)
        except BaseException:
            if os.path.isdir(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
            elif os.path.exists(tmp):
                os.remove(tmp)
            raise

    # -------------------------------------------------------- scalars

    def report(self, step: int, **scalars: Any) -> bool:
        """Report training scalars at `step` ("loss", "accuracy", ...: numbers,
        numpy or framework scalars), as one JSON line of $TFSLURM_SCALARS_FILE.
        Only the reporting task (is_chief) has that file; anywhere else this
        does nothing and answers False. A NaN or an infinity is kept (shown as
        a gap)."""
        step = operator.index(step)
        if not self.scalars_file:
            return False
        line: Dict[str, Any] = {"step": step, "wall_time": time.time()}
        for tag, value in scalars.items():
            _check_tag(tag)
            try:
                line[tag] = float(value)
            except (TypeError, ValueError):
                raise TypeError(f"scalar {tag!r} must be a number, got {value!r}") from None
        data = (json.dumps(line, allow_nan=True) + "\n").encode()
        with self._lock:
            if self._scalars_fd is None:
                os.makedirs(os.path.dirname(self.scalars_file) or ".", exist_ok=True)
                self._scalars_fd = os.open(self.scalars_file,
                                           os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                                           0o644)
            os.write(self._scalars_fd, data)  # one write of a whole line: never read half
        return True

    # -------------------------------------------------------- the warning

    def install_handler(self) -> None:
        """Handle SIGUSR1 (init() does): from the main thread only, as Python
        allows. A handler the program had is called after ours."""
        if self._handler_installed:
            return
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("tfslurm.task.init() must run in the main thread: Python "
                               "installs signal handlers only there")
        self._previous_handler = signal.getsignal(WARNING_SIGNAL)
        signal.signal(WARNING_SIGNAL, self._on_warning)
        self._handler_installed = True

    def _on_warning(self, signum: int, frame: Optional[FrameType]) -> None:
        self._warnings += 1
        self.warning_at = time.time()
        for callback in list(self._callbacks):
            callback()
        previous = self._previous_handler
        if callable(previous) and previous is not self._on_warning:
            previous(signum, frame)

    @property
    def time_limit_warned(self) -> bool:
        """Whether the warning before the time limit (or a preemption) came."""
        return self._warnings > 0

    def should_checkpoint(self) -> bool:
        """True once for each warning that came since the last True: save a
        checkpoint now. Training may go on until the limit; the next attempt
        starts from the checkpoint saved."""
        if self._answered < self._warnings:
            self._answered = self._warnings
            return True
        return False

    def on_time_limit(self, callback: Callable[[], None]) -> None:
        """Run `callback()` when the warning comes. It runs in the main thread
        from Python's signal handler, between two Python instructions of
        whatever the program was doing: keep it to setting a flag, or a save
        that is safe at any point (should_checkpoint() waits for a step's
        end instead)."""
        self._callbacks.append(callback)

    # -------------------------------------------------------- frameworks

    def _require(self, framework: str, what: str) -> None:
        if self.framework not in (framework, None):
            raise RuntimeError(f"{what} is for framework: {framework}; this task runs under "
                               f"framework: {self.framework}")

    def tf_cluster_resolver(self) -> Any:
        """TensorFlow's TFConfigClusterResolver for this task's TF_CONFIG (the
        one tf.distribute strategies take). Imports TensorFlow."""
        self._require("tensorflow", "tf_cluster_resolver()")
        if not self.tf_config:
            raise RuntimeError("there is no TF_CONFIG: run under tfslurm with framework: "
                               "tensorflow (or set TF_CONFIG)")
        import tensorflow as tf  # noqa: PLC0415 (imported only when used)
        return tf.distribute.cluster_resolver.TFConfigClusterResolver()

    def torch_process_group(self, backend: Optional[str] = None, *,
                            timeout_s: Optional[float] = None, **kwargs: Any) -> Any:
        """torch.distributed's default process group from tfslurm's rendezvous
        (env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), and the group.
        backend: default "nccl" when CUDA is there, else "gloo"; with nccl
        the task's GPU is its LOCAL_RANK among those Slurm gave it. Imports
        torch."""
        self._require("pytorch", "torch_process_group()")
        import datetime

        import torch
        import torch.distributed as dist
        if dist.is_initialized():
            return dist.group.WORLD
        cuda = torch.cuda.is_available()
        backend = backend or ("nccl" if cuda else "gloo")
        if backend == "nccl" and cuda:
            torch.cuda.set_device(self.local_rank % torch.cuda.device_count())
        if timeout_s is not None:
            kwargs["timeout"] = datetime.timedelta(seconds=timeout_s)
        dist.init_process_group(backend, init_method="env://", **kwargs)
        return dist.group.WORLD

    def jax_initialize(self, **kwargs: Any) -> None:
        """jax.distributed.initialize with tfslurm's coordinator, process count
        and id (and JAX_LOCAL_DEVICE_IDS where Slurm bound GPUs), JAX's own
        cluster detection off (docs/jax.md). kwargs go to JAX
        (initialization_timeout, ...). Imports JAX."""
        self._require("jax", "jax_initialize()")
        import inspect

        import jax
        env = self.env
        ids = env.get("JAX_LOCAL_DEVICE_IDS")
        args: Dict[str, Any] = dict(
            coordinator_address=env["JAX_COORDINATOR_ADDRESS"],
            num_processes=int(env["JAX_NUM_PROCESSES"]),
            process_id=int(env["JAX_PROCESS_ID"]),
            local_device_ids=[int(i) for i in ids.split(",")] if ids else None)
        if "cluster_detection_method" in inspect.signature(jax.distributed.initialize).parameters:
            args["cluster_detection_method"] = "deactivate"
        args.update(kwargs)
        jax.distributed.initialize(**args)


_current: Optional[Task] = None
_current_lock = threading.Lock()


def init(*, model_dir: Optional[str] = None, handle_warning: bool = True) -> Task:
    """This task, read from the environment once (later calls answer the same
    Task), with the SIGUSR1 handler installed unless `handle_warning` is
    False. model_dir: where checkpoints go outside tfslurm (MODEL_DIR wins)."""
    global _current
    with _current_lock:
        if _current is None:
            _current = Task(model_dir=model_dir)
        task = _current
    if handle_warning:
        task.install_handler()
    return task


def current() -> Optional[Task]:
    """The Task init() made, or None before."""
    return _current


def _reset_for_tests() -> None:
    global _current
    with _current_lock:
        if _current is not None and _current._handler_installed:
            signal.signal(WARNING_SIGNAL, _current._previous_handler or signal.SIG_DFL)
        _current = None

