#!/usr/bin/env python3
"""How fast a trial that a sweep's rule stops really stops (issue 48, point
4), the measuring half of sweep_stop.sh.

Each run is a sweep of two linear_ps trials (1 ps + 1 worker, one node),
one at a time, in listed order: trial 1 at a good learning rate, trial 2 at
one far too small, both for far more steps than they will run. ASHA judges
them at one rung. Trial 1 is the first there and goes on; the script then
cancels it, trial 2 starts, reaches the rung worse, and the rule stops it.
For trial 2 it measures:
  - decision -> programs gone: from the `stopped_early` event (the time
    tfslurmd decided, ms) to the moment both its train.py processes have
    left /proc (watched every 2 ms);
  - rung -> decision: from the wall_time of its first point at or past the
    rung (written by train.py into $TFSLURM_SCALARS_FILE) to the decision;
    this is the sweep's poll (--poll-interval-ms) and the agent's scalar
    batching (about 1 s), not the stop;
  - the step it was judged at and the step it stopped at (the sweep's
    last_step), and the checkpoint its SIGTERM handler saved.
Side by side, in the same run, the anchor: a plain linear_ps experiment of
the same shape whose Slurm job is cancelled with `scancel --signal=KILL`,
the call tfslurmd's cancel makes (slurm_kill_job with SIGKILL,
LibslurmClient::CancelJob), from scancel's return to its programs gone: how
long a stop took when it went through Slurm alone.

Prints a Markdown table and a summary; exits 1 if a run went wrong (the
trial not stopped early, a program still running, a missing event).
"""
import argparse
import json
import os
import subprocess
import sys
import time

from http_json import http
from reaping import epoch, percentile, task_processes


def wait(what, probe, timeout, interval=0.1):
    deadline = time.time() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.time() > deadline:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def watch_gone(pids, timeout):
    """{pid: when it left /proc}, polled every 2 ms."""
    gone = {}
    deadline = time.time() + timeout
    while len(gone) < len(pids):
        if time.time() > deadline:
            raise RuntimeError(f"processes still running {timeout} s on: {sorted(set(pids) - set(gone))}")
        now = time.time()
        for pid in pids:
            if pid not in gone and not os.path.exists(f"/proc/{pid}"):
                gone[pid] = now
        time.sleep(0.002)
    return gone


def experiment(api, exp_id):
    status, body = http("GET", f"{api}/experiments/{exp_id}")
    if status != 200:
        raise RuntimeError(f"GET /experiments/{exp_id} answered {status}: {body}")
    return body


def base_experiment(repo, step_sleep):
    return {
        "command": ["python3", os.path.join(repo, "examples/linear_ps/train.py"), "--steps=1000000",
                    "--log-every=1", "--checkpoint-every=1000000", f"--step-sleep={step_sleep}"],
        "workdir": os.path.join(repo, "examples/linear_ps"),
        "cluster": {"ps": 1, "worker": 1},
        "resources": {"partition": "debug", "nodes": 1, "tasks_per_node": 2, "time_limit": "00:10:00"},
        "restart": {"max_restarts": 0},
    }


def one_stop(api, repo, sweep_id, rung, step_sleep, timeout):
    spec = {
        "id": sweep_id,
        "experiment": base_experiment(repo, step_sleep),
        "parameters": {"arg.--lr": {"values": [0.2, 0.0001]}},
        "search": {"type": "grid", "order": "listed"},
        "max_concurrent": 1,
        "objective": {"tag": "loss", "goal": "min"},
        "early_stopping": {"rule": "asha", "rungs": [rung], "reduction_factor": 2},
    }
    status, body = http("POST", f"{api}/sweeps", spec)
    if status != 201:
        raise RuntimeError(f"POST /sweeps answered {status}: {body}")
    first, second = f"{sweep_id}-1", f"{sweep_id}-2"

    def passed():
        _, s = http("GET", f"{api}/sweeps/{sweep_id}")
        return next((t for t in s["trials"] if t["index"] == 1 and t["rungs_passed"] >= 1), None)
    wait(f"{first} to pass rung {rung}", passed, timeout)
    status, body = http("DELETE", f"{api}/experiments/{first}")
    if status != 200:
        raise RuntimeError(f"DELETE /experiments/{first} answered {status}: {body}")

    pids = wait(f"both programs of {second}", lambda: (lambda p: p if len(p) == 2 else None)(task_processes(second)),
                timeout, interval=0.02)
    gone = watch_gone(pids, timeout)
    exp = wait(f"{second}'s stop to be recorded",
               lambda: (lambda e: e if any(ev["what"] == "stopped_early" for ev in e["events"]) else None)(
                   experiment(api, second)), timeout)
    trial = wait(f"trial 2 of {sweep_id} to end",
                 lambda: next((t for t in http("GET", f"{api}/sweeps/{sweep_id}")[1]["trials"]
                               if t["index"] == 2 and t["state"] == "ended"), None), timeout)
    exp = experiment(api, second)  # as it ended: every task's end recorded
    events = exp["events"]
    decided = epoch(next(ev["at"] for ev in events if ev["what"] == "stopped_early"))
    reaping = [ev for ev in events if ev["what"] == "reaping" and "Shutdown sent" in ev["why"]]
    status, metrics = http("GET", f"{api}/experiments/{second}/metrics?tag=loss")
    series = next((x for x in metrics.get("series", []) if x["tag"] == "loss"), None) if status == 200 else None
    at_rung = None
    if series:
        at_rung = next((series["wall_time"][i] for i, st in enumerate(series["step"]) if st >= rung), None)
    problems = []
    if trial.get("end_reason") != "stopped_early":
        problems.append(f"trial 2 ended {trial.get('end_reason')}: {trial.get('note')}")
    if not reaping:
        problems.append("no Shutdown was sent to its agents")
    states = sorted(t["state"] for t in exp["tasks"])
    if states != ["reaped", "reaped"]:
        problems.append(f"task states {states}")
    checkpoint = (exp.get("checkpoint") or {}).get("step")
    return {
        "sweep": sweep_id,
        "stop_ms": (max(gone.values()) - decided) * 1000,
        "decide_ms": (decided - at_rung) * 1000 if at_rung else float("nan"),
        "judged_at": trial.get("objective_step"),
        "last_step": trial.get("last_step"),
        "checkpoint": checkpoint,
        "problems": "; ".join(problems),
    }


def one_scancel(api, repo, exp_id, step_sleep, timeout):
    spec = dict(base_experiment(repo, step_sleep), id=exp_id)
    status, body = http("POST", f"{api}/experiments", spec)
    if status != 201:
        raise RuntimeError(f"POST /experiments answered {status}: {body}")
    pids = wait(f"both programs of {exp_id}", lambda: (lambda p: p if len(p) == 2 else None)(task_processes(exp_id)),
                timeout, interval=0.02)
    # Training, as a stopped trial would be.
    wait(f"{exp_id}'s first checkpointless steps", lambda: experiment(api, exp_id)["state"] == "running", timeout)
    job = experiment(api, exp_id)["slurm_job_id"]
    subprocess.run(["scancel", "--signal=KILL", str(job)], check=True)
    sent = time.time()
    gone = watch_gone(pids, timeout)
    http("DELETE", f"{api}/experiments/{exp_id}")
    return (max(gone.values()) - sent) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rung", type=int, default=20)
    ap.add_argument("--step-sleep", type=float, default=0.05)
    ap.add_argument("--timeout", type=float, default=180)
    args = ap.parse_args()

    stamp = time.strftime("%H%M%S")
    results = []
    for i in range(args.runs):
        r = one_stop(args.api, args.repo, f"stop-{stamp}-{i}", args.rung, args.step_sleep, args.timeout)
        r["scancel_ms"] = one_scancel(args.api, args.repo, f"scancel-{stamp}-{i}", args.step_sleep, args.timeout)
        results.append(r)
        print(f"  run {i}: programs gone {r['stop_ms']:.0f} ms after the decision (scancel alone: "
              f"{r['scancel_ms']:.0f} ms); decided {r['decide_ms']:.0f} ms after the rung; judged at step "
              f"{r['judged_at']}, stopped at step {r['last_step']} {r['problems']}", file=sys.stderr)

    print("| run | sweep | decision -> programs gone (ms) | anchor: scancel --signal=KILL -> programs gone (ms) "
          "| rung reached -> decision (ms) | judged at step | last step | checkpoint step | problems |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(results):
        print(f"| {i} | {r['sweep']} | {r['stop_ms']:.0f} | {r['scancel_ms']:.0f} | {r['decide_ms']:.0f} "
              f"| {r['judged_at']} | {r['last_step']} | {r['checkpoint']} | {r['problems'] or '-'} |")
    stop = [r["stop_ms"] for r in results]
    anchor = [r["scancel_ms"] for r in results]
    print()
    print(f"**A stopped trial's programs gone** after the rule's decision: p50 {percentile(stop, 50):.0f} ms, "
          f"max {max(stop):.0f} ms over {len(stop)} runs (target < 1000 ms: "
          f"{'met' if max(stop) < 1000 else 'MISSED'}); through Slurm's cancel alone, in the same runs: "
          f"p50 {percentile(anchor, 50):.0f} ms, max {max(anchor):.0f} ms.")
    failed = any(r["problems"] for r in results) or max(stop) >= 1000
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
