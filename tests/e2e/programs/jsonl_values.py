"""A program for the charts' e2e tests: it appends to $TFSLURM_SCALARS_FILE
(JSON lines) steps 0..--steps, every tag at every step, then exits 0. Steps
0..N-1 are written 10 ms apart in wall time and the last one
--last-after seconds after the first, so the service computes exactly one
steps-per-second value (it skips points closer than a second): the chart
of a single point. Values the test recomputes:

  loss   = 4 / (1 + step) ** 2      (above 0, over two decades)
  margin = (step - 5) / 10          (0 and below for steps 0..5)
  zero   = 0                        (nothing a log scale can draw)

Usage: jsonl_values.py [--steps N] [--last-after S]
"""
import argparse
import json
import os
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--last-after", type=float, default=10.0)
    args = p.parse_args()
    start = time.time() - args.last_after
    with open(os.environ["TFSLURM_SCALARS_FILE"], "a") as f:
        for step in range(args.steps + 1):
            wall = start + args.last_after if step == args.steps else start + step * 0.01
            line = {
                "step": step,
                "wall_time": wall,
                "loss": 4 / (1 + step) ** 2,
                "margin": (step - 5) / 10,
                "zero": 0,
            }
            f.write(json.dumps(line) + "\n")
    print(f"jsonl_values: wrote steps 0..{args.steps}", flush=True)
    # The agent reads the file about once a second, and once more at the end.
    time.sleep(1.5)


if __name__ == "__main__":
    main()
