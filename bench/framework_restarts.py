#!/usr/bin/env python3
"""Real frameworks restarted in place against a requeue (issue 29), the
measuring half of framework_restarts.sh.

in_place.py measures the restart with a tiny program and no framework; this
one runs the repository's real examples, so the next attempt pays what a
user's would: the framework's import, its cluster forming again, the restore
of the checkpoint. Two workloads, 6 tasks on 3 nodes x 2 each:
  tf   examples/mnist_tf/train.py (TensorFlow 2 parameter servers: chief 1,
       ps 2, worker 2, evaluator 1, as tests/integration/test_tensorflow.py
       runs it), --data synthetic unless MNIST_NPZ names a file; the chief's
       program is killed -9;
  ddp  examples/ddp/train.py (PyTorch DDP on gloo, Debian's torch), 6 ranks;
       rank 3's program is killed -9.
Each run submits one experiment with restart.max_restarts 1 on
retryable_exit, waits until the service has seen a checkpoint at
--kill-at-step or later, kills the program and notes the time. Attempt 2
resumes from the checkpoint:
  - in place (restart.in_allocation: true): in the same Slurm job;
  - requeue (restart.in_allocation: false): as a new Slurm job, after
    restart.backoff_s.
Busy runs first fill the cluster with other jobs (in_place.py's
fill_cluster: one `sleep --filler-s` per node needing the whole node,
pending behind the experiment's job), so a requeued job waits behind them.

The floor (--floor-runs): the same six programs started by hand on this
machine, with no Slurm and no tfslurm (TF_CONFIG, or RANK, MASTER_ADDR and
the rest, written here; every address on 127.0.0.1), first to a checkpoint
at --kill-at-step, then again, timed from their launch to the reporting
task's first step past the checkpoint: what the framework itself needs to
start again from a checkpoint, the best any restart can do.

From the kill, the reporting task's log of attempt 2 (the chief for tf, rank
0 for ddp: MODEL_DIR/logs/attempt-2/task-<proc>.out) is read every 50 ms:
its `start_step=N` line (the framework imported, the checkpoint restored)
and its first `step=M` line with M > N (the resumed first step). Once that is
seen the experiment is cancelled. Also per run: attempt 1 failed (its first
`exited` event) and attempt 2 recorded (its submitted_at).
Prints a Markdown table of the runs and a summary per (workload, cluster,
restart); exits 1 if a run went wrong.
"""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

from hang import epoch, summary
from http_json import http
from in_place import cancel_and_wait_ended, fill_cluster, wait
from procs import programs

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
POLL_S = 0.05
# Quiet TF's C++ INFO lines; one intra-op thread per process: six framework
# processes share this machine's cores (as the integration tests run them).
TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_NUM_INTRAOP_THREADS": "1"}


def train_programs(want):
    """The pids of the training programs (train.py) whose environment holds
    every NAME=value of `want`."""
    return programs(want, "train.py")


class Tf:
    name = "tf"
    shape = "mnist_tf: chief 1, ps 2, worker 2, evaluator 1 on 3 nodes x 2 (TensorFlow parameter servers)"
    killed = "the chief's program"
    reporter = ("chief", 0)
    prefix = "mnist_tf: "

    def __init__(self, args):
        self.python = args.tf_python
        npz = os.environ.get("MNIST_NPZ")
        self.data = ["--data", "mnist", "--mnist-npz", npz] if npz and os.path.isfile(npz) else ["--data", "synthetic"]

    def spec(self, exp_id, args):
        train = os.path.join(REPO, "examples", "mnist_tf", "train.py")
        return {"id": exp_id,
                "command": [self.python, train] + self.data + [
                    "--steps", str(10 ** 7), "--checkpoint-every", str(args.tf_checkpoint_every),
                    "--steps-per-dispatch", str(args.tf_steps_per_dispatch)],
                "workdir": os.path.dirname(train),
                "env": dict(TF_ENV),
                "cluster": {"chief": 1, "ps": 2, "worker": 2, "evaluator": 1},
                "success": "chief",
                "resources": {"partition": "debug", "nodes": 3, "tasks_per_node": 2, "time_limit": "00:15:00"}}

    def victim(self, exp_id):
        return train_programs({f"EXPERIMENT_ID={exp_id}", "TFSLURM_ROLE=chief", "TFSLURM_INDEX=0", "TFSLURM_ATTEMPT=1"})

    def floor_tasks(self, args, model_dir, ports, steps, attempt):
        """(env, argv) of each program started by hand; the chief first."""
        train = os.path.join(REPO, "examples", "mnist_tf", "train.py")
        cluster = {"chief": [f"127.0.0.1:{ports[0]}"], "ps": [f"127.0.0.1:{p}" for p in ports[1:3]],
                   "worker": [f"127.0.0.1:{p}" for p in ports[3:5]]}
        argv = [self.python, train] + self.data + [
            "--steps", str(steps), "--checkpoint-every", str(args.tf_checkpoint_every),
            "--steps-per-dispatch", str(args.tf_steps_per_dispatch)]
        tasks = []
        for role, index in (("chief", 0), ("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1), ("evaluator", 0)):
            env = dict(os.environ, **TF_ENV, MODEL_DIR=model_dir, TFSLURM_ATTEMPT=str(attempt),
                       TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": role, "index": index}}))
            tasks.append((env, argv))
        return tasks

    def args_line(self, args):
        return (f"{' '.join(self.data)}, --checkpoint-every {args.tf_checkpoint_every}, --steps-per-dispatch "
                f"{args.tf_steps_per_dispatch} (the chief logs a step at the end of each dispatch round)")


class Ddp:
    name = "ddp"
    shape = "ddp: 6 ranks on 3 nodes x 2 (PyTorch DDP, gloo)"
    killed = "rank 3's program"
    reporter = ("rank", 0)
    prefix = "ddp: "

    def __init__(self, args):
        pass

    def spec(self, exp_id, args):
        train = os.path.join(REPO, "examples", "ddp", "train.py")
        return {"id": exp_id,
                "framework": "pytorch",
                "command": ["/usr/bin/python3", train, "--steps", str(10 ** 7),
                            "--checkpoint-every", str(args.ddp_checkpoint_every),
                            "--step-delay-ms", str(args.ddp_step_delay_ms), "--log-every", "1"],
                "workdir": os.path.dirname(train),
                "pytorch": {"omp_num_threads": 1},
                "resources": {"partition": "debug", "nodes": 3, "tasks_per_node": 2, "time_limit": "00:15:00"}}

    def victim(self, exp_id):
        return train_programs({f"EXPERIMENT_ID={exp_id}", "RANK=3", "TFSLURM_ATTEMPT=1"})

    def floor_tasks(self, args, model_dir, ports, steps, attempt):
        """(env, argv) of each rank started by hand; rank 0 first."""
        train = os.path.join(REPO, "examples", "ddp", "train.py")
        argv = ["/usr/bin/python3", train, "--steps", str(steps), "--checkpoint-every",
                str(args.ddp_checkpoint_every), "--step-delay-ms", str(args.ddp_step_delay_ms), "--log-every", "1"]
        return [(dict(os.environ, MODEL_DIR=model_dir, TFSLURM_ATTEMPT=str(attempt), RANK=str(rank),
                      WORLD_SIZE="6", LOCAL_RANK=str(rank % 2), NODE_RANK=str(rank // 2), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(ports[0]), OMP_NUM_THREADS="1"), argv) for rank in range(6)]

    def args_line(self, args):
        return (f"--checkpoint-every {args.ddp_checkpoint_every}, --step-delay-ms {args.ddp_step_delay_ms}, "
                "--log-every 1")


WORKLOADS = {"tf": Tf, "ddp": Ddp}


def proc_of(view, role, index):
    return next((t["proc_id"] for t in view.get("tasks", []) if t["role"] == role and t["index"] == index), None)


def read_log(model_dir, proc, attempt):
    try:
        with open(os.path.join(model_dir, "logs", f"attempt-{attempt}", f"task-{proc}.out"), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def watch_attempt_2(model_dir, proc, prefix, timeout):
    """Reads the task's attempt-2 log every 50 ms: (time of its start_step
    line, start_step, time of its first step line past start_step, that
    step); None for what was not seen within timeout."""
    return watch_output(lambda: read_log(model_dir, proc, 2), prefix, timeout)


def watch_output(read, prefix, timeout):
    """watch_attempt_2 on the text read() returns."""
    start_re = re.compile(r"attempt=2 start_step=(\d+)")
    step_re = re.compile(re.escape(prefix) + r"step=(\d+) ")
    started = start_step = None
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = read()
        now = time.time()
        if start_step is None:
            m = start_re.search(text)
            if m:
                started, start_step = now, int(m.group(1))
        if start_step is not None:
            m = next((m for m in step_re.finditer(text, text.find("start_step=")) if int(m.group(1)) > start_step),
                     None)
            if m:
                return started, start_step, now, int(m.group(1))
        time.sleep(POLL_S)
    return started, start_step, None, None


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def launch(tasks, out_dir, tag):
    """Starts each (env, argv) in a session of its own, output to
    out_dir/<tag>-<k>.out; returns the Popen objects."""
    procs = []
    for k, (env, argv) in enumerate(tasks):
        with open(os.path.join(out_dir, f"{tag}-{k}.out"), "w") as out:
            procs.append(subprocess.Popen(argv, env=env, cwd=os.path.dirname(argv[1]), stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True))
    return procs


def kill_all(procs):
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in procs:
        p.wait()


def floor_run(workload, args, work, i):
    """The framework alone, started by hand from a checkpoint: seconds from
    the launch to the start_step line and to the first step past it."""
    model_dir = os.path.join(work, f"floor-{workload.name}-{i}")
    os.makedirs(model_dir)
    first = launch(workload.floor_tasks(args, model_dir, free_ports(6), args.kill_at_step, 1), model_dir, "to-checkpoint")
    try:
        first[0].wait(timeout=args.timeout)  # the chief, or rank 0, ends at the checkpoint
    finally:
        kill_all(first)  # a TF ps or worker never ends by itself
    t0 = time.time()
    again = launch(workload.floor_tasks(args, model_dir, free_ports(6), 10 ** 7, 2), model_dir, "restart")
    try:
        reporter = os.path.join(model_dir, "restart-0.out")
        started, start_step, first_step, step = watch_output(lambda: open(reporter, errors="replace").read(),
                                                             workload.prefix, args.timeout)
    finally:
        kill_all(again)
    if first_step is None or not start_step:
        raise RuntimeError(f"floor run {i} of {workload.name}: no step past a restored checkpoint "
                           f"(start_step {start_step}); see {model_dir}")
    return {"start": started - t0, "first": first_step - t0, "steps": f"{start_step} -> {step}"}


def one_run(api, workload, exp_id, in_place, busy, args):
    spec = workload.spec(exp_id, args)
    spec["restart"] = {"max_restarts": 1, "on": ["retryable_exit"], "backoff_s": args.backoff_s,
                       "in_allocation": in_place}
    load = open("/proc/loadavg").read().split()[0]
    submitted = time.time()
    status, body = http("POST", f"{api}/experiments", spec)
    if status not in (200, 201):
        raise RuntimeError(f"POST /experiments answered {status}: {body}")

    def progressed():
        _, v = http("GET", f"{api}/experiments/{exp_id}")
        cp = v.get("checkpoint") or {}
        return v if (cp.get("step") or 0) >= args.kill_at_step else None
    view = wait(f"{exp_id} to checkpoint step {args.kill_at_step}", progressed, args.timeout)
    first_ckpt = time.time() - submitted
    model_dir = view["model_dir"]
    proc = proc_of(view, *workload.reporter)
    fillers = fill_cluster(dict(os.environ), args.filler_s, 3) if busy else []
    problems = []
    try:
        if fillers:
            time.sleep(1)  # slurmctld takes them in before the kill
        pids = wait(workload.killed, lambda: workload.victim(exp_id), 30)
        killed = time.time()
        os.kill(pids[0], signal.SIGKILL)
        timeout = args.timeout + args.backoff_s + (args.filler_s if busy else 0)
        started, start_step, first, step = watch_attempt_2(model_dir, proc, workload.prefix, timeout)
        if first is None:
            problems.append(f"no step of attempt 2 in task-{proc}.out within {timeout:.0f} s")
        # Measured: the rest of the training is not.
        view = cancel_and_wait_ended(api, exp_id, args.timeout)
    finally:
        if fillers:
            subprocess.run(["scancel"] + fillers, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The next run starts on a quiet machine: no program of this one left.
    # One still running a minute after its experiment was cancelled is a
    # program tfslurm failed to stop: an error, not a detail.
    try:
        wait(f"{exp_id}'s programs to be gone", lambda: not train_programs({f"EXPERIMENT_ID={exp_id}"}), 60)
    except RuntimeError as e:
        problems.append(str(e))

    attempts = view.get("attempts", [])
    if view["state"] != "cancelled":
        problems.append(f"experiment {view['state']}: {view.get('reason')}")
    if len(attempts) != 2:
        problems.append(f"{len(attempts)} attempts")
        attempts = (attempts + [{}, {}])[:2]
    a1, a2 = attempts
    if a1.get("end_reason") != "retryable_exit":
        problems.append(f"attempt 1 ended {a1.get('end_reason')!r}")
    if bool(a2.get("in_place")) != in_place:
        problems.append(f"attempt 2 in_place={a2.get('in_place')}")
    if a2 and (a2.get("slurm_job_id") == a1.get("slurm_job_id")) != in_place:
        problems.append(f"Slurm jobs {a1.get('slurm_job_id')}, {a2.get('slurm_job_id')}")
    if not a2.get("start_step"):
        problems.append("attempt 2 did not resume from a checkpoint")
    elif start_step is not None and start_step != a2["start_step"]:
        problems.append(f"the log's start_step={start_step}, the service's {a2['start_step']}")
    if proc_of(view, *workload.reporter) != proc:
        problems.append(f"{workload.reporter[0]} {workload.reporter[1]} moved from proc {proc}")
    exited = next((e for e in view.get("events", [])
                   if e["what"] == "exited" and e.get("attempt") == 1 and epoch(e["at"]) >= killed - 0.5), None)

    def since(t):
        return (t - killed) if t is not None else float("nan")
    return {"id": exp_id, "workload": workload.name, "mode": "in place" if in_place else "requeue", "busy": busy,
            "load": load, "jobs": f"{a1.get('slurm_job_id')}, {a2.get('slurm_job_id')}", "ckpt1": first_ckpt,
            "failed": since(epoch(exited["at"]) if exited else None),
            "recorded": since(epoch(a2.get("submitted_at"))),
            "start2": since(started), "first2": since(first),
            "steps": f"{start_step if start_step is not None else '?'} -> {step if step is not None else '?'}",
            "problems": "; ".join(problems)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True)
    ap.add_argument("--runs", type=int, default=5, help="idle runs of each mode, per workload")
    ap.add_argument("--busy-runs", type=int, default=3)
    ap.add_argument("--backoff-s", type=int, default=10)
    ap.add_argument("--filler-s", type=int, default=90)
    ap.add_argument("--workloads", default="tf,ddp")
    ap.add_argument("--tf-python", default="/opt/tfslurm/venv-tf/bin/python")
    ap.add_argument("--kill-at-step", type=int, default=20,
                    help="kill once the service has seen a checkpoint at this step or later")
    ap.add_argument("--tf-checkpoint-every", type=int, default=20)
    ap.add_argument("--tf-steps-per-dispatch", type=int, default=10)
    ap.add_argument("--ddp-checkpoint-every", type=int, default=20)
    ap.add_argument("--ddp-step-delay-ms", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--floor-runs", type=int, default=3, help="runs of the framework alone, per workload")
    ap.add_argument("--work", default="/tmp", help="where the floor runs write (a directory of their own each)")
    args = ap.parse_args()
    names = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in names if w not in WORKLOADS]
    if unknown or not names:
        ap.error(f"--workloads: {', '.join(unknown) or 'none'}: not among {', '.join(WORKLOADS)}")

    stamp = time.strftime("%H%M%S")
    results = []
    for name in names:
        workload = WORKLOADS[name](args)
        plan = [(True, False), (False, False)] * args.runs + [(True, True), (False, True)] * args.busy_runs
        for i, (in_place, busy) in enumerate(plan):
            exp_id = f"fr-{stamp}-{name}-{i}-{'inplace' if in_place else 'requeue'}{'-busy' if busy else ''}"
            try:
                r = one_run(args.api, workload, exp_id, in_place, busy, args)
            except RuntimeError as e:
                http("DELETE", f"{args.api}/experiments/{exp_id}")
                nan = float("nan")
                r = {"id": exp_id, "workload": name, "mode": "in place" if in_place else "requeue", "busy": busy,
                     "load": "?", "jobs": "?", "ckpt1": nan, "failed": nan, "recorded": nan, "start2": nan,
                     "first2": nan, "steps": "?", "problems": str(e)}
            results.append(r)
            print(f"  {name}: {r['mode']}{' (busy)' if busy else ''}: first step of attempt 2 +{r['first2']:.2f} s "
                  f"(failed +{r['failed']:.2f}, recorded +{r['recorded']:.2f}, start_step line +{r['start2']:.2f}; "
                  f"steps {r['steps']}; jobs {r['jobs']}; attempt 1 checkpointed {r['ckpt1']:.1f} s after submit; "
                  f"load {r['load']}) {r['problems']}", file=sys.stderr)

    print("All times in seconds after the kill -9 (of the TensorFlow chief's program, or of DDP rank 3's). "
          "Workloads:")
    print()
    for name in names:
        w = WORKLOADS[name](args)
        print(f"- {w.shape}; {w.args_line(args)}")
    print()
    print("| workload | cluster | restart | run | Slurm jobs | load | attempt 1 failed | attempt 2 recorded "
          "| attempt 2 start_step line | **attempt 2 first step** | steps (start -> first) | problems |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['workload']} | {'busy' if r['busy'] else 'idle'} | {r['mode']} | {r['id'].split('-')[3]} "
              f"| {r['jobs']} | {r['load']} | {r['failed']:.2f} | {r['recorded']:.2f} | {r['start2']:.2f} "
              f"| **{r['first2']:.2f}** | {r['steps']} | {r['problems'] or '-'} |")
    print()
    print("| workload | cluster | restart | runs | kill -9 -> attempt 2's first step: min / median / max (s) "
          "| requeue median / in place median |")
    print("|---|---|---|---|---|---|")
    for name in names:
        for busy in (False, True):
            med = {}
            for mode in ("in place", "requeue"):
                rs = [r["first2"] for r in results if r["workload"] == name and r["busy"] == busy and r["mode"] == mode]
                if not rs:
                    continue
                med[mode] = statistics.median([x for x in rs if x == x] or [float("nan")])
                ratio = f"{med['requeue'] / med['in place']:.1f}x" if mode == "requeue" and "in place" in med else "-"
                print(f"| {name} | {'busy' if busy else 'idle'} | {mode} | {len(rs)} | {' / '.join(summary(rs))} "
                      f"| {ratio} |")
    floors = {}
    for name in names if args.floor_runs > 0 else []:
        workload = WORKLOADS[name](args)
        floors[name] = [floor_run(workload, args, args.work, i) for i in range(args.floor_runs)]
        for i, f in enumerate(floors[name]):
            print(f"  {name}: floor {i}: first step past the checkpoint +{f['first']:.2f} s after the launch "
                  f"(start_step line +{f['start']:.2f}; steps {f['steps']})", file=sys.stderr)
    if floors:
        print()
        print("The floor: the same programs started by hand from a checkpoint (no Slurm, no tfslurm), launch -> "
              "the first step past it, against kill -9 -> attempt 2's first step in place on the idle cluster:")
        print()
        print("| workload | floor runs | floor: min / median / max (s) | in place, idle: median (s) "
              "| **in place / floor** |")
        print("|---|---|---|---|---|")
        for name, fs in floors.items():
            firsts = [f["first"] for f in fs]
            ip = [r["first2"] for r in results if r["workload"] == name and not r["busy"] and r["mode"] == "in place"]
            ip = [x for x in ip if x == x]
            ip_med = statistics.median(ip) if ip else float("nan")
            print(f"| {name} | {len(fs)} | {' / '.join(summary(firsts))} | {ip_med:.2f} "
                  f"| **{ip_med / statistics.median(firsts):.2f}x** |")
    print()
    print(f"restart.backoff_s {args.backoff_s} (a requeue waits it; a restart in place has none); killed once the "
          f"service had seen a checkpoint at step {args.kill_at_step} or later; the reporting task's log (the chief, "
          f"rank 0) read every {POLL_S * 1000:.0f} ms; busy: one `sleep {args.filler_s}` job per node needing the "
          f"whole node (--exclusive), submitted after the experiment's job started.")
    return 1 if any(r["problems"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
