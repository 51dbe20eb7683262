#!/usr/bin/env python3
"""Data-parallel training with PyTorch's DistributedDataParallel on the gloo
backend (CPU), as tfslurm runs it.

Every task is a rank and runs this same program. tfslurm gives each one
torch.distributed's env:// variables (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT, ...), so init_process_group needs no arguments
but the backend. Each rank trains on its own shard of a synthetic regression
set; DDP averages the gradients across ranks at every step, so the
parameters stay identical on all of them. At --steps every rank writes a
digest of its parameters to MODEL_DIR/digests/rank-<RANK>.txt and exits 0:
equal digests show the all-reduce really ran (the shards differ).

Checkpoints: rank 0 saves MODEL_DIR/ckpt-<step>.pt every K steps (written
under a temporary name, then renamed, so a checkpoint's name never points at
a half-written file), keeping the last three; tfslurm's agent reports the
largest step as progress. At start every rank loads the latest, so a
restarted or resumed attempt continues from it.
"""

import argparse
import datetime
import hashlib
import os
import re
import signal
import sys
import time

# Slurm's time-limit warning (sbatch --signal) reaches every task as SIGUSR1,
# whose default action is to die, and slurmctld may send it as early as the
# warning time plus 30 s before the end (PERIODIC_TIMEOUT, _job_timed_out in
# src/slurmctld/job_mgr.c), which in a short job can be while the framework
# below is still importing. So it is ignored before that import.
signal.signal(signal.SIGUSR1, signal.SIG_IGN)

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

FEATURES = 16
CHECKPOINT = re.compile(r"^ckpt-(\d+)\.pt$")


def log(message):
    print(f"ddp: {message}", flush=True)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="target step")
    parser.add_argument("--checkpoint-every", type=int, default=50, metavar="K",
                        help="rank 0 checkpoints every K steps")
    parser.add_argument("--batch-size", type=int, default=32, help="minibatch per rank")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic set")
    parser.add_argument("--step-delay-ms", type=int, default=0,
                        help="sleep this long after each step (to make a tiny model take time)")
    parser.add_argument("--log-every", type=int, default=10, metavar="N",
                        help="log the step and loss every N steps")
    parser.add_argument("--timeout-s", type=int, default=300,
                        help="torch.distributed's timeout for the rendezvous and collectives")
    args = parser.parse_args()
    if args.log_every < 1:
        parser.error("--log-every must be at least 1")
    return args


def rank_shard(seed, rank, size=2048):
    """This rank's own samples of y = x . w_true + noise (w_true shared)."""
    w_true = torch.randn(FEATURES, 1, generator=torch.Generator().manual_seed(seed))
    gen = torch.Generator().manual_seed(seed * 1000003 + rank + 1)
    x = torch.randn(size, FEATURES, generator=gen)
    y = x @ w_true + 0.1 * torch.randn(size, 1, generator=gen)
    return x, y


def parameters_digest(model):
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def latest_checkpoint(model_dir):
    steps = [int(m.group(1)) for m in map(CHECKPOINT.match, os.listdir(model_dir)) if m]
    return max(steps) if steps else None


def save_checkpoint(model_dir, step, model, optimizer, why="", keep=3):
    path = os.path.join(model_dir, f"ckpt-{step}.pt")
    tmp = path + ".tmp"
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()},
               tmp)
    os.replace(tmp, path)
    steps = sorted(int(m.group(1)) for m in map(CHECKPOINT.match, os.listdir(model_dir)) if m)
    for old in steps[:-keep]:
        os.remove(os.path.join(model_dir, f"ckpt-{old}.pt"))
    log(f"checkpoint{why} step={step} path={path}")


def main():
    args = parse_args()
    model_dir = os.environ.get("MODEL_DIR")
    if not model_dir:
        print("ddp: error: MODEL_DIR is not set", file=sys.stderr)
        return 2
    os.makedirs(model_dir, exist_ok=True)
    # Slurm's time-limit warning (sbatch --signal) reaches every task as
    # SIGUSR1, whose default action is to die: rank 0 checkpoints at the next
    # step instead, so the next attempt loses as little as possible.
    save_now = []
    signal.signal(signal.SIGUSR1, lambda *_: save_now.append(True))

    # env:// reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; rank 0's
    # TCPStore binds MASTER_PORT, which its tfslurm agent holds reserved.
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=args.timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])

    torch.manual_seed(args.seed)  # the same initial parameters on every rank
    model = DistributedDataParallel(torch.nn.Linear(FEATURES, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    step = 0
    latest = latest_checkpoint(model_dir)
    if latest is not None:
        state = torch.load(os.path.join(model_dir, f"ckpt-{latest}.pt"), map_location="cpu")
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
        log(f"restored step={step}")

    log(f"rank={rank} local_rank={local_rank} world={world} "
        f"node_rank={os.environ.get('NODE_RANK')} master={os.environ.get('MASTER_ADDR')}:"
        f"{os.environ.get('MASTER_PORT')} attempt={os.environ.get('TFSLURM_ATTEMPT', '1')} "
        f"start_step={step}")

    x, y = rank_shard(args.seed, rank)
    batches = x.shape[0] // args.batch_size
    while step < args.steps:
        b = step % batches
        features = x[b * args.batch_size:(b + 1) * args.batch_size]
        labels = y[b * args.batch_size:(b + 1) * args.batch_size]
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(features), labels)
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        step += 1
        if step % args.log_every == 0 or step == args.steps:
            log(f"step={step} loss={loss.item():.5f}")
        if rank == 0 and (step % args.checkpoint_every == 0 or step == args.steps or save_now):
            why = " on signal SIGUSR1" if save_now else ""
            save_now.clear()
            save_checkpoint(model_dir, step, model.module, optimizer, why)
        if args.step_delay_ms:
            time.sleep(args.step_delay_ms / 1000)

    digest = parameters_digest(model.module)
    digests = os.path.join(model_dir, "digests")
    os.makedirs(digests, exist_ok=True)
    with open(os.path.join(digests, f"rank-{rank}.txt"), "w") as out:
        out.write(f"{step} {digest}\n")
    log(f"done step={step} digest={digest}")
    dist.barrier()  # nobody tears the store down while another rank still uses it
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
