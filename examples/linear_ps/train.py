#!/usr/bin/env python3
"""linear_ps: TensorFlow-style parameter-server training in plain Python.

Started once per task, like a TensorFlow program: TF_CONFIG says which task
this process is (ps, worker, chief or evaluator) and where the others are.
This file reads that configuration and the TFSLURM_* variables, installs the
signal handlers and runs the task's role. See README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass

from checkpoints import CorruptCheckpoint
from ps_protocol import ClusterClient, PsClient, PsError, PsServer, PsUnavailable, ShardState
from training import (RegressionProblem, Terminated, TrainConfig, Trainer, TrainingError, log,
                      run_evaluator)

ROLES = ("chief", "worker", "ps", "evaluator")
EXIT_CONFIG_ERROR = 2
EXIT_TERMINATED = 128 + signal.SIGTERM  # what a shell reports for a SIGTERM death


class ConfigError(Exception):
    """TF_CONFIG or the TFSLURM_* variables are missing or inconsistent."""


@dataclass(frozen=True)
class Task:
    role: str
    index: int
    cluster: dict[str, list[str]]  # the training cluster; the evaluator is not in it
    attempt: int
    model_dir: str | None

    @property
    def checkpoints(self) -> bool:
        """TensorFlow's "chief" duties (init/restore, checkpoints) fall to the
        chief task when there is one, else to worker 0."""
        if "chief" in self.cluster:
            return self.role == "chief"
        return self.role == "worker" and self.index == 0

    @property
    def port(self) -> int:
        return int(self.cluster[self.role][self.index].rpartition(":")[2])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Parameter-server linear regression; the task comes from TF_CONFIG.")
    parser.add_argument("--steps", type=int, default=200, help="target global step (default 200)")
    parser.add_argument("--checkpoint-every", type=int, default=20, metavar="K",
                        help="checkpoint every K global steps (default 20)")
    parser.add_argument("--log-every", type=int, default=20, metavar="N",
                        help="print the loss every N global steps (default 20)")
    parser.add_argument("--step-sleep", type=float, default=0.02, metavar="SECONDS",
                        help="pause after each step, to make training last (default 0.02)")
    parser.add_argument("--lr", type=float, default=0.05, help="learning rate (default 0.05)")
    parser.add_argument("--lr-schedule", choices=("constant", "cosine"), default="constant",
                        help="constant: --lr at every step (default); cosine: --lr decayed to 0 "
                             "at --steps along a half cosine, as most training runs")
    parser.add_argument("--features", type=int, default=16, help="input dimension (default 16)")
    parser.add_argument("--batch-size", type=int, default=32, help="minibatch size (default 32)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic data (default 0)")
    parser.add_argument("--eval-interval", type=float, default=2.0, metavar="SECONDS",
                        help="evaluator: how often to look for a new checkpoint (default 2)")
    parser.add_argument("--startup-timeout", type=float, default=120.0, metavar="SECONDS",
                        help="how long to wait for the ps to come up and be initialized (default 120)")
    parser.add_argument("--ps-retry-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="how long to retry a ps that stopped answering (default 10)")
    failure = parser.add_argument_group("failure injection (for tests)")
    failure.add_argument("--fail-at-step", type=int, metavar="S",
                         help="exit with --fail-code once the global step reaches S")
    failure.add_argument("--fail-task", metavar="TYPE:INDEX", help="the task that fails, e.g. worker:1")
    failure.add_argument("--fail-code", type=int, default=1, metavar="C", help="exit code (default 1)")
    failure.add_argument("--fail-every-attempt", action="store_true",
                         help="fail in every attempt, not only when TFSLURM_ATTEMPT is 1")
    args = parser.parse_args(argv)

    for name in ("steps", "checkpoint_every", "log_every", "features", "batch_size"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if (args.fail_at_step is None) != (args.fail_task is None):
        parser.error("--fail-at-step and --fail-task go together")
    if args.fail_task is not None:
        role, _, index = args.fail_task.partition(":")
        if role not in ROLES or not index.isdigit():
            parser.error(f"--fail-task must be TYPE:INDEX with TYPE one of {', '.join(ROLES)}, "
                         f"got {args.fail_task!r}")
    return args


def read_task(environ: dict[str, str]) -> Task:
    raw = environ.get("TF_CONFIG")
    if not raw:
        raise ConfigError("TF_CONFIG is not set; see README.md for how to run tasks by hand")
    try:
        tf_config = json.loads(raw)
        cluster = tf_config["cluster"]
        role = tf_config["task"]["type"]
        index = int(tf_config["task"]["index"])
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"TF_CONFIG must be {{\"cluster\": {{...}}, \"task\": {{\"type\": ..., "
                          f"\"index\": ...}}}}: {type(err).__name__}: {err}: {raw}") from err

    if role not in ROLES:
        raise ConfigError(f"TF_CONFIG task type {role!r} is not one of {', '.join(ROLES)}")
    if not cluster.get("ps"):
        raise ConfigError(f"TF_CONFIG has no ps tasks; this program needs at least one: {raw}")
    if role != "evaluator" and not 0 <= index < len(cluster.get(role, [])):
        raise ConfigError(f"TF_CONFIG task {role}:{index} is not in the cluster: {raw}")

    # The agent exports the same facts twice; a mismatch means a broken launcher.
    if environ.get("TFSLURM_ROLE", role) != role:
        raise ConfigError(f"TFSLURM_ROLE={environ['TFSLURM_ROLE']} but TF_CONFIG says {role}")
    if environ.get("TFSLURM_INDEX", str(index)) != str(index):
        raise ConfigError(f"TFSLURM_INDEX={environ['TFSLURM_INDEX']} but TF_CONFIG says {index}")
    attempt = environ.get("TFSLURM_ATTEMPT", "1")
    if not attempt.isdigit():
        raise ConfigError(f"TFSLURM_ATTEMPT must be a number, got {attempt!r}")

    task = Task(role=role, index=index, cluster=cluster, attempt=int(attempt),
                model_dir=environ.get("MODEL_DIR") or None)
    if role != "evaluator" and environ.get("TFSLURM_PORT", str(task.port)) != str(task.port):
        # Other tasks dial the TF_CONFIG address, so listening elsewhere would
        # leave them retrying until they time out.
        raise ConfigError(f"TFSLURM_PORT={environ['TFSLURM_PORT']} but this task's TF_CONFIG "
                          f"address is {cluster[role][index]}")
    if (task.checkpoints or role == "evaluator") and task.model_dir is None:
        raise ConfigError(f"MODEL_DIR is not set; the {role} {index} reads or writes checkpoints there")
    return task


class FailureInjection:
    """--fail-at-step/--fail-task: lets tests make one task crash mid-training."""

    def __init__(self, args: argparse.Namespace, task: Task):
        self.armed = (args.fail_task == f"{task.role}:{task.index}"
                      and (task.attempt == 1 or args.fail_every_attempt))
        self._at_step = args.fail_at_step
        self._code = args.fail_code

    def check(self, step: int) -> None:
        """Called with each global step this task sees."""
        if self.armed and step >= self._at_step:
            log(f"injected failure at step={step} exit_code={self._code}")
            # os._exit: a crash, not a shutdown (no checkpoint, no cleanup),
            # and it works from any thread.
            os._exit(self._code)


def serve_ps(task: Task, args: argparse.Namespace, failure: FailureInjection) -> None:
    try:
        server = PsServer("0.0.0.0", task.port, ShardState())
    except OSError as err:
        raise OSError(f"ps {task.index} cannot listen on 0.0.0.0:{task.port} (held by a program "
                      f"without SO_REUSEPORT?): {err}") from err
    log(f"role=ps index={task.index} attempt={task.attempt} listening=0.0.0.0:{task.port}")
    if failure.armed:
        # A ps other than ps 0 does not see the global step: ask ps 0 for it.
        ps0 = PsClient(0, task.cluster["ps"][0], args.startup_timeout, args.ps_retry_timeout)

        def watch_global_step() -> None:
            try:
                while True:
                    failure.check(ps0.call("status")["step"])
                    time.sleep(0.2)
            except (PsUnavailable, PsError) as err:
                print(f"linear_ps: warning: --fail-task cannot follow the global step: {err}",
                      file=sys.stderr, flush=True)

        threading.Thread(target=watch_global_step, daemon=True).start()
    server.serve_forever()  # like server.join(): until the orchestrator ends us


def run_trainer(task: Task, args: argparse.Namespace, failure: FailureInjection) -> None:
    cluster = ClusterClient(task.cluster["ps"], args.features, args.startup_timeout,
                            args.ps_retry_timeout)
    config = TrainConfig(steps=args.steps, checkpoint_every=args.checkpoint_every,
                         log_every=args.log_every, step_sleep=args.step_sleep, lr=args.lr,
                         lr_schedule=args.lr_schedule, batch_size=args.batch_size, seed=args.seed,
                         startup_timeout=args.startup_timeout)
    trainer = Trainer(cluster, RegressionProblem(args.seed, args.features), config, task.role,
                      task.index, task.attempt, task.model_dir if task.checkpoints else None,
                      failure.check, os.environ.get("TFSLURM_SCALARS_FILE"))
    if task.checkpoints:
        signal.signal(signal.SIGUSR1, lambda signum, frame: trainer.request_checkpoint())
    trainer.run()


def install_signal_handlers() -> None:
    def on_sigterm(signum, frame):
        # Ignore a second SIGTERM so that it cannot interrupt the final checkpoint.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()

    signal.signal(signal.SIGTERM, on_sigterm)
    # Slurm's time-limit warning (sbatch --signal) reaches every task as
    # SIGUSR1, whose default action is to die. Only the checkpointing task acts
    # on it (run_trainer installs that handler); the others carry on.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)


def main(argv: list[str] | None = None) -> int:
    install_signal_handlers()
    try:
        args = parse_args(argv)
        task = read_task(dict(os.environ))
        failure = FailureInjection(args, task)
        if task.checkpoints or task.role == "evaluator":
            # Up front, so that a bad MODEL_DIR fails the task at start rather
            # than at its first checkpoint.
            os.makedirs(task.model_dir, exist_ok=True)
        if task.role == "ps":
            serve_ps(task, args, failure)
        elif task.role == "evaluator":
            run_evaluator(RegressionProblem(args.seed, args.features), task.model_dir,
                          args.eval_interval, task.index, task.attempt, failure.check)
        else:
            run_trainer(task, args, failure)
    except ConfigError as err:
        print(f"linear_ps: error: {err}", file=sys.stderr, flush=True)
        return EXIT_CONFIG_ERROR
    except Terminated:
        log(f"terminated by SIGTERM, exit {EXIT_TERMINATED}")
        return EXIT_TERMINATED
    except (PsUnavailable, PsError, CorruptCheckpoint, TrainingError, OSError) as err:
        # OSError: a port that cannot be bound, a MODEL_DIR that cannot be written.
        print(f"linear_ps: error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
