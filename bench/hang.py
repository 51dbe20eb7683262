#!/usr/bin/env python3
"""Hang detection (issue 18), the measuring half of hang.sh.

For each stall timeout S (--stall-timeouts) submits RUNS experiments to a
running tfslurmd, one after the other. Each runs a tiny Python program (one
worker, no TensorFlow) that writes TensorFlow's `checkpoint` state file in
MODEL_DIR once per step, which the agent reports as progress (as
tests/integration/test_stall.py does). In attempt 1 the program writes the
step --hang-after-step (plus the run's offset, below), records the wall time in MODEL_DIR/hang.1 and then
sleeps forever: alive, its agent still heartbeating. The service must record
`stalled`, end the attempt and start attempt 2, which resumes from the
checkpoint, records its start and its first step (MODEL_DIR/start.2,
first_step.2) and finishes a few steps later.

Per run, from the hang (the last step written):
  - the service's last `checkpoint` event (it saw the last step: the agent
    reads the state file about once a second, its progress poll; at each
    heartbeat before 1f6b170);
  - the `stalled` event (its `at`, from the service's clock);
  - attempt 1's ended_at (the service saw the Slurm job end);
  - attempt 2's submitted_at, its program's start, its first step.
The agent reads the state file at its progress poll, whose phase is set by
the program's start, so run i hangs i/RUNS of a poll period later than run 0
(more steps before the hang): the runs sample the whole period. The
service's timestamps have millisecond resolution and share the clock
(CLOCK_REALTIME) with the program; everything runs on this machine.

Prints a Markdown table of runs and a summary per S with min/median/max and
the ratio of NCCL's and NVRx's anchors to the median; exits 1 if a run went
wrong.
"""
import argparse
import calendar
import os
import statistics
import sys
import time

from http_json import http

# tfslurmd checks its timers (the stall timeout among them) every 200 ms
# (service/daemon/daemon.cc's ticker); it polls Slurm every poll interval.
TICK_S = 0.2
# The agent's progress poll (agent/session.cc, kProgressPollInterval).
PROGRESS_POLL_S = 1.0

PROGRAM = r'''
import os, sys, time
model_dir = os.environ["MODEL_DIR"]
attempt = int(os.environ["TFSLURM_ATTEMPT"])
hang_after, total, interval = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])


def mark(name, t):
    path = os.path.join(model_dir, f"{name}.{attempt}")
    with open(path + ".tmp", "w") as f:
        f.write(f"{t:.6f}\n")
    os.replace(path + ".tmp", path)


mark("start", time.time())
state = os.path.join(model_dir, "checkpoint")
step = 0
if os.path.exists(state):
    step = int(open(state).read().split('"')[1].rsplit("-", 1)[1])
print(f"hang: attempt={attempt} start_step={step}", flush=True)
first = True
while step < total:
    step += 1
    with open(state + ".tmp", "w") as f:
        f.write(f'model_checkpoint_path: "ckpt-{step}"\n')
    os.replace(state + ".tmp", state)
    now = time.time()
    if first:
        mark("first_step", now)
        first = False
    if attempt == 1 and step == hang_after:
        mark("hang", now)
        print(f"hang: hanging at step={step} t={now:.3f}", flush=True)
        while True:
            time.sleep(3600)
    time.sleep(interval)
print(f"hang: done step={step}", flush=True)
'''


def epoch(ts):
    """The API's "2024-01-02T03:04:05.678Z" as Unix seconds; None stays None."""
    if not ts:
        return None
    frac = ts[19:].rstrip("Z").lstrip(".")
    return calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")) + (float("0." + frac) if frac else 0.0)


def read_mark(model_dir, name):
    try:
        with open(os.path.join(model_dir, name)) as f:
            return float(f.read())
    except (OSError, ValueError):
        return None


def one_run(api, exp_id, program, stall_s, hang_step, args):
    total = hang_step + args.steps_after
    spec = {"id": exp_id,
            "command": ["/usr/bin/python3", program, str(hang_step), str(total), str(args.step_interval)],
            "cluster": {"worker": 1},
            "resources": {"partition": "debug", "nodes": 1, "tasks_per_node": 1, "time_limit": "00:15:00"},
            "progress": {"stall_timeout_s": stall_s},
            "restart": {"max_restarts": 1, "on": ["stalled"], "backoff_s": args.backoff_s}}
    load = open("/proc/loadavg").read().split()[0]
    status, body = http("POST", f"{api}/experiments", spec)
    if status not in (200, 201):
        raise RuntimeError(f"POST /experiments answered {status}: {body}")
    deadline = time.time() + stall_s + args.backoff_s + args.timeout
    while True:
        _, view = http("GET", f"{api}/experiments/{exp_id}")
        if view["state"] in ("succeeded", "failed", "cancelled"):
            break
        if time.time() > deadline:
            raise RuntimeError(f"{exp_id} still {view['state']} at the timeout: {view.get('reason')}")
        time.sleep(0.5)
    model_dir = view["model_dir"]
    events = view.get("events", [])
    problems = []
    if view["state"] != "succeeded":
        problems.append(f"experiment {view['state']}: {view.get('reason')}")
    attempts = view.get("attempts", [])
    if len(attempts) != 2:
        problems.append(f"{len(attempts)} attempts")
        attempts = (attempts + [{}, {}])[:2]
    a1, a2 = attempts
    if a1.get("end_reason") != "stalled":
        problems.append(f"attempt 1 ended {a1.get('end_reason')!r}")
    if a2.get("start_step") != hang_step:
        problems.append(f"attempt 2 start_step {a2.get('start_step')}")
    stalled = next((e for e in events if e["what"] == "stalled"), None)
    if stalled is None:
        problems.append("no stalled event")
    last_ckpt = [e for e in events if e["what"] == "checkpoint" and e.get("attempt") == 1
                 and e["why"].startswith(f"step {hang_step} ")]
    t_hang = read_mark(model_dir, "hang.1")
    if t_hang is None:
        problems.append("no hang.1 in MODEL_DIR")
        t_hang = float("nan")

    def since(t):
        return (t - t_hang) if t is not None else float("nan")
    return {
        "id": exp_id, "stall_s": stall_s, "load": load, "hang_step": hang_step,
        "jobs": f"{a1.get('slurm_job_id')}, {a2.get('slurm_job_id')}",
        "seen": since(epoch(last_ckpt[0]["at"]) if last_ckpt else None),
        "stalled": since(epoch(stalled["at"]) if stalled else None),
        "ended": since(epoch(a1.get("ended_at"))),
        "submitted": since(epoch(a2.get("submitted_at"))),
        "start2": since(read_mark(model_dir, "start.2")),
        "first2": since(read_mark(model_dir, "first_step.2")),
        "why": stalled["why"] if stalled else "",
        "problems": "; ".join(problems),
    }


def summary(values):
    v = [x for x in values if x == x]
    if not v:
        return "-", "-", "-"
    return f"{min(v):.2f}", f"{statistics.median(v):.2f}", f"{max(v):.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True)
    ap.add_argument("--work", required=True, help="a directory the jobs can read (the program goes there)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--stall-timeouts", default="10,30")
    ap.add_argument("--hang-after-step", type=int, default=5)
    ap.add_argument("--steps-after", type=int, default=3)
    ap.add_argument("--step-interval", type=float, default=0.5)
    ap.add_argument("--backoff-s", type=int, default=10)
    ap.add_argument("--poll-interval-ms", type=int, default=2000)
    ap.add_argument("--heartbeat-ms", type=int, default=5000)
    ap.add_argument("--timeout", type=float, default=180, help="per run, beyond S and the backoff")
    args = ap.parse_args()

    program = os.path.join(args.work, "hang_program.py")
    with open(program, "w") as f:
        f.write(PROGRAM)
    os.chmod(program, 0o755)
    stalls = [int(s) for s in args.stall_timeouts.split(",") if s]
    stamp = time.strftime("%H%M%S")
    results = []
    # The agent reads the state file at its progress poll, whose phase is
    # fixed by the program's start: run i hangs i/RUNS of a poll period
    # later, so that the runs sample the whole period.
    per_run = PROGRESS_POLL_S / max(1, args.runs) / args.step_interval
    for s in stalls:
        for i in range(args.runs):
            hang_step = args.hang_after_step + round(i * per_run)
            r = one_run(args.api, f"hang-{stamp}-s{s}-{i}", program, s, hang_step, args)
            results.append(r)
            print(f"  S={s} run {i}: stalled +{r['stalled']:.2f} s, first step of attempt 2 +{r['first2']:.2f} s "
                  f"(last step seen +{r['seen']:.2f}, attempt 1 ended +{r['ended']:.2f}, attempt 2 submitted "
                  f"+{r['submitted']:.2f}, started +{r['start2']:.2f}; load {r['load']}) {r['problems']}",
                  file=sys.stderr)

    print("All times in seconds after the hang (the program's last step, as it recorded it).")
    print()
    print("| S (s) | run | hung after step | Slurm jobs | load | last step seen by the service | **stalled** | seen -> stalled | attempt 1 ended "
          "| attempt 2 submitted | attempt 2 program start | **attempt 2 first step** | problems |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['stall_s']} | {r['id'].rsplit('-', 1)[1]} | {r['hang_step']} | {r['jobs']} | {r['load']} | {r['seen']:.2f} "
              f"| **{r['stalled']:.2f}** | {r['stalled'] - r['seen']:.2f} | {r['ended']:.2f} | {r['submitted']:.2f} | {r['start2']:.2f} "
              f"| **{r['first2']:.2f}** | {r['problems'] or '-'} |")
    print()
    print(f"tfslurmd: --poll-interval-ms {args.poll_interval_ms}, --heartbeat-ms {args.heartbeat_ms}; "
          f"restart.backoff_s {args.backoff_s}; the program writes a step every {args.step_interval} s and, "
          f"in attempt 1, hangs after step {args.hang_after_step} + round(run x {per_run:g}).")
    print()
    print("| S (s) | runs | hang -> stalled: min / median / max (s) | bound S + progress poll + tick (s) "
          "| hang -> attempt 2's first step: min / median / max (s) | NCCL 1,800 s / median stalled "
          "| torch >= 2.2's NCCL 600 s / median stalled | NVRx 300 s / median stalled "
          "| 1,800 s / median first step | 300 s / median first step |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in stalls:
        rs = [r for r in results if r["stall_s"] == s]
        st = [r["stalled"] for r in rs]
        fs = [r["first2"] for r in rs]
        bound = s + PROGRESS_POLL_S + TICK_S
        med_st = statistics.median([x for x in st if x == x] or [float("nan")])
        med_fs = statistics.median([x for x in fs if x == x] or [float("nan")])
        print(f"| {s} | {len(rs)} | {' / '.join(summary(st))} | {bound:g} | {' / '.join(summary(fs))} "
              f"| {1800 / med_st:.0f}x | {600 / med_st:.0f}x | {300 / med_st:.1f}x | {1800 / med_fs:.0f}x | {300 / med_fs:.1f}x |")
    print()
    print("The `stalled` event of the first run: " + (f"\"{results[0]['why']}\"" if results else "-"))
    return 1 if any(r["problems"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
