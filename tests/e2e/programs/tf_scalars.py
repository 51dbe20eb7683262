"""A tiny real TensorFlow program for the dashboard's e2e tests
(tests/e2e/dashboard.test.mjs, "Training" section): it writes training
scalars with tf.summary into MODEL_DIR/train, as a Keras TensorBoard callback
would, and exits 0. The values follow formulas the test recomputes:

  loss          = 2 / (1 + step)        NaN at --nan-step (a diverged step)
  learning_rate = 0.1 * 0.9 ** step

tf.summary.scalar needs the tensorboard package, which TF 2.21 no longer
pulls in; deploy/python/requirements-tf.txt installs it beside tensorflow.

Usage: tf_scalars.py --steps N [--nan-step S] [--pause SECONDS]
"""
import argparse
import math
import os
import time

import tensorflow as tf


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--nan-step", type=int, default=-1)
    p.add_argument("--pause", type=float, default=0.2)
    args = p.parse_args()
    logdir = os.path.join(os.environ["MODEL_DIR"], "train")
    writer = tf.summary.create_file_writer(logdir)
    with writer.as_default():
        for step in range(args.steps):
            loss = math.nan if step == args.nan_step else 2.0 / (1 + step)
            tf.summary.scalar("loss", loss, step=step)
            tf.summary.scalar("learning_rate", 0.1 * 0.9**step, step=step)
            writer.flush()
            time.sleep(args.pause)
    writer.close()
    print(f"tf_scalars: wrote {args.steps} steps of loss and learning_rate to {logdir}", flush=True)
    # The agent polls every second and once more when the program exits;
    # staying a little lets the page show the run while it is open.
    time.sleep(2)


if __name__ == "__main__":
    main()
