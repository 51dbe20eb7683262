#!/usr/bin/env python3
"""Reaping on the local cluster (issue 3), the measuring half of reaping.sh.

Submits examples/linear_ps (2 ps + 4 workers, spread over 3 nodes) to a
running tfslurmd RUNS times, one after the other, and for each run measures
  - the last tracked task's exit: the moment the last worker's train.py
    process is gone (success is "every worker exited 0": workers are the
    tracked tasks), found by watching the task processes' /proc entries
    every 2 ms;
  - the ps processes gone: both ps train.py processes have left /proc;
  - the Slurm job COMPLETED: `scontrol -o show job` polled back to back
    (each call is one RPC to slurmctld, ~10 ms); the time is the end of the
    first call that answered COMPLETED, so it is late by at most one call;
and checks that the experiment succeeded, both ps were "reaped" and the job
ended COMPLETED. Task processes are recognised by their command line
(train.py) and their environment (EXPERIMENT_ID, TFSLURM_ROLE), read from
/proc as root. The service's own times (ended_at of the tasks) are reported
too; they share the clock (CLOCK_REALTIME) with this script.

Prints a Markdown table of runs and a summary; exits 1 if a run went wrong.
"""
import argparse
import calendar
import json
import os
import subprocess
import sys
import threading
import time

from http_json import http


def task_processes(experiment_id):
    """{pid: role} of the train.py processes of `experiment_id`."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"train.py" not in f.read():
                    continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except OSError:
            continue
        if env.get(b"EXPERIMENT_ID", b"").decode() == experiment_id:
            found[int(entry)] = env.get(b"TFSLURM_ROLE", b"?").decode()
    return found


def job_state(job_id):
    out = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    for tok in out.split():
        if tok.startswith("JobState="):
            return tok.split("=", 1)[1]
    return None


def epoch(ts):
    """The API's "2024-01-02T03:04:05.678Z" as Unix seconds; None stays None."""
    if not ts:
        return None
    return calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")) + int(ts[20:23]) / 1000.0


def percentile(values, p):
    """Nearest rank."""
    v = sorted(values)
    if not v:
        return float("nan")
    rank = min(len(v), max(1, -(-len(v) * p // 100)))
    return v[int(rank) - 1]


def one_run(api, spec, timeout):
    exp_id = spec["id"]
    t_submit = time.time()
    status, body = http("POST", f"{api}/experiments", spec)
    if status != 201 and status != 200:
        raise RuntimeError(f"POST /experiments answered {status}: {body}")
    job_id = None
    deadline = time.time() + timeout
    # Find the six task processes.
    pids = {}
    while len(pids) < 6:
        if time.time() > deadline:
            raise RuntimeError(f"only {len(pids)} task processes of {exp_id} appeared")
        pids.update(task_processes(exp_id))
        time.sleep(0.05)
    t_all_started = time.time()
    _, view = http("GET", f"{api}/experiments/{exp_id}")
    job_id = view["attempts"][-1]["slurm_job_id"]

    # Slurm job state, polled back to back from another thread.
    job = {"completed_at": None, "final": None, "states": []}
    stop = threading.Event()

    def poll_job():
        while not stop.is_set():
            s = job_state(job_id)
            now = time.time()
            if s and (not job["states"] or job["states"][-1][1] != s):
                job["states"].append((now, s))
            if s in ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"):
                job["final"] = s
                job["completed_at"] = now
                return
    poller = threading.Thread(target=poll_job, daemon=True)
    poller.start()

    gone = {}
    while len(gone) < len(pids):
        if time.time() > deadline:
            raise RuntimeError(f"tasks still running at the timeout: {set(pids) - set(gone)}")
        now = time.time()
        for pid in pids:
            if pid not in gone and not os.path.exists(f"/proc/{pid}"):
                gone[pid] = now
        time.sleep(0.002)
    poller.join(timeout=max(1, deadline - time.time()))
    stop.set()

    workers = [gone[p] for p, r in pids.items() if r == "worker"]
    ps = [gone[p] for p, r in pids.items() if r == "ps"]
    last_worker = max(workers)
    ps_gone = max(ps)

    # The service's view once the experiment settled.
    while True:
        _, view = http("GET", f"{api}/experiments/{exp_id}")
        if view["state"] in ("succeeded", "failed", "cancelled") or time.time() > deadline:
            break
        time.sleep(0.1)
    tasks = view.get("tasks", [])
    svc_worker_end = max((epoch(t.get("ended_at")) or float("nan")) for t in tasks if t["role"] == "worker")
    svc_ps_end = max((epoch(t.get("ended_at")) or float("nan")) for t in tasks if t["role"] == "ps")
    ps_states = sorted(t["state"] for t in tasks if t["role"] == "ps")
    problems = []
    if view["state"] != "succeeded":
        problems.append(f"experiment {view['state']}: {view.get('reason')}")
    if ps_states != ["reaped", "reaped"]:
        problems.append(f"ps states {ps_states}")
    if job["final"] != "COMPLETED":
        problems.append(f"job {job_id} ended {job['final']}")
    return {
        "id": exp_id, "job": job_id,
        "train_s": last_worker - t_all_started,
        "ps_gone_ms": (ps_gone - last_worker) * 1000,
        "job_completed_ms": ((job["completed_at"] or float("nan")) - last_worker) * 1000,
        "svc_worker_end_ms": (svc_worker_end - last_worker) * 1000,
        "svc_ps_end_ms": (svc_ps_end - last_worker) * 1000,
        "job_states": " > ".join(f"{s}@{(t - last_worker) * 1000:+.0f}" for t, s in job["states"]),
        "problems": "; ".join(problems),
        "submit_to_start_s": t_all_started - t_submit,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--timeout", type=float, default=180)
    args = ap.parse_args()

    template = open(os.path.join(args.repo, "examples/linear_ps/experiment.json.in")).read()
    base = json.loads(template.replace("@REPO@", args.repo))
    results = []
    stamp = time.strftime("%H%M%S")
    for i in range(args.runs):
        spec = dict(base)
        spec["id"] = f"reap-{stamp}-{i}"
        spec["command"] = [c if c != "300" else str(args.steps) for c in base["command"]]
        r = one_run(args.api, spec, args.timeout)
        results.append(r)
        print(f"  run {i}: ps gone +{r['ps_gone_ms']:.0f} ms, job COMPLETED +{r['job_completed_ms']:.0f} ms "
              f"(service: worker ended_at {r['svc_worker_end_ms']:+.0f} ms, ps ended_at {r['svc_ps_end_ms']:+.0f} ms; "
              f"job {r['job_states']}) {r['problems']}", file=sys.stderr)

    print("| run | experiment | job | ps gone after last worker exit (ms) | job COMPLETED after last worker exit (ms) "
          "| service: last worker ended_at (ms) | service: last ps ended_at (ms) | Slurm states seen (ms) | problems |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(results):
        print(f"| {i} | {r['id']} | {r['job']} | {r['ps_gone_ms']:.0f} | {r['job_completed_ms']:.0f} "
              f"| {r['svc_worker_end_ms']:+.0f} | {r['svc_ps_end_ms']:+.0f} | {r['job_states']} | {r['problems'] or '-'} |")
    ps = [r["ps_gone_ms"] for r in results]
    job = [r["job_completed_ms"] for r in results]
    print()
    print(f"**ps gone** after the last worker's exit: p50 {percentile(ps, 50):.0f} ms, p99 {percentile(ps, 99):.0f} ms, "
          f"max {max(ps):.0f} ms over {len(ps)} runs (target <= 1000 ms: "
          f"{'met' if max(ps) <= 1000 else 'MISSED'}).  ")
    print(f"**Slurm job COMPLETED** after the last worker's exit: p50 {percentile(job, 50):.0f} ms, "
          f"p99 {percentile(job, 99):.0f} ms, max {max(job):.0f} ms (target <= 5000 ms: "
          f"{'met' if max(job) <= 5000 else 'MISSED'}).")
    return 1 if any(r["problems"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
