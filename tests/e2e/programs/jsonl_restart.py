"""A program that restarts, for the dashboard's e2e tests: it appends training
scalars to $TFSLURM_SCALARS_FILE (JSON lines, {"step": N, "loss": X}), and
its first attempt dies as if killed (exit 137, a retryable_exit) after step
--fail-after; the second attempt resumes from step --resume-from, as from a
checkpoint, and finishes. Values the test recomputes:

  attempt 1: loss = 1 / (1 + step)
  attempt 2: loss = 0.8 / (1 + step)
  extra/tag_KK (K < --extra-tags) = K + step / 100, in every attempt

Usage: jsonl_restart.py --steps N --fail-after F --resume-from R
                        [--extra-tags K] [--pause S]
"""
import argparse
import json
import os
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=14)
    p.add_argument("--fail-after", type=int, default=9)
    p.add_argument("--resume-from", type=int, default=6)
    p.add_argument("--extra-tags", type=int, default=0)
    p.add_argument("--pause", type=float, default=0.15)
    args = p.parse_args()
    attempt = int(os.environ.get("TFSLURM_ATTEMPT", "1"))
    first = attempt == 1
    start = 0 if first else args.resume_from
    end = args.fail_after + 1 if first else args.steps
    scale = 1.0 if first else 0.8
    with open(os.environ["TFSLURM_SCALARS_FILE"], "a") as f:
        for step in range(start, end):
            # wall_time as a program should write it: without it the agent
            # stamps each line with the time it read it, and lines read in
            # one poll would be microseconds apart.
            line = {"step": step, "wall_time": time.time(), "loss": scale / (1 + step)}
            line.update({f"extra/tag_{k:02d}": k + step / 100 for k in range(args.extra_tags)})
            f.write(json.dumps(line) + "\n")
            f.flush()
            time.sleep(args.pause)
    print(f"jsonl_restart: attempt {attempt} wrote steps {start}..{end - 1}", flush=True)
    time.sleep(1.5)
    if first:
        sys.exit(137)


if __name__ == "__main__":
    main()
