#!/usr/bin/env python3
"""Writes the TensorBoard event files that tests/agent/scalar_watch_test.cc
reads, with real TensorFlow, so that the agent's reader is tested on bytes TF
itself wrote rather than on what we think it writes.

    PYTHONPATH=<dir with tensorboard> /opt/tfslurm/venv-tf/bin/python \
        tests/agent/testdata/make_tfevents.py tests/agent/testdata/tfevents

tf.summary.scalar/histogram/text are implemented by the tensorboard package,
which tensorflow-cpu 2.21 no longer pulls in: install it next to TF (e.g.
`pip install --target DIR --no-deps tensorboard==2.21.0` and PYTHONPATH=DIR).

The output directory plays MODEL_DIR:
  <out>/events.out.tfevents.*             TF1: tf.compat.v1.summary.scalar ops
                                          run in a Session, FileWriter (simple_value)
  <out>/v2/events.out.tfevents.*          TF2: tf.summary.create_file_writer with
                                          scalar (tensor_content), a histogram and a
                                          text summary (to be skipped), and raw
                                          Summary protos: a v1 simple_value and a
                                          v2 scalar in float_val / double_val
  <out>/keras/train/..., keras/validation/...  Keras' TensorBoard callback, 2 epochs
  <out>/expected.json                     what the agent must report, read back with
                                          TF's own summary_iterator and make_ndarray

Committed output is small (a few KB); re-running replaces it (file names carry
the time and host, so the old files are removed first).
"""
import json
import os
import shutil
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.framework import summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2  # noqa: E402


def write_tf1(model_dir):
    # The TF1 way: summary ops in a graph, evaluated by a Session, handed to a
    # FileWriter at MODEL_DIR itself (no run directory, so tags are bare).
    with tf.Graph().as_default():
        lr = tf.compat.v1.placeholder(tf.float32, shape=[])
        acc = tf.compat.v1.placeholder(tf.float32, shape=[])
        merged = tf.compat.v1.summary.merge(
            [tf.compat.v1.summary.scalar("learning_rate", lr),
             tf.compat.v1.summary.scalar("accuracy", acc)])
        writer = tf.compat.v1.summary.FileWriter(model_dir)
        with tf.compat.v1.Session() as sess:
            for step, (lr_v, acc_v) in enumerate([(0.1, 0.5), (0.05, 0.75), (0.025, 0.875)]):
                writer.add_summary(sess.run(merged, {lr: lr_v, acc: acc_v}), global_step=step * 10)
        writer.close()


def scalar_tensor(dtype, **values):
    return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=tensor_shape_pb2.TensorShapeProto(),
                                  **values)


def write_tf2(run_dir):
    writer = tf.summary.create_file_writer(run_dir)
    scalars_meta = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    with writer.as_default():
        for step, loss in [(1, 0.5), (2, 0.25), (3, 0.125)]:
            tf.summary.scalar("loss", loss, step=step)
            tf.summary.histogram("weights", np.arange(10.0) * step, step=step)
            tf.summary.text("note", "step %d" % step, step=step)
        # Summaries as other writers build them, through TF's writer:
        raw = summary_pb2.Summary(value=[
            summary_pb2.Summary.Value(tag="raw/simple", simple_value=1.5),
            summary_pb2.Summary.Value(
                tag="raw/float_val", metadata=scalars_meta,
                tensor=scalar_tensor(types_pb2.DT_FLOAT, float_val=[0.75])),
            summary_pb2.Summary.Value(
                tag="raw/double_val", metadata=scalars_meta,
                tensor=scalar_tensor(types_pb2.DT_DOUBLE, double_val=[2.0 ** 0.5])),
            # A shape [2] tensor under the scalars plugin is not a scalar.
            summary_pb2.Summary.Value(
                tag="raw/vector", metadata=scalars_meta,
                tensor=tensor_pb2.TensorProto(
                    dtype=types_pb2.DT_FLOAT, float_val=[1.0, 2.0],
                    tensor_shape=tensor_shape_pb2.TensorShapeProto(
                        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=2)]))),
        ])
        tf.summary.experimental.write_raw_pb(raw.SerializeToString(), step=4)
    writer.close()


def write_keras(log_dir):
    tf.keras.utils.set_random_seed(7)
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(-1, 1)
    y = 2 * x + 1
    model = tf.keras.Sequential([tf.keras.Input(shape=(1,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    model.fit(x, y, epochs=2, batch_size=16, validation_split=0.25, verbose=0,
              callbacks=[tf.keras.callbacks.TensorBoard(log_dir=log_dir, write_graph=False,
                                                        profile_batch=0)])


def expected_scalars(model_dir):
    # What the agent must report, decoded by TF: simple_value, or a rank-0
    # tensor of a value whose plugin is "scalars"; tag prefixed by the run.
    out = []
    for root, _, files in os.walk(model_dir):
        for name in sorted(files):
            if not name.startswith("events.out.tfevents."):
                continue
            run = os.path.relpath(root, model_dir)
            plugins = {}
            for event in tf.compat.v1.train.summary_iterator(os.path.join(root, name)):
                for value in event.summary.value:
                    tag = value.tag if run == "." else run + "/" + value.tag
                    if value.metadata.plugin_data.plugin_name:
                        plugins[tag] = value.metadata.plugin_data.plugin_name
                    kind = value.WhichOneof("value")
                    if kind == "simple_value":
                        number = float(value.simple_value)
                    elif (kind == "tensor" and plugins.get(tag) == "scalars"
                          and len(value.tensor.tensor_shape.dim) == 0):
                        number = float(tf.make_ndarray(value.tensor).item())
                    else:
                        continue
                    out.append({"tag": tag, "step": event.step, "wall_time": event.wall_time,
                                "value": number})
    out.sort(key=lambda s: (s["tag"], s["step"], s["wall_time"]))
    return out


def main():
    model_dir = sys.argv[1]
    shutil.rmtree(model_dir, ignore_errors=True)
    os.makedirs(model_dir)
    write_tf1(model_dir)
    write_tf2(os.path.join(model_dir, "v2"))
    write_keras(os.path.join(model_dir, "keras"))
    expected = expected_scalars(model_dir)
    with open(os.path.join(model_dir, "expected.json"), "w") as f:
        json.dump({"tensorflow": tf.__version__, "keras": tf.keras.__version__,
                   "scalars": expected}, f, indent=1)
        f.write("\n")
    print("%d scalars, TensorFlow %s" % (len(expected), tf.__version__))


if __name__ == "__main__":
    main()
