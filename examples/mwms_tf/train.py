#!/usr/bin/env python3
"""Synchronous data-parallel training with TensorFlow 2's
MultiWorkerMirroredStrategy (collective all-reduce, no parameter servers), as
tfslurm runs it.

Every task is a worker and runs this same program; TF_CONFIG (from tfslurm)
says which. Each worker reads its own shard of a synthetic linear-regression
set, computes gradients on it, and the strategy's all-reduce averages the
updates across workers at every step, so the variables stay identical on all
of them. At --steps every worker writes a digest of its trained variables to
MODEL_DIR/digests/worker-<index>.txt and exits 0: equal digests show that the
all-reduce really ran (the shards differ, so without it they would not).

Checkpoints: worker 0 saves to MODEL_DIR with tf.train.CheckpointManager
("model.ckpt-<step>"), the others to a scratch directory they delete, as
TensorFlow's multi-worker guide asks (every worker must take part in a save).
At start every worker restores the latest checkpoint from MODEL_DIR.
"""

import argparse
import hashlib
import os
import shutil
import signal
import sys

# Slurm's time-limit warning (sbatch --signal) reaches every task as SIGUSR1,
# whose default action is to die, and slurmctld may send it as early as the
# warning time plus 30 s before the end (PERIODIC_TIMEOUT, _job_timed_out in
# src/slurmctld/job_mgr.c), which in a short job can be while the framework
# below is still importing. So it is ignored before that import.
signal.signal(signal.SIGUSR1, signal.SIG_IGN)

import numpy as np
import tensorflow as tf

FEATURES = 16


def log(message):
    print(f"mwms_tf: {message}", flush=True)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="target global step")
    parser.add_argument("--checkpoint-every", type=int, default=50, metavar="K",
                        help="checkpoint every K steps")
    parser.add_argument("--batch-size", type=int, default=32, help="minibatch per worker")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic set")
    return parser.parse_args()


def worker_shard(seed, worker_index, size=2048):
    """This worker's own samples of y = x . w_true + noise (w_true shared)."""
    w_true = np.random.default_rng(seed).normal(size=[FEATURES, 1]).astype(np.float32)
    rng = np.random.default_rng([seed, worker_index + 1])
    x = rng.normal(size=[size, FEATURES]).astype(np.float32)
    y = x @ w_true + rng.normal(scale=0.1, size=[size, 1]).astype(np.float32)
    return x, y


def variables_digest(variables):
    digest = hashlib.sha256()
    for var in variables:
        digest.update(var.name.encode())
        digest.update(np.ascontiguousarray(var.numpy()).tobytes())
    return digest.hexdigest()


def main():
    args = parse_args()
    model_dir = os.environ.get("MODEL_DIR")
    if not model_dir:
        print("mwms_tf: error: MODEL_DIR is not set", file=sys.stderr)
        return 2
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    resolver = strategy.cluster_resolver
    task_type, task_id = resolver.task_type, resolver.task_id
    workers = strategy.num_replicas_in_sync
    is_first = task_type == "chief" or (task_type == "worker" and task_id == 0
                                        and "chief" not in resolver.cluster_spec().jobs)

    with strategy.scope():
        # MEAN: an update made in each replica is averaged over all of them by
        # the strategy's all-reduce before it is applied.
        weights = tf.Variable(tf.zeros([FEATURES, 1]), name="weights",
                              aggregation=tf.VariableAggregation.MEAN)
        bias = tf.Variable(tf.zeros([1]), name="bias", aggregation=tf.VariableAggregation.MEAN)
        global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                  aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    checkpoint = tf.train.Checkpoint(weights=weights, bias=bias, global_step=global_step)
    write_dir = model_dir if is_first else os.path.join(model_dir, ".scratch", f"{task_type}-{task_id}")
    manager = tf.train.CheckpointManager(checkpoint, write_dir, max_to_keep=3,
                                         checkpoint_name="model.ckpt")
    latest = tf.train.latest_checkpoint(model_dir)
    if latest:
        checkpoint.restore(latest)
        log(f"restored step={int(global_step.numpy())} path={latest}")

    x, y = worker_shard(args.seed, task_id)

    def dataset_fn(input_context):
        batch = input_context.get_per_replica_batch_size(args.batch_size * workers)
        return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch)

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

    @tf.function
    def train_step(iterator):
        def replica_fn(features, labels):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(features, weights) + bias - labels))
            grad_w, grad_b = tape.gradient(loss, [weights, bias])
            weights.assign_sub(args.lr * grad_w)
            bias.assign_sub(args.lr * grad_b)
            global_step.assign_add(1)
            return loss

        losses = strategy.run(replica_fn, args=next(iterator))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

    def save():
        path = manager.save(checkpoint_number=int(global_step.numpy()))
        if is_first:
            log(f"checkpoint step={int(global_step.numpy())} path={path}")

    step = int(global_step.numpy())
    log(f"role={task_type} index={task_id} workers={workers} "
        f"attempt={os.environ.get('TFSLURM_ATTEMPT', '1')} start_step={step}")
    while step < args.steps:
        loss = train_step(iterator)
        step = int(global_step.numpy())
        if step % 10 == 0 or step == args.steps:
            log(f"step={step} loss={float(loss):.5f}")
        if step % args.checkpoint_every == 0 or step == args.steps:
            save()
    if not is_first:
        shutil.rmtree(write_dir, ignore_errors=True)

    digest = variables_digest([weights, bias])
    digests = os.path.join(model_dir, "digests")
    os.makedirs(digests, exist_ok=True)
    with open(os.path.join(digests, f"{task_type}-{task_id}.txt"), "w") as out:
        out.write(f"{step} {digest}\n")
    log(f"done step={step} digest={digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
