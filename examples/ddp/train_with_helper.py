#!/usr/bin/env python3
"""examples/ddp/train.py written with tfslurm's helper (tfslurm.task): the
same model, data and checkpoints, with what the raw variant spells out by
hand taken from the helper:

  raw train.py                                  here
  signal.signal(SIGUSR1, SIG_IGN) before import  nothing: the agent starts it ignored
  a SIGUSR1 handler filling a list               t.should_checkpoint()
  init_process_group("gloo", "env://", ...)     t.torch_process_group("gloo")
  int(os.environ["LOCAL_RANK"]), RANK, ...      t.index, t.local_rank, t.is_chief
  finding ckpt-<step>.pt in MODEL_DIR           t.start_step, t.checkpoint_file(step)
  save under .tmp, then os.replace              with t.saving(path) as tmp
  (no training scalars)                         t.report(step, loss=...)

Needs the tfslurm package on the nodes (pip install client/python, or
PYTHONPATH=<checkout>/client/python/src as experiment_with_helper.yaml sets).
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from tfslurm import task

# The model, its data and its digest are the raw example's.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train import FEATURES, parameters_digest, rank_shard  # noqa: E402


def log(message):
    print(f"ddp-helper: {message}", flush=True)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="target step")
    parser.add_argument("--checkpoint-every", type=int, default=50, metavar="K")
    parser.add_argument("--report-every", type=int, default=10, metavar="N",
                        help="report the loss as a training scalar every N steps")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--step-delay-ms", type=int, default=0)
    parser.add_argument("--timeout-s", type=int, default=300)
    return parser.parse_args()


def main():
    args = parse_args()
    t = task.init()  # who this task is; SIGUSR1 handled from here on
    os.makedirs(t.model_dir, exist_ok=True)
    t.torch_process_group("gloo", timeout_s=args.timeout_s)

    torch.manual_seed(args.seed)  # the same initial parameters on every rank
    model = DistributedDataParallel(torch.nn.Linear(FEATURES, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    step = t.start_step  # the latest ckpt-<step>.pt, as tfslurm reads it
    if step:
        state = torch.load(t.checkpoint_file(step), map_location="cpu")
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    log(f"rank={t.index} local_rank={t.local_rank} world={t.num_tasks} attempt={t.attempt} "
        f"start_step={step}")

    def save(why=""):
        with t.saving(t.checkpoint_file(step)) as tmp:
            torch.save({"step": step, "model": model.module.state_dict(),
                        "optimizer": optimizer.state_dict()}, tmp)
        log(f"checkpoint{why} step={step}")

    x, y = rank_shard(args.seed, t.index)
    batches = x.shape[0] // args.batch_size
    while step < args.steps:
        b = step % batches
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[b * args.batch_size:(b + 1) * args.batch_size]),
                                            y[b * args.batch_size:(b + 1) * args.batch_size])
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        step += 1
        if step % args.report_every == 0 or step == args.steps:
            t.report(step, loss=loss)  # rank 0's reach the dashboard and tfctl metrics
        # The time-limit warning asks for a checkpoint now; rank 0 saves it.
        warned = t.should_checkpoint()
        if t.is_chief and (warned or step % args.checkpoint_every == 0 or step == args.steps):
            save(" on the time-limit warning" if warned else "")
        if args.step_delay_ms:
            time.sleep(args.step_delay_ms / 1000)

    log(f"done step={step} digest={parameters_digest(model.module)}")
    dist.barrier()  # nobody tears the store down while another rank still uses it
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
