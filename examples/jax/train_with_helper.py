#!/usr/bin/env python3
"""examples/jax/train.py written with tfslurm's helper (tfslurm.task): the
same model, data and Orbax-layout checkpoints, with what the raw variant
spells out by hand taken from the helper:

  raw train.py                                   here
  signal.signal(SIGUSR1, SIG_IGN) before import   nothing: the agent starts it ignored
  a SIGUSR1 handler filling a list                t.should_checkpoint()
  jax.distributed.initialize(... four variables   t.jax_initialize()
    from the environment ..., detection off)
  listing MODEL_DIR's <step>/ directories          t.start_step
  write <step>.orbax-checkpoint-tmp, rename        with t.saving(dir) as tmp
  JSON lines into TFSLURM_SCALARS_FILE by hand     t.report(step, loss=...)

Needs the tfslurm package in the JAX venv's reach (pip install client/python,
or PYTHONPATH=<checkout>/client/python/src as experiment_with_helper.yaml sets).
"""

import argparse
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from tfslurm import task  # noqa: E402

# The model, its data and its checkpoint format are the raw example's.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import (FEATURES, initial_params, load_checkpoint, parameters_digest,  # noqa: E402
                   process_shard)


def log(message):
    print(f"jax-helper: {message}", flush=True)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--checkpoint-every", type=int, default=50, metavar="K")
    parser.add_argument("--report-every", type=int, default=10, metavar="N")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--step-delay-ms", type=int, default=0)
    parser.add_argument("--timeout-s", type=int, default=300)
    return parser.parse_args()


def main():
    args = parse_args()
    t = task.init()
    os.makedirs(t.model_dir, exist_ok=True)
    t.jax_initialize(initialization_timeout=args.timeout_s)
    count = jax.process_count()
    log(f"process_index={jax.process_index()} process_count={count} attempt={t.attempt} "
        f"start_step={t.start_step}")

    mesh = Mesh(np.array(jax.devices()), ("data",))
    replicated = NamedSharding(mesh, P())
    sharded = NamedSharding(mesh, P("data"))
    local = len(jax.local_devices())

    step, params = (load_checkpoint(t.model_dir, t.start_step) if t.start_step
                    else (0, initial_params(args.seed)))
    params = {k: jax.make_array_from_process_local_data(replicated, v, v.shape)
              for k, v in params.items()}

    def loss_fn(p, x, y):
        return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    @jax.jit
    def train_step(p, x, y):
        @jax.shard_map(mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=(P(), P()))
        def per_device(p, x, y):
            loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
            grads = jax.lax.pmean(grads, "data")  # the all-reduce across processes
            return jax.tree.map(lambda w, g: w - args.lr * g, p, grads), jax.lax.pmean(loss, "data")
        return per_device(p, x, y)

    def host(params):
        return {k: np.asarray(v.addressable_data(0)) for k, v in params.items()}

    def save(why=""):
        # Orbax's layout: MODEL_DIR/<step>/, complete before it has the name.
        with t.saving(os.path.join(t.model_dir, str(step))) as tmp:
            os.makedirs(tmp)
            with open(os.path.join(tmp, "params.npz"), "wb") as out:
                np.savez(out, step=np.int64(step), **host(params))
        log(f"checkpoint{why} step={step}")

    x, y = process_shard(args.seed, t.index)
    per_process = args.batch_size * local
    batches = x.shape[0] // per_process
    while step < args.steps:
        b = step % batches
        gx = jax.make_array_from_process_local_data(
            sharded, x[b * per_process:(b + 1) * per_process], (per_process * count, FEATURES))
        gy = jax.make_array_from_process_local_data(
            sharded, y[b * per_process:(b + 1) * per_process], (per_process * count, 1))
        params, loss = train_step(params, gx, gy)
        step += 1
        if step % args.report_every == 0 or step == args.steps:
            t.report(step, loss=np.asarray(loss.addressable_data(0)))
        warned = t.should_checkpoint()
        if t.is_chief and (warned or step % args.checkpoint_every == 0 or step == args.steps):
            save(" on the time-limit warning" if warned else "")
        if args.step_delay_ms:
            time.sleep(args.step_delay_ms / 1000)

    log(f"done step={step} digest={parameters_digest(host(params))}")
    jax.distributed.shutdown()  # waits at the coordinator's barrier
    return 0


if __name__ == "__main__":
    sys.exit(main())
