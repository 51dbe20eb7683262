#!/usr/bin/env python3
"""MNIST with TensorFlow 2 parameter-server training, as tfslurm runs it.

One program for every task; TF_CONFIG says which one this process is:

  ps, worker  run a tf.distribute.Server and join it: they never exit on their
              own, tfslurm reaps them once the chief has succeeded.
  chief       the coordinator (tf.distribute.experimental.ParameterServerStrategy
              + ClusterCoordinator): creates the variables on the ps, restores
              the latest checkpoint from MODEL_DIR, dispatches training steps
              to the workers, checkpoints with tf.train.CheckpointManager, and
              exits 0 at --steps. Its exit decides the experiment's success.
  evaluator   outside the training cluster: scores each new checkpoint on the
              MNIST test set, until killed.

Needs TensorFlow 2 (see README.md). tfslurm's CI runs it with the TensorFlow
that deploy/install-tf.sh installs, on --data synthetic (no network).
"""

import argparse
import os
import signal
import sys
import time

# Slurm's time-limit warning (sbatch --signal) reaches every task as SIGUSR1,
# whose default action is to die, and slurmctld may send it as early as the
# warning time plus 30 s before the end (PERIODIC_TIMEOUT, _job_timed_out in
# src/slurmctld/job_mgr.c), which in a short job can be while the framework
# below is still importing. So it is ignored before that import.
signal.signal(signal.SIGUSR1, signal.SIG_IGN)

import numpy as np
import tensorflow as tf

EXIT_TERMINATED = 128 + signal.SIGTERM


def log(message):
    print(f"mnist_tf: {message}", flush=True)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5000, help="target global step")
    parser.add_argument("--checkpoint-every", type=int, default=500, metavar="K",
                        help="checkpoint every K global steps")
    parser.add_argument("--steps-per-dispatch", type=int, default=100, metavar="N",
                        help="steps the chief schedules between two looks at the global step; "
                             "also how long a signal may wait for its checkpoint")
    parser.add_argument("--batch-size", type=int, default=64, help="minibatch size per worker")
    parser.add_argument("--lr", type=float, default=0.1, help="learning rate")
    parser.add_argument("--hidden", type=int, default=128, help="hidden units")
    parser.add_argument("--data", choices=("mnist", "synthetic"), default="mnist",
                        help="mnist: the real set (see --mnist-npz); synthetic: MNIST-shaped "
                             "digits drawn from strokes from --seed, for machines without the "
                             "data or a network")
    parser.add_argument("--seed", type=int, default=0, help="--data synthetic: the set's seed")
    parser.add_argument("--mnist-npz", default=os.environ.get("MNIST_NPZ"),
                        help="local copy of mnist.npz (default: $MNIST_NPZ, else Keras downloads "
                             "it, which needs internet on the chief and evaluator)")
    parser.add_argument("--fail-at-step", type=int, default=0, metavar="N",
                        help="chief: raise an exception once the global step reaches N (for "
                             "testing how a failed chief is reported); 0 = never")
    parser.add_argument("--eval-interval", type=float, default=30.0, metavar="SECONDS",
                        help="evaluator: least time between two evaluations")
    parser.add_argument("--dispatch-pause", type=float, default=0.0, metavar="SECONDS",
                        help="chief: wait this long after each round of --steps-per-dispatch steps, "
                             "as a bigger model's time would pass but without its CPU (for tests that "
                             "need the training to last); 0 = never")
    return parser.parse_args()


# Each digit as strokes, polylines in a unit box (x right, y down), drawn the
# way a hand would: what generated_digits renders, each with its own slant,
# size, place and stroke width.
DIGIT_STROKES = {
    0: [[(0.5, 0.08), (0.22, 0.22), (0.15, 0.5), (0.22, 0.78), (0.5, 0.92), (0.78, 0.78),
         (0.85, 0.5), (0.78, 0.22), (0.5, 0.08)]],
    1: [[(0.35, 0.25), (0.55, 0.08), (0.55, 0.92)], [(0.35, 0.92), (0.75, 0.92)]],
    2: [[(0.2, 0.28), (0.35, 0.1), (0.65, 0.1), (0.8, 0.28), (0.75, 0.48), (0.2, 0.9),
         (0.82, 0.9)]],
    3: [[(0.2, 0.15), (0.5, 0.08), (0.78, 0.2), (0.75, 0.4), (0.45, 0.5), (0.78, 0.6),
         (0.8, 0.82), (0.5, 0.93), (0.2, 0.85)]],
    4: [[(0.65, 0.92), (0.65, 0.08), (0.15, 0.65), (0.85, 0.65)]],
    5: [[(0.8, 0.1), (0.25, 0.1), (0.22, 0.45), (0.55, 0.4), (0.8, 0.55), (0.78, 0.8),
         (0.5, 0.93), (0.2, 0.85)]],
    6: [[(0.75, 0.12), (0.45, 0.1), (0.22, 0.35), (0.18, 0.7), (0.35, 0.92), (0.65, 0.9),
         (0.8, 0.7), (0.65, 0.5), (0.35, 0.52), (0.2, 0.65)]],
    7: [[(0.18, 0.1), (0.82, 0.1), (0.4, 0.92)], [(0.35, 0.5), (0.7, 0.5)]],
    8: [[(0.5, 0.5), (0.25, 0.32), (0.3, 0.12), (0.5, 0.07), (0.7, 0.12), (0.75, 0.32),
         (0.5, 0.5), (0.2, 0.7), (0.3, 0.9), (0.5, 0.94), (0.7, 0.9), (0.8, 0.7), (0.5, 0.5)]],
    9: [[(0.8, 0.35), (0.65, 0.12), (0.4, 0.1), (0.22, 0.3), (0.35, 0.5), (0.6, 0.5),
         (0.8, 0.35), (0.75, 0.7), (0.55, 0.92), (0.3, 0.9)]],
}


def generated_digits(seed, train_size=6000, test_size=1000):
    """An MNIST-shaped set of digits 0-9 drawn from strokes, made from a seed,
    for nodes without the MNIST files or a network: 28x28 uint8 images, white
    strokes on black as in MNIST, each digit slanted, scaled, moved and drawn
    with a stroke of its own, plus a little noise. A classifier learns it as
    it learns MNIST (the loss falls from ln 10 = 2.30 to well under 0.5 in a
    few hundred steps), so the charts look like training. Every task that
    asks for the same seed gets the same set; numpy only, under a second."""
    rng = np.random.default_rng(seed)
    grid = (np.stack(np.meshgrid(np.arange(28), np.arange(28)), axis=-1).reshape(-1, 2) + 0.5
            ).astype(np.float32)
    # Every digit's segments, padded to one count by repeating its last (a
    # segment twice draws nothing more), so a batch of digits is one array.
    per_digit = [[(p, q) for line in DIGIT_STROKES[d] for p, q in zip(line, line[1:])]
                 for d in range(10)]
    most = max(len(s) for s in per_digit)
    segments = np.array([s + [s[-1]] * (most - len(s)) for s in per_digit], dtype=np.float32)

    def draw(labels):
        n = len(labels)
        angle = rng.normal(0.0, 0.15, size=n).astype(np.float32)
        scale = rng.uniform(16.0, 21.0, size=n).astype(np.float32)
        shear = rng.normal(0.0, 0.15, size=n).astype(np.float32)
        transform = scale[:, None, None] * np.stack(
            [np.stack([np.cos(angle), -np.sin(angle) + shear], -1),
             np.stack([np.sin(angle), np.cos(angle)], -1)], 1)  # (n, 2, 2)
        offset = 14.0 + rng.uniform(-2.5, 2.5, size=(n, 1, 1, 2)).astype(np.float32)
        seg = np.einsum("nsei,nji->nsej", segments[labels] - 0.5, transform) + offset
        # Each pixel's distance to the nearest stroke segment, x and y apart:
        # (n, 784, segments) arrays.
        ax, ay = seg[:, None, :, 0, 0], seg[:, None, :, 0, 1]
        dx, dy = seg[:, None, :, 1, 0] - ax, seg[:, None, :, 1, 1] - ay
        px, py = grid[None, :, None, 0] - ax, grid[None, :, None, 1] - ay
        t = np.clip((px * dx + py * dy) / np.maximum(dx * dx + dy * dy, 1e-6), 0.0, 1.0)
        ex, ey = px - t * dx, py - t * dy
        dist = np.sqrt((ex * ex + ey * ey).min(-1))
        width = rng.uniform(0.9, 1.6, size=(n, 1)).astype(np.float32)
        ink = np.clip(1.5 - dist / width, 0.0, 1.0) ** 0.8
        ink = np.clip(ink + rng.normal(0.0, 0.05, size=ink.shape), 0.0, 1.0)
        return (ink.reshape(n, 28, 28) * 255).astype(np.uint8)

    def make(size):
        labels = rng.integers(0, 10, size=size)
        images = np.concatenate([draw(labels[i:i + 500]) for i in range(0, size, 500)])
        return images, labels.astype(np.uint8)

    return make(train_size), make(test_size)


def load_mnist(args):
    """((train images, labels), (test images, labels)); images as uint8 28x28."""
    if args.data == "synthetic":
        return generated_digits(args.seed)
    npz_path = args.mnist_npz
    if npz_path:
        with np.load(npz_path) as data:
            return (data["x_train"], data["y_train"]), (data["x_test"], data["y_test"])
    return tf.keras.datasets.mnist.load_data()


def to_features(images):
    return tf.cast(tf.reshape(images, [-1, 28 * 28]), tf.float32) / 255.0


class Mlp(tf.Module):
    """784 -> hidden -> 10. Plain variables, no Keras layers, so the same code
    works with every TensorFlow 2 release and its Keras version. Under the
    strategy's scope the variables are placed round-robin on the ps tasks."""

    def __init__(self, hidden):
        super().__init__()
        self.w1 = tf.Variable(tf.random.truncated_normal([28 * 28, hidden], stddev=0.05), name="w1")
        self.b1 = tf.Variable(tf.zeros([hidden]), name="b1")
        self.w2 = tf.Variable(tf.random.truncated_normal([hidden, 10], stddev=0.05), name="w2")
        self.b2 = tf.Variable(tf.zeros([10]), name="b2")
        # Saved with the weights, so a restore also restores the step.
        self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")

    def __call__(self, features):
        hidden = tf.nn.relu(tf.matmul(features, self.w1) + self.b1)
        return tf.matmul(hidden, self.w2) + self.b2


def checkpoint_manager(model, model_dir):
    # "model.ckpt-<step>" and the "checkpoint" state file: the layout tfslurm
    # reads to report progress and to find where a resumed attempt starts.
    return tf.train.CheckpointManager(tf.train.Checkpoint(model=model), model_dir,
                                      max_to_keep=5, checkpoint_name="model.ckpt")


def run_server(resolver):
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id,
                                  protocol=resolver.rpc_layer or "grpc", start=True)
    log(f"role={resolver.task_type} index={resolver.task_id} serving")
    server.join()


class SignalFlags:
    """SIGUSR1 (Slurm's warning before the time limit) asks for a checkpoint,
    SIGTERM for a checkpoint and exit. The handlers only set flags: the chief
    acts on them between two dispatch rounds, when no step is in flight."""

    def __init__(self):
        self.checkpoint = None  # the name of the signal that asked for one
        self.terminate = False
        signal.signal(signal.SIGUSR1, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum, frame):
        self.checkpoint = signal.Signals(signum).name
        if signum == signal.SIGTERM:
            self.terminate = True


def make_train_step(strategy, coordinator, model, args):
    """(train_step, per-worker iterator): what the chief schedules on the workers."""
    (train_images, train_labels), _ = load_mnist(args)

    def dataset_fn(input_context):
        # Runs on each worker; an unseeded shuffle gives every worker its own order.
        return (tf.data.Dataset.from_tensor_slices((train_images, train_labels))
                .shuffle(len(train_images)).repeat().batch(args.batch_size)
                .map(lambda images, labels: (to_features(images), tf.cast(labels, tf.int64)))
                .prefetch(2))

    @tf.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(dataset_fn)

    iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    @tf.function
    def train_step(iterator):
        def replica_fn(features, labels):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=labels, logits=model(features)))
            # Plain SGD applied straight to the ps variables: asynchronous
            # updates, each worker at its own pace.
            grads = tape.gradient(loss, model.trainable_variables)
            for var, grad in zip(model.trainable_variables, grads):
                var.assign_sub(args.lr * grad)
            model.global_step.assign_add(1)
            return loss

        features, labels = next(iterator)
        return strategy.run(replica_fn, args=(features, labels))

    return train_step, iterator


def run_chief(resolver, args, model_dir, attempt):
    signals = SignalFlags()
    # The coordinator says at INFO when a lost worker is back ("Worker
    # /job:worker/replica:0/task:1 has been recovered."): worth seeing when
    # tfslurm restarts a worker alone (docs/restarts.md).
    tf.get_logger().setLevel("INFO")
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = Mlp(args.hidden)
    manager = checkpoint_manager(model, model_dir)
    if manager.latest_checkpoint:
        manager.checkpoint.restore(manager.latest_checkpoint)
        log(f"restored step={int(model.global_step.numpy())} path={manager.latest_checkpoint}")
    else:
        log(f"initialized fresh parameters (no checkpoint in {model_dir})")
    train_step, iterator = make_train_step(strategy, coordinator, model, args)

    def save(reason=""):
        step = int(model.global_step.numpy())
        path = manager.save(checkpoint_number=step)
        log(f"checkpoint{reason} step={step} path={path}")

    # TensorBoard scalars, as any TF program writes them; tfslurm's chief
    # agent reads them from MODEL_DIR for GET /experiments/{id}/metrics,
    # `tfctl metrics` and the dashboard's charts.
    summaries = tf.summary.create_file_writer(os.path.join(model_dir, "tensorboard", "train"))

    step = int(model.global_step.numpy())
    log(f"role=chief index=0 attempt={attempt} start_step={step}")
    last_saved = step
    try:
        while step < args.steps:
            # A worker that fails has its steps retried on the others; a lost
            # ps raises here and fails the chief, and so the attempt.
            losses = [coordinator.schedule(train_step, args=(iterator,))
                      for _ in range(min(args.steps_per_dispatch, args.steps - step))]
            coordinator.join()
            step = int(model.global_step.numpy())
            loss = float(losses[-1].fetch())
            log(f"step={step} loss={loss:.4f}")
            with summaries.as_default():
                tf.summary.scalar("loss", loss, step=step)
            summaries.flush()
            if args.fail_at_step and step >= args.fail_at_step:
                raise RuntimeError(f"injected failure at step {step} (--fail-at-step {args.fail_at_step})")
            if signals.checkpoint:
                save(f" on signal signal={signals.checkpoint}")
                signals.checkpoint = None
                last_saved = step
                if signals.terminate:
                    break
            elif step // args.checkpoint_every > last_saved // args.checkpoint_every:
                save()
                last_saved = step
            if args.dispatch_pause and step < args.steps:
                time.sleep(args.dispatch_pause)
    except tf.errors.OpError as err:
        # Slurm sends SIGTERM to every task at once: the ps may be gone before
        # the chief could save. That is a termination, not a training failure.
        if not signals.terminate:
            raise
        log(f"could not checkpoint after SIGTERM: {type(err).__name__}: {err.message}")
    if signals.terminate:
        log(f"terminated by SIGTERM, exit {EXIT_TERMINATED}")
        return EXIT_TERMINATED
    if last_saved != step:
        save()
    log(f"done step={step}")
    return 0


def run_evaluator(args, model_dir):
    # Outside the cluster: a local model, filled from each new checkpoint.
    model = Mlp(args.hidden)
    checkpoint = tf.train.Checkpoint(model=model)
    _, (test_images, test_labels) = load_mnist(args)
    features = to_features(test_images)
    log("role=evaluator index=0")
    summaries = tf.summary.create_file_writer(os.path.join(model_dir, "tensorboard", "eval"))
    for path in tf.train.checkpoints_iterator(model_dir, min_interval_secs=args.eval_interval):
        checkpoint.restore(path).expect_partial()
        predictions = tf.argmax(model(features), axis=1)
        accuracy = float(np.mean(predictions.numpy() == test_labels))
        step = int(model.global_step.numpy())
        log(f"eval step={step} accuracy={accuracy:.4f} path={path}")
        with summaries.as_default():
            tf.summary.scalar("accuracy", accuracy, step=step)
        summaries.flush()


def main():
    args = parse_args()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    role = resolver.task_type
    model_dir = os.environ.get("MODEL_DIR")
    if "chief" not in resolver.cluster_spec().jobs:
        # Without a coordinator the ps and workers would wait in join() until
        # the time limit: fail every task at once instead.
        print("mnist_tf: error: TF_CONFIG has no chief; TF2 parameter-server training runs its "
              "coordinator on the chief, so the spec needs cluster.chief: 1", file=sys.stderr)
        return 2
    if role in ("ps", "worker"):
        run_server(resolver)
        return 0
    if role not in ("chief", "evaluator"):
        print(f"mnist_tf: error: TF_CONFIG task type {role!r} is not chief, ps, worker or "
              "evaluator", file=sys.stderr)
        return 2
    if not model_dir:
        print(f"mnist_tf: error: MODEL_DIR is not set; the {role} reads or writes checkpoints "
              "there", file=sys.stderr)
        return 2
    os.makedirs(model_dir, exist_ok=True)
    if role == "evaluator":
        run_evaluator(args, model_dir)
        return 0
    return run_chief(resolver, args, model_dir, os.environ.get("TFSLURM_ATTEMPT", "1"))


if __name__ == "__main__":
    sys.exit(main())
