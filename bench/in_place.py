#!/usr/bin/env python3
"""Restarts in place against a requeue (issue 29), the measuring half of
in_place.sh.

Each run submits one experiment of 6 tasks (3 nodes x 2) running a small
Python program (no framework: the restart's own cost, not an import's): every
task steps every --step-interval s; worker 0 writes TensorFlow's `checkpoint`
state file in MODEL_DIR at each step, which the agent reports as progress, and
records when its program started and when it made its first step
(MODEL_DIR/start.N, first_step.N). Once the service has seen step
--kill-at-step, the bench kill -9s worker 3's program (attempt 1) and notes
the time; once attempt 2 has made its first step, it cancels the experiment. The attempt fails, and attempt 2 resumes from the checkpoint:
  - in place (restart.in_allocation: true): in the same Slurm job;
  - requeue (restart.in_allocation: false): as a new Slurm job, after
    restart.backoff_s.
Busy runs (--busy) first fill the cluster with other jobs (one `sleep` per
node needing the whole node, submitted with sbatch by this user, pending
behind the experiment's job): a requeued job waits behind them, as it would
behind other users' jobs on a full cluster.

Node runs (--node-runs, --node-busy-runs) fail a node instead: 4 tasks on 2
nodes, and node2 fails as a node does (deploy/local-slurm/node_fault.py: its
slurmd, slurmstepd, agents and programs killed -9, the node set DOWN):
  - spare (resources.spare_nodes 1, a third node whose agents wait): the job
    runs on without node2 (--no-kill) and attempt 2 starts in it, node3 in
    node2's place;
  - requeue (no spare): Slurm ends the job NODE_FAIL and attempt 2 is a new
    job without node2, after restart.backoff_s.

Per run, from the kill: the attempt's failure (the `exited` or `lost`
event), attempt 2 recorded (its submitted_at), attempt 2's program start and
first step.
Prints a Markdown table of the runs and a summary (median of each mode);
exits 1 if a run went wrong.
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

from hang import epoch, read_mark, summary
from http_json import http
from procs import programs

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy", "local-slurm"))
from node_fault import fail_node, restore_node  # noqa: E402

PROGRAM = r'''
import os, signal, sys, time
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
model_dir = os.environ["MODEL_DIR"]
attempt = int(os.environ["TFSLURM_ATTEMPT"])
reporter = os.environ.get("TFSLURM_ROLE") == "worker" and os.environ.get("TFSLURM_INDEX") == "0"
total, interval = int(sys.argv[1]), float(sys.argv[2])


def mark(name, t):
    path = os.path.join(model_dir, f"{name}.{attempt}")
    with open(path + ".tmp", "w") as f:
        f.write(f"{t:.6f}\n")
    os.replace(path + ".tmp", path)


state = os.path.join(model_dir, "checkpoint")
step = 0
if os.path.exists(state):
    step = int(open(state).read().split('"')[1].rsplit("-", 1)[1])
if reporter:
    mark("start", time.time())
print(f"in_place: attempt={attempt} start_step={step}", flush=True)
first = True
while step < total:
    step += 1
    if reporter:
        with open(state + ".tmp", "w") as f:
            f.write(f'model_checkpoint_path: "ckpt-{step}"\n')
        os.replace(state + ".tmp", state)
        if first:
            mark("first_step", time.time())
            first = False
    time.sleep(interval)
print(f"in_place: done step={step}", flush=True)
'''


def program_pid(exp_id, role, index, attempt):
    """The pid of the task's program (not its agent)."""
    pids = programs({f"EXPERIMENT_ID={exp_id}", f"TFSLURM_ROLE={role}", f"TFSLURM_INDEX={index}",
                     f"TFSLURM_ATTEMPT={attempt}"}, "in_place_program.py")
    return pids[0] if pids else None


def in_a_container(pid):
    """Whether process `pid` has a root of its own (a container's), not the host's."""
    theirs, host = os.stat(f"/proc/{pid}/root/"), os.stat("/")
    return (theirs.st_dev, theirs.st_ino) != (host.st_dev, host.st_ino)


def wait(what, predicate, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def cancel_and_wait_ended(api, exp_id, timeout):
    """Cancels the experiment and returns its view once it has ended."""
    http("DELETE", f"{api}/experiments/{exp_id}")

    def ended():
        _, v = http("GET", f"{api}/experiments/{exp_id}")
        return v if v["state"] in ("succeeded", "failed", "cancelled") else None
    return wait(f"{exp_id} to end", ended, timeout)


def fill_cluster(conf_env, seconds, nodes):
    """One job per node that needs the whole node: pending while the experiment runs."""
    ids = []
    for _ in range(nodes):
        out = subprocess.run(["sbatch", "--parsable", "-p", "debug", "-N1", "--exclusive", "--mem-per-cpu=100",
                              "--output=/dev/null", "-J", "bench-filler", "--wrap", f"sleep {seconds}"],
                             env=conf_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"sbatch of a filler job failed: {out.stderr.strip()}")
        ids.append(out.stdout.strip().split(";")[0])
    return ids


def one_run(api, exp_id, program, in_place, busy, node_fault, args, container=None):
    """`container`: (runtime, image) to run the program in, or None for the host's python3."""
    total = args.kill_at_step + args.steps_after
    spec = {"id": exp_id,
            "command": ["/usr/bin/python3", program, str(total), str(args.step_interval)],
            "cluster": {"worker": 6},
            "resources": {"partition": "debug", "nodes": 3, "tasks_per_node": 2, "time_limit": "00:15:00",
                          "mem_per_task_mb": 200},
            "checkpoint": {"signal_grace_s": 30},
            "restart": {"max_restarts": 1, "on": ["retryable_exit"], "backoff_s": args.backoff_s,
                        "in_allocation": in_place}}
    if node_fault:
        # Worker 3 runs on node2, the node that fails; a spare is node3.
        spec["cluster"] = {"worker": 4}
        spec["resources"]["nodes"] = 2
        spec["restart"]["on"] = ["retryable_exit", "node_fail"]
        spec["restart"]["in_allocation"] = True
        if in_place:
            spec["resources"]["spare_nodes"] = 1
    if container:
        spec["container"] = {"runtime": container[0], "image": container[1]}
        spec["workdir"] = os.path.dirname(program)  # mounted at the same path, with the program in it
    load = open("/proc/loadavg").read().split()[0]
    posted = time.time()
    status, body = http("POST", f"{api}/experiments", spec)
    if status not in (200, 201):
        raise RuntimeError(f"POST /experiments answered {status}: {body}")

    def progressed():
        _, v = http("GET", f"{api}/experiments/{exp_id}")
        cp = v.get("checkpoint") or {}
        return v if (cp.get("step") or 0) >= args.kill_at_step else None
    wait(f"{exp_id} to reach step {args.kill_at_step}", progressed, args.timeout)
    problems = []
    fillers = fill_cluster(dict(os.environ), args.filler_s, 3) if busy else []
    try:
        if fillers:
            time.sleep(1)  # slurmctld takes them in before the kill
        pid = wait("worker 3's program", lambda: program_pid(exp_id, "worker", 3, 1), 30)
        if container and not in_a_container(pid):
            problems.append(f"worker 3's program runs on the host's root, not in its {container[0]} container")
        if node_fault:
            killed = fail_node(os.environ["SLURM_CONF"], "node2")
        else:
            killed = time.time()
            os.kill(pid, signal.SIGKILL)
        _, view = http("GET", f"{api}/experiments/{exp_id}")
        wait(f"{exp_id}'s attempt 2 to make its first step",
             lambda: read_mark(view["model_dir"], "first_step.2"), args.timeout + (args.filler_s if busy else 0))
        # Measured: the rest of the training is not.
        view = cancel_and_wait_ended(api, exp_id, args.timeout)
    finally:
        if fillers:
            subprocess.run(["scancel"] + fillers, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if node_fault:
            restore_node(os.environ["SLURM_CONF"], "node2")
    model_dir = view["model_dir"]
    attempts = view.get("attempts", [])
    if view["state"] != "cancelled":
        problems.append(f"experiment {view['state']}: {view.get('reason')}")
    if len(attempts) != 2:
        problems.append(f"{len(attempts)} attempts")
        attempts = (attempts + [{}, {}])[:2]
    a1, a2 = attempts
    if bool(a2.get("in_place")) != in_place:
        problems.append(f"attempt 2 in_place={a2.get('in_place')}")
    if not a2.get("start_step"):
        problems.append("attempt 2 did not resume from a checkpoint")
    exited = next((e for e in view.get("events", [])
                   if e["what"] in ("exited", "lost", "job") and e.get("attempt") == 1
                   and epoch(e["at"]) >= killed - 0.5 and (e["what"] != "job" or "ended" in e["why"])), None)

    def since(t):
        return (t - killed) if t is not None else float("nan")
    mode = ("spare" if in_place else "requeue") if node_fault else ("in place" if in_place else "requeue")
    first1 = read_mark(model_dir, "first_step.1")
    return {"id": exp_id, "runtime": container[0] if container else "none",
            "submitted_to_first": (first1 - posted) if first1 is not None else float("nan"),
            "mode": mode, "fault": "node" if node_fault else "kill", "busy": busy, "load": load,
            "jobs": f"{a1.get('slurm_job_id')}, {a2.get('slurm_job_id')}",
            "failed": since(epoch(exited["at"]) if exited else None),
            "recorded": since(epoch(a2.get("submitted_at"))),
            "start2": since(read_mark(model_dir, "start.2")),
            "first2": since(read_mark(model_dir, "first_step.2")),
            "problems": "; ".join(problems)}


def by_runtime(args, program, stamp):
    """Issue 44's figures per runtime: --runtime-runs restarts in place after a
    kill -9, the runtimes interleaved run by run so that each meets the same
    load; prints their table and returns whether every run went right."""
    runtimes = [r.split("=", 1) if "=" in r else (r, None) for r in args.runtime]
    results = []
    for i in range(args.runtime_runs):
        for runtime, image in runtimes:
            exp_id = f"ip-{stamp}-{i}-{runtime}"
            r = one_run(args.api, exp_id, program, True, False, False, args,
                        container=(runtime, image) if image else None)
            results.append(r)
            print(f"  {runtime}: submitted -> first step {r['submitted_to_first']:.2f} s; kill -9 -> attempt 2's "
                  f"first step {r['first2']:.2f} s (load {r['load']}) {r['problems']}", file=sys.stderr)
    print(f"Per runtime, {args.runtime_runs} runs each, interleaved: 6 tasks on 3 nodes x 2; the program steps every "
          f"{args.step_interval} s; worker 3's program killed -9 at step {args.kill_at_step}, and attempt 2 runs in "
          "place (in the same job; under pyxis and OCI in the same containers, the program started again in them).")
    print()
    print("| runtime | image | runs | POST -> first step: min / median / max (s) "
          "| kill -9 -> attempt 2's first step: min / median / max (s) | over none (medians) | problems |")
    print("|---|---|---|---|---|---|---|")
    medians = {}
    for runtime, image in runtimes:
        rs = [r for r in results if r["runtime"] == runtime]
        first, again = [r["submitted_to_first"] for r in rs], [r["first2"] for r in rs]
        medians[runtime] = (summary(first)[1], summary(again)[1])
        over = "-"
        if runtime != "none" and "none" in medians and "-" not in medians["none"] + medians[runtime]:
            over = (f"{float(medians[runtime][0]) - float(medians['none'][0]):+.2f} / "
                    f"{float(medians[runtime][1]) - float(medians['none'][1]):+.2f}")
        problems = "; ".join(r["problems"] for r in rs if r["problems"]) or "-"
        print(f"| {runtime} | {os.path.basename(image) if image else '-'} | {len(rs)} | {' / '.join(summary(first))} "
              f"| {' / '.join(summary(again))} | {over} | {problems} |")
    return not any(r["problems"] for r in results)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True)
    ap.add_argument("--work", required=True, help="a directory the jobs can read (the program goes there)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--busy-runs", type=int, default=3)
    ap.add_argument("--node-runs", type=int, default=5, help="runs of each mode with node2 failing")
    ap.add_argument("--node-busy-runs", type=int, default=3)
    ap.add_argument("--kill-at-step", type=int, default=10)
    ap.add_argument("--steps-after", type=int, default=1000, help="more than the run needs: it is cancelled")
    ap.add_argument("--step-interval", type=float, default=0.2)
    ap.add_argument("--backoff-s", type=int, default=10)
    ap.add_argument("--filler-s", type=int, default=60)
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--runtime", action="append", default=[],
                    help="none, or RUNTIME=IMAGE (pyxis=/x/python.sqsh): only these, --runtime-runs each")
    ap.add_argument("--runtime-runs", type=int, default=3)
    args = ap.parse_args()

    program = os.path.join(args.work, "in_place_program.py")
    with open(program, "w") as f:
        f.write(PROGRAM)
    os.chmod(program, 0o755)
    stamp = time.strftime("%H%M%S")
    if args.runtime:
        return 0 if by_runtime(args, program, stamp) else 1
    plan = ([(True, False, False), (False, False, False)] * args.runs +
            [(True, True, False), (False, True, False)] * args.busy_runs +
            [(True, False, True), (False, False, True)] * args.node_runs +
            [(True, True, True), (False, True, True)] * args.node_busy_runs)
    results = []
    for i, (in_place, busy, node_fault) in enumerate(plan):
        exp_id = (f"ip-{stamp}-{i}-{'node-' if node_fault else ''}{'inplace' if in_place else 'requeue'}"
                  f"{'-busy' if busy else ''}")
        r = one_run(args.api, exp_id, program, in_place, busy, node_fault, args)
        results.append(r)
        print(f"  {r['fault']}: {r['mode']}{' (busy)' if busy else ''}: first step of attempt 2 +{r['first2']:.2f} s "
              f"(failed +{r['failed']:.2f}, recorded +{r['recorded']:.2f}, started +{r['start2']:.2f}; "
              f"jobs {r['jobs']}; load {r['load']}) {r['problems']}", file=sys.stderr)

    print("All times in seconds after the fault: the kill -9 of worker 3's program (6 tasks on 3 nodes), "
          "or node2's failure (4 tasks on 2 nodes, and a spare node in the spare runs).")
    print()
    print("| fault | cluster | restart | run | Slurm jobs | load | attempt 1 failed | attempt 2 recorded "
          "| attempt 2 program start | **attempt 2 first step** | problems |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['fault']} | {'busy' if r['busy'] else 'idle'} | {r['mode']} | {r['id'].split('-')[2]} | {r['jobs']} "
              f"| {r['load']} | {r['failed']:.2f} | {r['recorded']:.2f} | {r['start2']:.2f} | **{r['first2']:.2f}** "
              f"| {r['problems'] or '-'} |")
    print()
    print("| fault | cluster | restart | runs | fault -> attempt 2's first step: min / median / max (s) "
          "| requeue median / in job median |")
    print("|---|---|---|---|---|---|")
    for fault, modes in (("kill", ("in place", "requeue")), ("node", ("spare", "requeue"))):
        for busy in (False, True):
            med = {}
            for mode in modes:
                rs = [r["first2"] for r in results if r["busy"] == busy and r["mode"] == mode and r["fault"] == fault]
                if not rs:
                    continue
                med[mode] = statistics.median([x for x in rs if x == x] or [float("nan")])
                ratio = (f"{med['requeue'] / med[modes[0]]:.1f}x" if mode == "requeue" and modes[0] in med else "-")
                print(f"| {fault} | {'busy' if busy else 'idle'} | {mode} | {len(rs)} | {' / '.join(summary(rs))} "
                      f"| {ratio} |")
    print()
    print(f"restart.backoff_s {args.backoff_s} (a requeue waits it; a restart in place has none); "
          f"steps every {args.step_interval} s; busy: one `sleep {args.filler_s}` job per node needing the whole "
          f"node (--exclusive), submitted after the experiment's job started.")
    return 1 if any(r["problems"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
