"""Training: the regression problem, the worker/chief loop and the evaluator.

The model is linear regression trained by asynchronous SGD, the way
TensorFlow's parameter-server training runs it: every worker pulls the
variables from the ps tasks, computes a gradient on its own minibatch, pushes
it back and increments the global step, without waiting for the others.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass
from typing import Callable

import checkpoints
from ps_protocol import ClusterClient

NOISE_STD = 0.1  # so a converged model has a mean squared error of about 0.01
HELD_OUT_SIZE = 256


class Terminated(BaseException):
    """Raised in the main thread by the SIGTERM handler. A BaseException, like
    KeyboardInterrupt, so that no `except Exception` on the way swallows it."""


class TrainingError(Exception):
    """Training cannot go on (misconfiguration, the chief never showed up, ...)."""


def log(message: str) -> None:
    # Flushed at once: these lines are how tests and people follow a run, and
    # the process may be killed at any moment.
    print(f"linear_ps: {message}", flush=True)


Batch = list[tuple[list[float], float]]


class RegressionProblem:
    """y = x·w* + noise with x ~ N(0, I). Everything derives from the seed, so
    every task, on any node and in any attempt, has the same w* and held-out set."""

    def __init__(self, seed: int, features: int):
        self.features = features
        rng = random.Random(f"linear_ps/true-weights/{seed}")
        self.true_weights = [rng.gauss(0.0, 1.0) for _ in range(features)]
        self.held_out = self.sample(random.Random(f"linear_ps/held-out/{seed}"), HELD_OUT_SIZE)

    def sample(self, rng: random.Random, size: int) -> Batch:
        batch = []
        for _ in range(size):
            x = [rng.gauss(0.0, 1.0) for _ in range(self.features)]
            batch.append((x, _dot(x, self.true_weights) + rng.gauss(0.0, NOISE_STD)))
        return batch


def mean_squared_error(params: list[float], batch: Batch) -> float:
    return sum((_dot(x, params) - y) ** 2 for x, y in batch) / len(batch)


def loss_and_gradient(params: list[float], batch: Batch) -> tuple[float, list[float]]:
    """Mean squared error on the batch and its gradient with respect to params."""
    grad = [0.0] * len(params)
    total = 0.0
    scale = 2.0 / len(batch)
    for x, y in batch:
        residual = _dot(x, params) - y
        total += residual * residual
        for j, xj in enumerate(x):
            grad[j] += scale * residual * xj
    return total / len(batch), grad


def _dot(a: list[float], b: list[float]) -> float:
    return sum(p * q for p, q in zip(a, b))


@dataclass(frozen=True)
class TrainConfig:
    steps: int  # target global step
    checkpoint_every: int
    log_every: int
    step_sleep: float
    lr: float
    lr_schedule: str  # "constant" or "cosine" (decayed to 0 at `steps`)
    batch_size: int
    seed: int
    startup_timeout: float  # how long a worker waits for the chief to initialize the ps


class Trainer:
    """One worker or chief task. The checkpointing task (the chief, or worker 0
    when there is no chief) also restores the ps at start and saves checkpoints."""

    def __init__(self, cluster: ClusterClient, problem: RegressionProblem, config: TrainConfig,
                 role: str, index: int, attempt: int, checkpoint_dir: str | None,
                 on_step: Callable[[int], None], scalars_file: str | None = None):
        self._cluster = cluster
        # tfslurm's JSON-lines scalars file (TFSLURM_SCALARS_FILE, set for the
        # checkpointing task only): the loss, for `tfctl metrics` and the
        # dashboard's charts, as a program without TensorBoard reports it.
        self._scalars_file = scalars_file
        self._problem = problem
        self._config = config
        self._role = role
        self._index = index
        self._attempt = attempt
        self._checkpoint_dir = checkpoint_dir  # None: this task does not checkpoint
        self._on_step = on_step
        self._checkpoint_requested = False
        # The last (step, params) pulled from the ps: what SIGTERM saves.
        self._snapshot: tuple[int, list[float]] | None = None

    def request_checkpoint(self) -> None:
        """Called from the SIGUSR1 handler. Only sets a flag: the handler may
        run in the middle of a ps request, so the save waits for the loop."""
        self._checkpoint_requested = True

    def run(self) -> None:
        if self._checkpoint_dir is not None:
            self._restore_or_initialize()
        else:
            self._wait_until_initialized()
        # start_step is the restored step, the same for every task of the run,
        # even for workers that joined after the others had made progress.
        start_step = self._cluster.initial_step()
        log(f"role={self._role} index={self._index} attempt={self._attempt} "
            f"start_step={start_step}")
        try:
            step = self._train(start_step)
            params = self._cluster.pull()
            self._snapshot = (step, params)
            if self._checkpoint_dir is not None:
                self._save(step, params)
            log(f"done step={step} loss={mean_squared_error(params, self._problem.held_out):.4f}")
        except Terminated:
            # Slurm sends SIGTERM to every task at once, so the ps may already
            # be gone: save what was pulled last instead of asking them again.
            if self._checkpoint_dir is not None and self._snapshot is not None:
                self._save_on_signal(*self._snapshot, "SIGTERM")
            raise

    def _train(self, start_step: int) -> int:
        """Steps until the global step reaches the target; returns the last one seen."""
        # Seeded by the start step too, so a resumed run does not replay the
        # minibatches it trained on before the restart.
        rng = random.Random(
            f"linear_ps/batches/{self._config.seed}/{self._role}/{self._index}/{start_step}")
        last_saved = start_step
        step = self._cluster.global_step()
        while True:
            self._on_step(step)
            if step >= self._config.steps:
                return step
            params = self._cluster.pull()
            self._snapshot = (step, params)
            if self._checkpoint_dir is not None:
                last_saved = self._checkpoint_if_due(step, params, last_saved)
            batch = self._problem.sample(rng, self._config.batch_size)
            loss, grad = loss_and_gradient(params, batch)
            self._cluster.push(grad, self._lr_at(step))
            previous, step = step, self._cluster.increment_step()
            if step // self._config.log_every > previous // self._config.log_every:
                log(f"step={step} loss={loss:.4f}")
                self._report_scalars(step, loss=loss, params=params)
            time.sleep(self._config.step_sleep)

    def _lr_at(self, step: int) -> float:
        """The learning rate at a global step: a function of the step alone, so
        a resumed attempt goes on along the same schedule."""
        if self._config.lr_schedule == "cosine":
            return self._config.lr * 0.5 * (1 + math.cos(math.pi * min(step, self._config.steps)
                                                         / self._config.steps))
        return self._config.lr

    def _report_scalars(self, step: int, loss: float, params: list[float]) -> None:
        """The minibatch's loss, and held_out_loss: the mean squared error of
        the parameters this step started from on the fixed held-out set, the
        value to compare runs by (a minibatch's loss is noisy: its spread at
        batch size 16 is about a third of the loss itself)."""
        if self._scalars_file is None:
            return
        held_out = mean_squared_error(params, self._problem.held_out)
        with open(self._scalars_file, "a") as f:
            f.write(json.dumps({"step": step, "wall_time": time.time(), "loss": loss,
                                "held_out_loss": held_out}) + "\n")

    def _restore_or_initialize(self) -> None:
        restored = checkpoints.load_latest(self._checkpoint_dir)
        if restored is None:
            self._cluster.initialize([0.0] * self._problem.features, 0)
            log(f"initialized fresh parameters (no checkpoint in {self._checkpoint_dir})")
            return
        if len(restored.params) != self._problem.features:
            raise TrainingError(
                f"{restored.path} has {len(restored.params)} parameters but --features is "
                f"{self._problem.features}; use the same --features or a new MODEL_DIR")
        self._cluster.initialize(restored.params, restored.step)
        log(f"restored step={restored.step} path={restored.path}")

    def _wait_until_initialized(self) -> None:
        deadline = time.monotonic() + self._config.startup_timeout
        while not self._cluster.initialized():
            if time.monotonic() >= deadline:
                raise TrainingError(
                    f"the ps tasks were not initialized within {self._config.startup_timeout:.0f}s;"
                    " the chief (or worker 0 when there is no chief) initializes them: is it running?")
            time.sleep(0.5)

    def _checkpoint_if_due(self, step: int, params: list[float], last_saved: int) -> int:
        """Saves on SIGUSR1 or every --checkpoint-every steps; returns the step
        of the newest checkpoint."""
        if self._checkpoint_requested:
            self._checkpoint_requested = False
            self._save_on_signal(step, params, "SIGUSR1")
            return step
        every = self._config.checkpoint_every
        # Other workers move the step too, so this task may never see the exact
        # multiple of --checkpoint-every: save on crossing it.
        if step // every > last_saved // every:
            self._save(step, params)
            return step
        return last_saved

    def _save(self, step: int, params: list[float]) -> None:
        path = checkpoints.save(self._checkpoint_dir, step, params)
        log(f"checkpoint step={step} path={path}")

    def _save_on_signal(self, step: int, params: list[float], signal_name: str) -> None:
        path = checkpoints.save(self._checkpoint_dir, step, params)
        log(f"checkpoint on signal step={step} signal={signal_name} path={path}")


def run_evaluator(problem: RegressionProblem, model_dir: str, interval: float, index: int,
                  attempt: int, on_step: Callable[[int], None]) -> None:
    """Like TensorFlow's side-car evaluator: follows the checkpoints the chief
    writes and reports the held-out loss of each new one, until killed."""
    log(f"role=evaluator index={index} attempt={attempt}")
    evaluated_step = None
    while True:
        try:
            latest = checkpoints.load_latest(model_dir)
        except checkpoints.CorruptCheckpoint as err:
            # The chief may be replacing files right now; look again later.
            log(f"eval skipped: {err}")
            latest = None
        if latest is not None and latest.step != evaluated_step:
            if len(latest.params) != problem.features:
                raise TrainingError(f"{latest.path} has {len(latest.params)} parameters but "
                                    f"--features is {problem.features}")
            on_step(latest.step)
            loss = mean_squared_error(latest.params, problem.held_out)
            log(f"eval step={latest.step} loss={loss:.4f} path={latest.path}")
            evaluated_step = latest.step
        time.sleep(interval)
