#!/usr/bin/env python3
"""A TF worker restarted alone (issue 29, point 3), the measuring half of
lone_restart.sh.

Each run submits examples/mnist_tf under parameter servers (1 chief, 2 ps,
2 workers, 1 evaluator on 3 nodes x 2 tasks; synthetic data, one log line
per dispatch of --steps-per-dispatch steps) with restart.max_task_restarts
3. Once the chief has trained --warmup-s seconds, worker 1's program is
killed -9. tfslurm starts that program again alone, on its node and port,
while the chief's ClusterCoordinator retries the lost closures on worker 0
and waits for worker 1 to answer again (cluster_coordinator.py's
WorkerPreemptionHandler). The bench follows the chief's output as it is
written (every 20 ms) and stamps each `mnist_tf: step=N` line, and notes:
  - the `restarted_alone` event (the service's decision);
  - worker 1's program serving again (its second `role=worker index=1
    serving` line);
  - TF's own word that the worker is back: the chief's `Worker
    /job:worker/replica:0/task:1 has been recovered`.
From the stamped lines: the chief's steps per second in the --window-s
before the kill, from the kill to the recovery, and in windows after it;
and for the first run a timeline in --bin-s bins. The run then ends with
a cancel: training to the end is not measured.

Exits 1 if a run went wrong (a second attempt, no recovery, no restart).
"""
import argparse
import os
import re
import signal
import statistics
import sys
import time

from hang import epoch
from http_json import http
from in_place import wait
from procs import programs

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
STEP = re.compile(r"^mnist_tf: step=(\d+) ")


def program_pid(exp_id, role, index):
    pids = programs({f"EXPERIMENT_ID={exp_id}", f"TFSLURM_ROLE={role}", f"TFSLURM_INDEX={index}"},
                    "mnist_tf/train.py")
    return pids[0] if pids else None


class Follower:
    """Reads a growing log, stamping each complete line when it is first seen."""

    def __init__(self, path):
        self.path, self.offset, self.partial, self.lines = path, 0, "", []

    def poll(self):
        try:
            with open(self.path, errors="replace") as f:
                f.seek(self.offset)
                data = f.read()
                self.offset = f.tell()
        except FileNotFoundError:
            return
        now = time.time()
        data = self.partial + data
        *complete, self.partial = data.split("\n")
        self.lines += [(now, line) for line in complete]

    def first(self, pattern, after=0.0, nth=1):
        seen = 0
        for t, line in self.lines:
            if t >= after and pattern in line:
                seen += 1
                if seen == nth:
                    return t
        return None


def steps_between(stamped, t0, t1):
    """Steps per second from the step lines stamped in [t0, t1)."""
    inside = [(t, s) for t, s in stamped if t0 <= t < t1]
    before = [s for t, s in stamped if t < t0]
    if not inside:
        return 0.0
    start = before[-1] if before else inside[0][1]
    return (inside[-1][1] - start) / (t1 - t0)


def one_run(api, exp_id, args):
    spec = {
        "id": exp_id,
        "command": [args.tf_python, os.path.join(REPO, "examples/mnist_tf/train.py"), "--data", "synthetic",
                    "--steps", "1000000", "--checkpoint-every", "1000", "--steps-per-dispatch",
                    str(args.steps_per_dispatch), "--eval-interval", "5"],
        "workdir": os.path.join(REPO, "examples/mnist_tf"),
        "env": {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_NUM_INTRAOP_THREADS": "1"},
        "cluster": {"chief": 1, "ps": 2, "worker": 2, "evaluator": 1},
        "resources": {"partition": "debug", "nodes": 3, "tasks_per_node": 2, "time_limit": "00:15:00"},
        "success": "chief",
        "restart": {"max_restarts": 0, "max_task_restarts": 3},
    }
    status, body = http("POST", f"{api}/experiments", spec)
    if status not in (200, 201):
        raise RuntimeError(f"POST /experiments answered {status}: {body}")

    def running():
        _, v = http("GET", f"{api}/experiments/{exp_id}")
        return v if v["state"] == "running" and all(t["proc_id"] is not None for t in v["tasks"]) else None
    view = wait(f"{exp_id} to run", running, args.timeout)
    proc = {(t["role"], t["index"]): t["proc_id"] for t in view["tasks"]}
    logs = os.path.join(view["model_dir"], "logs", "attempt-1")
    chief = Follower(os.path.join(logs, f"task-{proc[('chief', 0)]}.out"))
    worker = Follower(os.path.join(logs, f"task-{proc[('worker', 1)]}.out"))

    def follow_until(predicate, timeout, what):
        deadline = time.time() + timeout
        while time.time() < deadline:
            chief.poll()
            worker.poll()
            if predicate():
                return
            time.sleep(0.02)
        raise RuntimeError(f"timed out waiting for {what}")
    follow_until(lambda: chief.first("mnist_tf: step=") is not None, args.timeout, "the chief's first step")
    warm_from = chief.first("mnist_tf: step=")
    follow_until(lambda: time.time() >= warm_from + args.warmup_s, args.warmup_s + 5, "the warm-up")
    pid = program_pid(exp_id, "worker", 1)
    if not pid:
        raise RuntimeError("worker 1's program not found")
    killed = time.time()
    os.kill(pid, signal.SIGKILL)
    recovered_line = "Worker /job:worker/replica:0/task:1 has been recovered"
    problems = []
    try:
        follow_until(lambda: chief.first(recovered_line, after=killed) is not None, args.timeout,
                     "the chief to take worker 1 back")
        recovered = chief.first(recovered_line, after=killed)
        follow_until(lambda: time.time() >= recovered + args.after_s, args.after_s + 5, "the steps after")
    except RuntimeError as e:
        problems.append(str(e))
        recovered = float("nan")
    serving = worker.first("role=worker index=1 serving", nth=2)
    _, view = http("GET", f"{api}/experiments/{exp_id}")
    http("DELETE", f"{api}/experiments/{exp_id}")
    decided = next((epoch(e["at"]) for e in view["events"] if e["what"] == "restarted_alone"), None)
    if len(view["attempts"]) != 1:
        problems.append(f"{len(view['attempts'])} attempts")
    if decided is None:
        problems.append("no restarted_alone event")
    stamped = [(t, int(STEP.match(line).group(1))) for t, line in chief.lines if STEP.match(line)]
    w = args.window_s
    rates = {
        "before": steps_between(stamped, killed - w, killed),
        "down": steps_between(stamped, killed, recovered) if recovered == recovered else float("nan"),
        "after": steps_between(stamped, recovered, recovered + w) if recovered == recovered else float("nan"),
    }
    timeline = []
    t = killed - args.window_s
    while t < (recovered if recovered == recovered else killed) + args.after_s:
        timeline.append((t - killed, steps_between(stamped, t, t + args.bin_s)))
        t += args.bin_s

    def since(x):
        return (x - killed) if x is not None and x == x else float("nan")
    return {"id": exp_id, "decided": since(decided), "serving": since(serving), "recovered": since(recovered),
            "rates": rates, "timeline": timeline, "problems": "; ".join(problems)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True)
    ap.add_argument("--tf-python", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps-per-dispatch", type=int, default=10)
    ap.add_argument("--warmup-s", type=float, default=20)
    ap.add_argument("--window-s", type=float, default=10, help="the windows the rates are taken over")
    ap.add_argument("--after-s", type=float, default=20, help="how long after the recovery to follow")
    ap.add_argument("--bin-s", type=float, default=2)
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    stamp = time.strftime("%H%M%S")
    results = []
    for i in range(args.runs):
        r = one_run(args.api, f"lone-{stamp}-{i}", args)
        results.append(r)
        print(f"  run {i}: restarted_alone +{r['decided']:.2f} s, serving +{r['serving']:.2f} s, recovered "
              f"+{r['recovered']:.2f} s; chief steps/s before {r['rates']['before']:.1f}, down "
              f"{r['rates']['down']:.1f}, after {r['rates']['after']:.1f} {r['problems']}", file=sys.stderr)
    w = args.window_s
    print("Times in seconds after the kill -9 of worker 1's program (mnist_tf: 1 chief, 2 ps, 2 workers, "
          "1 evaluator on 3 nodes x 2 tasks); the chief's steps per second from its own log lines.")
    print()
    print(f"| run | restarted_alone event | worker 1 serving again | chief: worker 1 recovered (TF) "
          f"| chief steps/s, {w:g} s before | kill -> recovered | {w:g} s after | problems |")
    print("|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(results):
        print(f"| {i} | {r['decided']:.2f} | {r['serving']:.2f} | **{r['recovered']:.2f}** | {r['rates']['before']:.1f} "
              f"| {r['rates']['down']:.1f} | {r['rates']['after']:.1f} | {r['problems'] or '-'} |")
    rec = [r["recovered"] for r in results if r["recovered"] == r["recovered"]]
    if rec:
        print()
        print(f"Median kill -> worker 1 recovered: {statistics.median(rec):.2f} s over {len(rec)} runs "
              f"(min {min(rec):.2f}, max {max(rec):.2f}); attempts: 1 in every run.")
    print()
    print(f"The chief's steps per second over time, run 0 ({args.bin_s:g} s bins; 0 = the kill):")
    print()
    print("| from (s) | steps/s |")
    print("|---|---|")
    for t, rate in results[0]["timeline"]:
        print(f"| {t:+.0f} | {rate:.1f} |")
    return 1 if any(r["problems"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
