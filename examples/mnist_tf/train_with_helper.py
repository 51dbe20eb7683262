#!/usr/bin/env python3
"""examples/mnist_tf/train.py written with tfslurm's helper (tfslurm.task):
the same model, data and TensorFlow checkpoints, with what the raw variant
spells out by hand taken from the helper:

  raw train.py                                  here
  signal.signal(SIGUSR1, SIG_IGN) before import  nothing: the agent starts it ignored
  a SignalFlags class with its own handler       t.should_checkpoint()
  TFConfigClusterResolver(), task_type, task_id  t.tf_cluster_resolver(), t.role
  os.environ["MODEL_DIR"], TFSLURM_ATTEMPT       t.model_dir, t.attempt
  tf.summary file writer for the loss            t.report(step, loss=...)
                                                 (the scalars file; no TensorBoard package)

The chief checkpoints every --checkpoint-every steps and at the time-limit
warning; the next attempt (a restart, a resume, the next of a chain of time
limits) restores the latest checkpoint, whose step t.start_step says. The
evaluator only logs its accuracy: t.report writes for the reporting task
alone (the chief), where the raw variant's evaluator writes tf.summary files
that the chief's agent reads.

Needs the tfslurm package in the TF venv's reach (pip install client/python,
or PYTHONPATH=<checkout>/client/python/src).
"""

import argparse
import os
import sys

import numpy as np
import tensorflow as tf

from tfslurm import task

# The model, its data and its training step are the raw example's.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train as mnist  # noqa: E402


def log(message):
    print(f"mnist_tf-helper: {message}", flush=True)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--checkpoint-every", type=int, default=500, metavar="K")
    parser.add_argument("--steps-per-dispatch", type=int, default=100, metavar="N")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--data", choices=("mnist", "synthetic"), default="mnist")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mnist-npz", default=os.environ.get("MNIST_NPZ"))
    parser.add_argument("--eval-interval", type=float, default=30.0, metavar="SECONDS")
    return parser.parse_args()


def run_chief(t, resolver, args):
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = mnist.Mlp(args.hidden)
    manager = mnist.checkpoint_manager(model, t.model_dir)
    if manager.latest_checkpoint:
        manager.checkpoint.restore(manager.latest_checkpoint)
    step = int(model.global_step.numpy())
    log(f"role=chief attempt={t.attempt} start_step={step} (tfslurm read {t.start_step})")
    train_step, iterator = mnist.make_train_step(strategy, coordinator, model, args)

    def save(why=""):
        path = manager.save(checkpoint_number=step)
        log(f"checkpoint{why} step={step} path={path}")

    last_saved = step
    while step < args.steps:
        losses = [coordinator.schedule(train_step, args=(iterator,))
                  for _ in range(min(args.steps_per_dispatch, args.steps - step))]
        coordinator.join()
        step = int(model.global_step.numpy())
        loss = float(losses[-1].fetch())
        t.report(step, loss=loss)
        log(f"step={step} loss={loss:.4f}")
        # Between two dispatch rounds no step is in flight: the place to save.
        if t.should_checkpoint():
            save(" on the time-limit warning")
            last_saved = step
        elif step // args.checkpoint_every > last_saved // args.checkpoint_every:
            save()
            last_saved = step
    if last_saved != step:
        save()
    log(f"done step={step}")
    return 0


def run_evaluator(t, args):
    model = mnist.Mlp(args.hidden)
    checkpoint = tf.train.Checkpoint(model=model)
    _, (test_images, test_labels) = mnist.load_mnist(args)
    features = mnist.to_features(test_images)
    for path in tf.train.checkpoints_iterator(t.model_dir, min_interval_secs=args.eval_interval):
        checkpoint.restore(path).expect_partial()
        accuracy = float(np.mean(tf.argmax(model(features), axis=1).numpy() == test_labels))
        log(f"eval step={int(model.global_step.numpy())} accuracy={accuracy:.4f} path={path}")


def main():
    args = parse_args()
    t = task.init()
    resolver = t.tf_cluster_resolver()
    if "chief" not in resolver.cluster_spec().jobs:
        print("mnist_tf-helper: error: the spec needs cluster.chief: 1 (the coordinator)",
              file=sys.stderr)
        return 2
    if t.role in ("ps", "worker"):
        mnist.run_server(resolver)  # serves until tfslurm reaps it
        return 0
    os.makedirs(t.model_dir, exist_ok=True)
    if t.role == "evaluator":
        run_evaluator(t, args)
        return 0
    return run_chief(t, resolver, args)


if __name__ == "__main__":
    sys.exit(main())
