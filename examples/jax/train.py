#!/usr/bin/env python3
"""Data-parallel training with JAX across processes (CPU), as tfslurm runs it.

Every task is a JAX process and runs this same program. tfslurm gives each
one jax.distributed.initialize's arguments: JAX_COORDINATOR_ADDRESS (process
0's host and the port its tfslurm agent holds bound for the coordinator),
JAX_NUM_PROCESSES and JAX_PROCESS_ID, and JAX_LOCAL_DEVICE_IDS when Slurm
bound GPUs to the task. They are passed explicitly, with JAX's own cluster
detection off, so nothing is guessed from SLURM_* (docs/jax.md).

Each process trains a linear model on its own shard of a synthetic regression
set. Every step, the gradients are averaged across all processes with
jax.lax.pmean over a mesh of every process's device (one CPU device each), so
the parameters stay identical on all of them. At --steps every process writes
a digest of its parameters to MODEL_DIR/digests/process-<id>.txt and exits 0:
equal digests show the all-reduce really ran (the shards differ).

Checkpoints, in Orbax's CheckpointManager layout without needing Orbax:
process 0 writes step S into MODEL_DIR/S.orbax-checkpoint-tmp/ and renames it
to MODEL_DIR/S/ when complete, every K steps and at the next step after
SIGUSR1, keeping the last three; tfslurm's agent reports the largest step as
progress. At start every process loads the latest, so a restarted or resumed
attempt continues from it. Process 0 also logs the loss as a training scalar
(TFSLURM_SCALARS_FILE, docs/scalars.md).
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import sys
import time

# Slurm's time-limit warning (sbatch --signal) reaches every task as SIGUSR1,
# whose default action is to die; it may come while JAX is still importing.
# So it is ignored before that import, then handled below.
signal.signal(signal.SIGUSR1, signal.SIG_IGN)

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

FEATURES = 16
STEP_DIR = re.compile(r"^\d+$")  # Orbax's default step name: the step
TMP_SUFFIX = ".orbax-checkpoint-tmp"


def log(message):
    print(f"jax-example: {message}", flush=True)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="target step")
    parser.add_argument("--checkpoint-every", type=int, default=50, metavar="K",
                        help="process 0 checkpoints every K steps")
    parser.add_argument("--batch-size", type=int, default=32, help="minibatch per process")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic set")
    parser.add_argument("--step-delay-ms", type=int, default=0,
                        help="sleep this long after each step (to make a tiny model take time)")
    parser.add_argument("--timeout-s", type=int, default=300,
                        help="jax.distributed's initialization timeout")
    return parser.parse_args()


def initialize(timeout_s):
    """jax.distributed.initialize with tfslurm's values, JAX's detection off."""
    ids = os.environ.get("JAX_LOCAL_DEVICE_IDS")
    jax.distributed.initialize(
        coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
        num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
        process_id=int(os.environ["JAX_PROCESS_ID"]),
        local_device_ids=[int(i) for i in ids.split(",")] if ids else None,
        cluster_detection_method="deactivate",
        initialization_timeout=timeout_s)


def process_shard(seed, process, size=2048):
    """This process's own samples of y = x . w_true + noise (w_true shared)."""
    w_true = np.random.default_rng(seed).standard_normal((FEATURES, 1))
    gen = np.random.default_rng(seed * 1000003 + process + 1)
    x = gen.standard_normal((size, FEATURES))
    y = x @ w_true + 0.1 * gen.standard_normal((size, 1))
    return x.astype(np.float32), y.astype(np.float32)


def initial_params(seed):
    gen = np.random.default_rng(seed + 7)
    return {"w": (0.1 * gen.standard_normal((FEATURES, 1))).astype(np.float32),
            "b": np.zeros((1,), np.float32)}


def parameters_digest(params):
    digest = hashlib.sha256()
    for name in sorted(params):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(params[name]).tobytes())
    return digest.hexdigest()


def checkpoint_steps(model_dir):
    return sorted(int(n) for n in os.listdir(model_dir)
                  if STEP_DIR.match(n) and os.path.isdir(os.path.join(model_dir, n)))


def save_checkpoint(model_dir, step, params, why="", keep=3):
    final = os.path.join(model_dir, str(step))
    tmp = final + TMP_SUFFIX
    shutil.rmtree(tmp, ignore_errors=True)  # a save a killed attempt left half-done
    os.makedirs(tmp)
    with open(os.path.join(tmp, "params.npz"), "wb") as out:
        np.savez(out, step=np.int64(step), **params)
        out.flush()
        os.fsync(out.fileno())
    if os.path.isdir(final):  # the same step saved again (after a restart)
        shutil.rmtree(final)
    os.rename(tmp, final)  # complete: only now does it have a step's name
    for old in checkpoint_steps(model_dir)[:-keep]:
        shutil.rmtree(os.path.join(model_dir, str(old)), ignore_errors=True)
    log(f"checkpoint{why} step={step} path={final}")


def load_checkpoint(model_dir, step):
    with np.load(os.path.join(model_dir, str(step), "params.npz")) as data:
        return int(data["step"]), {"w": data["w"], "b": data["b"]}


def main():
    args = parse_args()
    model_dir = os.environ.get("MODEL_DIR")
    if not model_dir:
        print("jax-example: error: MODEL_DIR is not set", file=sys.stderr)
        return 2
    os.makedirs(model_dir, exist_ok=True)
    save_now = []
    signal.signal(signal.SIGUSR1, lambda *_: save_now.append(True))

    started = time.monotonic()
    initialize(args.timeout_s)
    process, count = jax.process_index(), jax.process_count()
    log(f"initialized in {time.monotonic() - started:.3f} s: process_index={process} "
        f"process_count={count} coordinator={os.environ['JAX_COORDINATOR_ADDRESS']} "
        f"local_devices={len(jax.local_devices())} devices={jax.device_count()} "
        f"attempt={os.environ.get('TFSLURM_ATTEMPT', '1')}")

    # One axis over every process's devices; the batch is split along it, the
    # parameters are replicated.
    mesh = Mesh(np.array(jax.devices()), ("data",))
    replicated = NamedSharding(mesh, P())
    sharded = NamedSharding(mesh, P("data"))
    local = len(jax.local_devices())

    params = initial_params(args.seed)
    step = 0
    steps = checkpoint_steps(model_dir)
    if steps:
        step, params = load_checkpoint(model_dir, steps[-1])
        log(f"restored step={step}")
    params = {k: jax.make_array_from_process_local_data(replicated, v, v.shape)
              for k, v in params.items()}

    def loss_fn(p, x, y):
        return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    @jax.jit
    def train_step(p, x, y):
        @jax.shard_map(mesh=mesh, in_specs=(P(), P("data"), P("data")),
                       out_specs=(P(), P()))
        def per_device(p, x, y):
            loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
            # The all-reduce across processes: every device gets the mean.
            grads = jax.lax.pmean(grads, "data")
            return jax.tree.map(lambda w, g: w - args.lr * g, p, grads), \
                jax.lax.pmean(loss, "data")
        return per_device(p, x, y)

    x, y = process_shard(args.seed, process)
    per_process = args.batch_size * local
    batches = x.shape[0] // per_process
    scalars = os.environ.get("TFSLURM_SCALARS_FILE")
    while step < args.steps:
        b = step % batches
        xb = x[b * per_process:(b + 1) * per_process]
        yb = y[b * per_process:(b + 1) * per_process]
        gx = jax.make_array_from_process_local_data(sharded, xb, (per_process * count, FEATURES))
        gy = jax.make_array_from_process_local_data(sharded, yb, (per_process * count, 1))
        params, loss = train_step(params, gx, gy)
        step += 1
        if step % 10 == 0 or step == args.steps:
            loss_value = float(np.asarray(loss.addressable_data(0)))
            log(f"step={step} loss={loss_value:.5f}")
            if scalars:
                with open(scalars, "a") as out:
                    out.write(json.dumps({"step": step, "loss": loss_value,
                                          "wall_time": time.time()}) + "\n")
        if process == 0 and (step % args.checkpoint_every == 0 or step == args.steps or save_now):
            why = " on signal SIGUSR1" if save_now else ""
            save_now.clear()
            host = {k: np.asarray(v.addressable_data(0)) for k, v in params.items()}
            save_checkpoint(model_dir, step, host, why)
        if args.step_delay_ms:
            time.sleep(args.step_delay_ms / 1000)

    host = {k: np.asarray(v.addressable_data(0)) for k, v in params.items()}
    digest = parameters_digest(host)
    digests = os.path.join(model_dir, "digests")
    os.makedirs(digests, exist_ok=True)
    with open(os.path.join(digests, f"process-{process}.txt"), "w") as out:
        out.write(f"{step} {count} {digest}\n")
    log(f"done step={step} digest={digest}")
    # shutdown() waits at the coordinator's barrier, so process 0's service
    # outlives every other process's last use of it.
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
