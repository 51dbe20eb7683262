"""A program that checkpoints and restarts twice in quick succession, for the
dashboard's e2e tests (issue 48): restart markers at the step an attempt
resumed from, and their names kept apart when restarts come close together.

It reports {"step": N, "loss": X} every --every steps into
$TFSLURM_SCALARS_FILE and checkpoints every --checkpoint-every steps as
TensorFlow's state file does (MODEL_DIR/checkpoint naming model.ckpt-N),
which tfslurm reads as the step an attempt starts from.

  attempt 1: steps 1..--fail-at, then dies as if killed (exit 137)
  attempt 2: from the checkpoint, six reports (60 steps: over a second, so
             that it has a steps-per-second point), then dies the same way
  attempt 3: from the checkpoint to --steps, exit 0

loss = 1 / (1 + step / 100). With --every 10 and a checkpoint at 300, the
later attempts' first report is at step 310: the restart is at 300.
"""
import argparse
import json
import os
import re
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--fail-at", type=int, default=350)
    p.add_argument("--every", type=int, default=10)
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--pause", type=float, default=0.02)
    args = p.parse_args()
    attempt = int(os.environ.get("TFSLURM_ATTEMPT", "1"))
    model_dir = os.environ["MODEL_DIR"]
    state = os.path.join(model_dir, "checkpoint")
    step = 0
    if os.path.exists(state):
        step = int(re.search(r"model\.ckpt-(\d+)", open(state).read()).group(1))
    end = args.fail_at if attempt == 1 else step + 6 * args.every if attempt == 2 else args.steps
    with open(os.environ["TFSLURM_SCALARS_FILE"], "a") as f:
        while step < end:
            step += 1
            time.sleep(args.pause)
            if step % args.every == 0:
                f.write(json.dumps({"step": step, "wall_time": time.time(), "loss": 1 / (1 + step / 100)}) + "\n")
                f.flush()
            if attempt == 1 and step % args.checkpoint_every == 0:
                open(os.path.join(model_dir, f"model.ckpt-{step}"), "w").write("weights\n")
                with open(state + ".tmp", "w") as s:
                    s.write(f'model_checkpoint_path: "model.ckpt-{step}"\n')
                os.replace(state + ".tmp", state)
    print(f"restart_twice: attempt {attempt} reached step {step}", flush=True)
    if attempt < 3:
        sys.exit(137)


if __name__ == "__main__":
    main()
