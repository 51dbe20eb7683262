#!/usr/bin/env python3
"""TensorFlow 1 style parameter-server training, the way distributed TF ran
on Slurm before TF2: tf.compat.v1.train.Server from TF_CONFIG's cluster,
between-graph replication with replica_device_setter, and
MonitoredTrainingSession.

  ps       serves the variables: server.join(), never exits by itself;
           tfslurm reaps it once the workers are done.
  worker   builds the graph with the variables on the ps, trains
           asynchronously until the global step reaches --steps, exits 0.
           Worker 0 (or the chief, if there is one) initializes the
           variables and writes the checkpoints (tf.compat.v1.train.Saver
           through MonitoredTrainingSession: MODEL_DIR/model.ckpt-<step>);
           the others wait for it. A restarted attempt restores the latest
           checkpoint, so training resumes at its step.
"""

import argparse
import json
import os
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

v1 = tf.compat.v1
FEATURES = 8


def log(message):
    print(f"tf1_ps: {message}", flush=True)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="target global step")
    parser.add_argument("--checkpoint-every", type=int, default=100, metavar="K",
                        help="checkpoint every K global steps (chief only)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def main():
    args = parse_args()
    v1.disable_eager_execution()
    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    cluster_def, task = tf_config.get("cluster"), tf_config.get("task", {})
    if not cluster_def or "type" not in task:
        print("tf1_ps: error: TF_CONFIG has no cluster or task", file=sys.stderr)
        return 2
    cluster = tf.train.ClusterSpec(cluster_def)
    job, index = task["type"], int(task.get("index", 0))
    # Between-graph replication: each worker's sessions see only the ps and
    # itself. Without the filter a worker's session reaches every task of the
    # cluster, and hangs once another worker has finished and exited.
    config = v1.ConfigProto(device_filters=["/job:ps", f"/job:{job}/task:{index}"])
    server = v1.train.Server(cluster, job_name=job, task_index=index, config=config)
    log(f"role={job} index={index} serving at {server.target}")
    if job == "ps":
        server.join()
        return 0
    if job not in ("worker", "chief"):
        print(f"tf1_ps: error: task type {job!r} is not ps, worker or chief", file=sys.stderr)
        return 2
    is_chief = job == "chief" or (job == "worker" and index == 0 and "chief" not in cluster_def)
    model_dir = os.environ.get("MODEL_DIR")
    if is_chief and not model_dir:
        print("tf1_ps: error: MODEL_DIR is not set", file=sys.stderr)
        return 2

    w_true = np.random.default_rng(args.seed).normal(size=[FEATURES, 1]).astype(np.float32)
    rng = np.random.default_rng([args.seed, index + 1, int(os.environ.get("TFSLURM_ATTEMPT", "1"))])
    with v1.device(v1.train.replica_device_setter(worker_device=f"/job:{job}/task:{index}",
                                                  cluster=cluster)):
        global_step = v1.train.get_or_create_global_step()
        features = v1.placeholder(tf.float32, [None, FEATURES])
        labels = v1.placeholder(tf.float32, [None, 1])
        weights = v1.get_variable("weights", [FEATURES, 1], initializer=v1.zeros_initializer())
        bias = v1.get_variable("bias", [1], initializer=v1.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(features, weights) + bias - labels))
        train_op = v1.train.GradientDescentOptimizer(args.lr).minimize(loss, global_step=global_step)

    hooks = [v1.train.StopAtStepHook(last_step=args.steps)]
    first_step = None
    step = 0
    with v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=is_chief,
            checkpoint_dir=model_dir if is_chief else None,
            save_checkpoint_steps=args.checkpoint_every if is_chief else None,
            save_summaries_steps=None, save_summaries_secs=None, log_step_count_steps=None,
            hooks=hooks, config=config) as session:
        while not session.should_stop():
            x = rng.normal(size=[args.batch_size, FEATURES]).astype(np.float32)
            y = x @ w_true
            _, step, value = session.run([train_op, global_step, loss], {features: x, labels: y})
            if first_step is None:
                first_step = step
                log(f"role={job} index={index} attempt={os.environ.get('TFSLURM_ATTEMPT', '1')} "
                    f"first_step={step}")
            if step % 100 == 0:
                log(f"step={step} loss={value:.5f}")
    log(f"done step={step}")
    return 0


if __name__ == "__main__":
    code = main()
    # TensorFlow cannot stop an in-process gRPC server (GrpcServer::Stop
    # answers "Clean shutdown is not currently implemented",
    # grpc_server_lib.cc), and its teardown at interpreter exit can block for
    # ever: a worker that had logged "done" never exited, and since success
    # is every worker's exit, the attempt never ended. Leave without it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
