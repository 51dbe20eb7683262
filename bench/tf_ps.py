#!/usr/bin/env python3
"""TensorFlow parameter-server training two ways (issue 14), the measuring
half of tf_ps.sh.

Runs examples/mnist_tf/train.py (chief + 2 ps + 2 workers + 1 evaluator on 3
nodes x 2 tasks) RUNS times each way, taking turns (a, b, a, b ...), one run
at a time on an idle cluster:
  (a) `sbatch SEEDS_DIR/tf_ps.sbatch`: the hand-written script tf_ps.sh wrote
      (srun + a wrapper that builds TF_CONFIG as SlurmClusterResolver does);
      its outputs land in SEEDS_DIR/job-<jobid>/task-<rank>.out, rank 0 being
      the chief;
  (b) POST /experiments to a running tfslurmd: the same program, arguments
      and environment; the chief's output is
      <model_dir>/logs/attempt-1/task-<proc>.out.
For each run it measures, from the moment just before the submission:
  - the chief's first `mnist_tf: step=` line and its `mnist_tf: done step=`
    line, by reading the chief's output file every 20 ms (a line counts from
    when it is first seen);
  - the chief's running time: its train.py process, found in /proc by its
    environment, from the start time in /proc/PID/stat to when it leaves
    /proc (or is a zombie), watched every 20 ms;
  - the Slurm job: `scontrol -o show job` every 0.5 s until it has ended, then
    JobState, StartTime, EndTime, NumNodes, TimeLimit;
and checks what should have happened: (a) ends TIMEOUT, (b) succeeds with
the ps, workers and evaluator reaped and the job COMPLETED, and in both the
chief trained from step 0 to --steps and every ps and worker served.

Prints a Markdown table of runs, medians and the targets; exits 1 if a run
went wrong.
"""
import argparse
import calendar
import os
import statistics
import subprocess
import sys
import threading
import time

from http_json import http

POLL_S = 0.02
ENDED = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE")
# (a)'s fixed ports (tfconfig_from_slurm.py: 8888 + 10 x node index + local id).
SEEDS_PORTS = [8888 + 10 * n + k for n in range(3) for k in range(2)]
TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_NUM_INTRAOP_THREADS": "1"}


def log(msg):
    print(f"  {msg}", file=sys.stderr, flush=True)


def epoch(ts):
    """The API's "2024-01-02T03:04:05.678Z" as Unix seconds; None stays None."""
    if not ts:
        return None
    return calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")) + int(ts[20:23]) / 1000.0


def scontrol_job(job_id):
    out = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    return dict(tok.split("=", 1) for tok in out.split() if "=" in tok)


def slurm_epoch(value):
    """scontrol's local "2026-11-24T17:36:27" as Unix seconds."""
    return time.mktime(time.strptime(value, "%Y-%m-%dT%H:%M:%S"))


def slurm_minutes(value):
    """TimeLimit "00:02:00" / "1-00:00:00" as seconds."""
    days = 0
    if "-" in value:
        d, value = value.split("-", 1)
        days = int(d)
    parts = [int(p) for p in value.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return days * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


TICKS = os.sysconf("SC_CLK_TCK")


def _boot_epoch():
    """Unix time of boot, to 10 ms: /proc/stat's btime is whole seconds."""
    t0 = time.time()
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    return (t0 + time.time()) / 2 - up


BOOT_EPOCH = _boot_epoch()


def proc_stat(pid):
    """(state, start time as Unix seconds) of pid, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return rest[0], BOOT_EPOCH + int(rest[19]) / TICKS


def find_process(env_match):
    """The pid of the python train.py process whose environment holds env_match
    (in (a) the wrapper's pid, which then execs train.py)."""
    want = {f"{k}={v}".encode() for k, v in env_match.items()}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            # The program's own process (python ... train.py), not srun or a
            # shell whose command line names train.py too.
            if not os.path.basename(argv[0]).startswith(b"python") or not any(a.endswith(b"train.py") for a in argv):
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = set(f.read().split(b"\0"))
        except OSError:
            continue
        if want <= env:
            return int(entry)
    return None


def listening(ports):
    out = subprocess.run(["ss", "-Hltn"], stdout=subprocess.PIPE, text=True).stdout
    busy = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 4:
            port = fields[3].rsplit(":", 1)[-1]
            if port.isdigit() and int(port) in ports:
                busy.add(int(port))
    return sorted(busy)


def wait_idle(timeout=120):
    """Until every node of the cluster is idle and no job is left."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        states = subprocess.run(["sinfo", "-h", "-N", "-p", "debug", "-o", "%T"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True).stdout.split()
        jobs = subprocess.run(["squeue", "-h", "-o", "%i"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True).stdout.split()
        if states and all(s == "idle" for s in states) and not jobs:
            return
        time.sleep(0.5)
    raise RuntimeError("the cluster did not become idle")


class ChiefWatch:
    """Follows the chief's output file and its train.py process."""

    def __init__(self, t_submit, env_match):
        self.t_submit = t_submit
        self.env_match = env_match
        self.log_path = None
        self.offset = 0
        self.partial = b""
        self.lines = []
        self.first_step = self.done = self.role_line = None
        self.pid = self.start = self.end = None
        self.last_scan = 0.0

    def poll(self):
        now = time.time()
        if self.log_path:
            try:
                with open(self.log_path, "rb") as f:
                    f.seek(self.offset)
                    data = f.read()
            except OSError:
                data = b""
            if data:
                self.offset += len(data)
                *complete, self.partial = (self.partial + data).split(b"\n")
                for raw in complete:
                    line = raw.decode(errors="replace")
                    self.lines.append(line)
                    if self.role_line is None and line.startswith("mnist_tf: role=chief"):
                        self.role_line = line
                    if self.first_step is None and line.startswith("mnist_tf: step="):
                        self.first_step = now
                    if self.done is None and line.startswith("mnist_tf: done step="):
                        self.done = now
        if self.pid is None:
            if now - self.last_scan >= 0.1:
                self.last_scan = now
                self.pid = find_process(self.env_match)
                if self.pid is not None:
                    st = proc_stat(self.pid)
                    if st is None:
                        self.pid = None
                    else:
                        self.start = st[1]
        elif self.end is None:
            st = proc_stat(self.pid)
            if st is None or st[0] in ("Z", "X"):
                self.end = now

    def finished(self):
        return self.done is not None and self.end is not None


class JobWatch(threading.Thread):
    """`scontrol -o show job` from its own thread: every 50 ms until the job
    runs, then every second while it trains, every 50 ms for 10 s once the
    chief has exited (chief_exited()), then every 0.5 s until it has ended.
    Gives Slurm's fields at the end and, to 50 ms plus one call, when the job
    was first seen RUNNING and first seen no longer RUNNING (Slurm's own
    StartTime and EndTime are whole seconds)."""

    def __init__(self, job_id, deadline):
        super().__init__(daemon=True)
        self.job_id, self.deadline = job_id, deadline
        self.running_at = self.left_running_at = self.ended_at = None
        self.fields = {}
        self.states = []
        self.chief_exit = None
        self.error = None

    def chief_exited(self, when):
        self.chief_exit = when

    def run(self):
        while True:
            job = scontrol_job(self.job_id)
            now = time.time()
            state = job.get("JobState")
            if state and (not self.states or self.states[-1][1] != state):
                self.states.append((now, state))
            if state and state != "PENDING" and self.running_at is None:
                self.running_at = now
            if self.running_at is not None and state != "RUNNING" and self.left_running_at is None:
                self.left_running_at = now
            if state in ENDED:
                self.fields, self.ended_at = job, now
                return
            if now > self.deadline:
                self.fields, self.error = job, f"job {self.job_id} still {state} at the timeout"
                return
            if self.running_at is None:
                interval = 0.05
            elif self.chief_exit is None:
                interval = 1.0
            else:
                interval = 0.05 if now - self.chief_exit < 10 else 0.5
            time.sleep(interval)

    def result(self):
        self.join()
        if self.error:
            raise RuntimeError(self.error)
        return self.fields


def time_limit_logged(slurmctld_log, job_id):
    """When slurmctld logged "Time limit exhausted for JobId=N" (Unix s)."""
    try:
        with open(slurmctld_log, errors="replace") as f:
            for line in f:
                if f"Time limit exhausted for JobId={job_id}" in line and line.startswith("["):
                    stamp = line[1:line.index("]")]
                    whole, _, frac = stamp.partition(".")
                    return slurm_epoch(whole) + (int(frac) / 10 ** len(frac) if frac else 0)
    except OSError:
        pass
    return None


def result(way, i, job_id, t_submit, load, watch, jobwatch, problems, **extra):
    job = jobwatch.result()
    start, end, nodes = slurm_epoch(job["StartTime"]), slurm_epoch(job["EndTime"]), int(job["NumNodes"])
    held = end - start
    polled = (jobwatch.left_running_at - jobwatch.running_at) if jobwatch.left_running_at else float("nan")
    chief_ran = (watch.end - watch.start) if watch.start and watch.end else float("nan")
    if watch.role_line is None or "start_step=0" not in watch.role_line:
        problems.append(f"chief's role line: {watch.role_line!r}")
    if watch.first_step is None:
        problems.append("no training step seen")
    if watch.done is None:
        problems.append("no `done step=` seen")
    r = {
        "way": way, "run": i, "job": job_id, "load": load, "state": job.get("JobState"),
        "first_step_s": (watch.first_step or float("nan")) - t_submit,
        # Split of the above: the launch (Slurm, and the wrapper or tfslurm's
        # agents), then TensorFlow's own start-up in the same program.
        "launch_s": (watch.start or float("nan")) - t_submit,
        "tf_start_s": (watch.first_step or float("nan")) - (watch.start or float("nan")),
        "done_s": (watch.done or float("nan")) - t_submit,
        "chief_ran_s": chief_ran, "held_s": held, "held_polled_s": polled, "nodes": nodes, "node_s": held * nodes,
        "chief_node_s": chief_ran * nodes,
        "ratio": held / chief_ran if chief_ran else float("nan"),
        "ratio_polled": polled / chief_ran if chief_ran else float("nan"),
        "time_limit_s": slurm_minutes(job.get("TimeLimit", "0")),
        # Both from the polled times (Slurm's are whole seconds).
        "chief_start_after_running_s": (watch.start or float("nan")) - (jobwatch.running_at or float("nan")),
        "left_running_after_chief_exit_s": (jobwatch.left_running_at or float("nan")) - (watch.end or float("nan")),
        "states": " > ".join(f"{st}@{t - t_submit:.1f}" for t, st in jobwatch.states),
        "problems": problems,
    }
    r.update(extra)
    return r


def run_seeds(args, i):
    """(a): sbatch of the hand-written script."""
    problems = []
    busy = listening(SEEDS_PORTS)
    if busy:
        problems.append(f"ports already listened on before the run: {busy}")
    load = os.getloadavg()[0]
    t_submit = time.time()
    out = subprocess.run(["sbatch", "--parsable", os.path.join(args.seeds_dir, "tf_ps.sbatch")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"sbatch failed: {out.stderr}")
    job_id = int(out.stdout.strip().split(";")[0])
    deadline = t_submit + args.timeout
    jobwatch = JobWatch(job_id, deadline + 240)
    jobwatch.start()
    run_dir = os.path.join(args.seeds_dir, f"job-{job_id}")
    watch = ChiefWatch(t_submit, {"SLURM_JOB_ID": job_id, "SLURM_PROCID": 0})
    # Rank 0 is the chief: SlurmClusterResolver's order puts "chief" first.
    watch.log_path = os.path.join(run_dir, "task-0.out")
    while not watch.finished():
        if time.time() > deadline:
            raise RuntimeError(f"(a) job {job_id}: chief not done at the timeout (done={watch.done}, "
                               f"exit={watch.end}); last lines: {watch.lines[-5:]}")
        if jobwatch.ended_at is not None:  # a chief that never finished: the job ended at its limit
            break
        watch.poll()
        if watch.end is not None and jobwatch.chief_exit is None:
            jobwatch.chief_exited(watch.end)
        time.sleep(POLL_S)
    # Every ps and worker served (a port collision would show here).
    for rank, what in ((2, "ps index=0"), (3, "ps index=1"), (4, "worker index=0"), (5, "worker index=1")):
        try:
            text = open(os.path.join(run_dir, f"task-{rank}.out"), errors="replace").read()
        except OSError:
            text = ""
        if f"mnist_tf: role={what} serving" not in text:
            problems.append(f"task {rank} did not serve as {what}: {text[-300:]!r}")
    r = result("a", i, job_id, t_submit, load, watch, jobwatch, problems, svc_chief_s=None, svc_reaped_after_s=None)
    if r["state"] != "TIMEOUT":
        problems.append(f"job ended {r['state']}, not TIMEOUT")
    logged = time_limit_logged(args.slurmctld_log, job_id)
    job = jobwatch.fields
    r["limit_logged_after_start_s"] = (logged - slurm_epoch(job["StartTime"])) if logged else None
    return r


def tfslurm_spec(args, exp_id):
    program = os.path.join(args.repo, "examples", "mnist_tf", "train.py")
    return {
        "id": exp_id,
        "command": [args.python, program, "--data", "synthetic", "--steps", str(args.steps),
                    "--checkpoint-every", "100", "--steps-per-dispatch", "25"],
        "workdir": os.path.dirname(program),
        "env": dict(TF_ENV),
        "cluster": {"chief": 1, "ps": 2, "worker": 2, "evaluator": 1},
        "resources": {"partition": "debug", "nodes": 3, "tasks_per_node": 2, "cpus_per_task": 1,
                      "time_limit": "00:10:00"},
        "success": "chief",
        "restart": {"max_restarts": 0},
    }


def run_tfslurm(args, i, stamp):
    """(b): POST /experiments to tfslurmd."""
    problems = []
    exp_id = f"tfps-{stamp}-{i}"
    spec = tfslurm_spec(args, exp_id)
    load = os.getloadavg()[0]
    t_submit = time.time()
    status, body = http("POST", f"{args.api}/experiments", spec)
    if status not in (200, 201):
        raise RuntimeError(f"POST /experiments answered {status}: {body}")
    deadline = t_submit + args.timeout
    watch = ChiefWatch(t_submit, {"EXPERIMENT_ID": exp_id, "TFSLURM_ROLE": "chief"})
    jobwatch = None
    last_get, view = 0.0, None
    while not watch.finished():
        now = time.time()
        if now > deadline:
            raise RuntimeError(f"(b) {exp_id}: chief not done at the timeout (done={watch.done}, exit={watch.end}); "
                               f"last lines: {watch.lines[-5:]}")
        if (jobwatch is None or watch.log_path is None) and now - last_get >= 0.05:
            last_get = now
            _, view = http("GET", f"{args.api}/experiments/{exp_id}")
            attempts = view.get("attempts") or []
            if jobwatch is None and attempts and attempts[-1].get("slurm_job_id"):
                jobwatch = JobWatch(attempts[-1]["slurm_job_id"], deadline + 240)
                jobwatch.start()
            chief = [t for t in view.get("tasks", []) if t["role"] == "chief"]
            if chief and view.get("model_dir"):
                watch.log_path = os.path.join(view["model_dir"], "logs", "attempt-1",
                                              f"task-{chief[0]['proc_id']}.out")
            if view.get("state") in ("failed", "cancelled"):
                break
        watch.poll()
        if watch.end is not None and jobwatch is not None and jobwatch.chief_exit is None:
            jobwatch.chief_exited(watch.end)
        time.sleep(POLL_S)
    if jobwatch is None:
        raise RuntimeError(f"(b) {exp_id}: no Slurm job seen: {view}")
    while True:
        _, view = http("GET", f"{args.api}/experiments/{exp_id}")
        if view["state"] in ("succeeded", "failed", "cancelled") and all(t["state"] != "running" for t in view["tasks"]):
            break
        if time.time() > deadline + 120:
            problems.append(f"experiment still {view['state']} at the timeout")
            break
        time.sleep(0.1)
    states = sorted(f"{t['role']}:{t['state']}" for t in view["tasks"])
    if view["state"] != "succeeded":
        problems.append(f"experiment {view['state']}: {view.get('reason')}")
    want = sorted(["chief:succeeded", "evaluator:reaped", "ps:reaped", "ps:reaped", "worker:reaped", "worker:reaped"])
    if states != want:
        problems.append(f"task states {states}")
    chief = next(t for t in view["tasks"] if t["role"] == "chief")
    reg, ended = epoch(chief.get("registered_at")), epoch(chief.get("ended_at"))
    svc_chief = (ended - reg) if reg and ended else None
    others = [epoch(t.get("ended_at")) for t in view["tasks"] if t["role"] != "chief"]
    reaped_after = (max(others) - watch.end) if others and all(others) and watch.end else None
    r = result("b", i, jobwatch.job_id, t_submit, load, watch, jobwatch, problems, svc_chief_s=svc_chief,
               svc_reaped_after_s=reaped_after, exp_id=exp_id)
    if r["state"] != "COMPLETED":
        problems.append(f"job {jobwatch.job_id} ended {r['state']}")
    return r


def fmt(v, digits=1):
    if v is None or v != v:
        return "-"
    return f"{v:.{digits}f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--python", required=True, help="the TensorFlow venv's python")
    ap.add_argument("--seeds-dir", required=True, help="where tf_ps.sh wrote tf_ps.sbatch")
    ap.add_argument("--slurmctld-log", required=True, help="the local cluster's slurmctld.log")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--timeout", type=float, default=300, help="seconds per run until the chief is done")
    args = ap.parse_args()

    stamp = time.strftime("%H%M%S")
    results = []
    for i in range(args.runs):
        for way in ("a", "b"):
            wait_idle()
            r = run_seeds(args, i) if way == "a" else run_tfslurm(args, i, stamp)
            results.append(r)
            log(f"({way}) run {i}: job {r['job']} {r['state']}, first step {fmt(r['first_step_s'], 2)} s, "
                f"done {fmt(r['done_s'], 2)} s, chief ran {fmt(r['chief_ran_s'], 2)} s, held {fmt(r['held_s'], 0)} s "
                f"(polled {fmt(r['held_polled_s'], 2)} s) x {r['nodes']} nodes = {fmt(r['node_s'], 0)} node-s, "
                f"ratio {fmt(r['ratio_polled'], 3)}, load {r['load']:.2f}; {r['states']} {'; '.join(r['problems'])}")

    print("| run | way | job | load | JobState | submit -> first step (s) | of which submit -> chief start (s) "
          "| of which chief start -> first step (s) | submit -> done step (s) | chief ran (s) "
          "| job RUNNING -> chief start (s) | chief exit -> job no longer RUNNING (s) | held, Slurm (s) "
          "| held, polled (s) | nodes | node-seconds held (Slurm) | node-seconds while the chief ran "
          "| ratio (Slurm / polled) | service: chief registered -> ended (s) "
          "| service: chief exit -> last other task ended (s) | Slurm states (s after submit) "
          "| problems |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        way = "(a) sbatch" if r["way"] == "a" else "(b) tfslurm"
        print(f"| {r['run']} | {way} | {r['job']} | {r['load']:.2f} | {r['state']} | {fmt(r['first_step_s'], 2)} "
              f"| {fmt(r['launch_s'], 2)} | {fmt(r['tf_start_s'], 2)} | {fmt(r['done_s'], 2)} | {fmt(r['chief_ran_s'], 2)} | {fmt(r['chief_start_after_running_s'], 2)} "
              f"| {fmt(r['left_running_after_chief_exit_s'], 2)} | {fmt(r['held_s'], 0)} | {fmt(r['held_polled_s'], 2)} "
              f"| {r['nodes']} | {fmt(r['node_s'], 0)} | {fmt(r['chief_node_s'], 1)} "
              f"| {fmt(r['ratio'], 3)} / {fmt(r['ratio_polled'], 3)} | {fmt(r['svc_chief_s'], 2)} | {fmt(r['svc_reaped_after_s'], 2)} | {r['states']} "
              f"| {'; '.join(r['problems']) or '-'} |")

    med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
    a = [r for r in results if r["way"] == "a"]
    b = [r for r in results if r["way"] == "b"]
    print()
    print("| way | runs | JobState | submit -> first step p50 (s) | submit -> chief start p50 (s) "
          "| chief start -> first step p50 (s) | submit -> done step p50 (s) | chief ran p50 (s) "
          "| held p50, Slurm / polled (s) | node-seconds held p50 (Slurm) | ratio p50, polled (max) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, rs in (("(a) hand-written sbatch + srun", a), ("(b) tfslurm", b)):
        print(f"| {name} | {len(rs)} | {', '.join(sorted(set(r['state'] for r in rs)))} "
              f"| {fmt(med(rs, 'first_step_s'), 2)} | {fmt(med(rs, 'launch_s'), 2)} | {fmt(med(rs, 'tf_start_s'), 2)} "
              f"| {fmt(med(rs, 'done_s'), 2)} | {fmt(med(rs, 'chief_ran_s'), 2)} "
              f"| {fmt(med(rs, 'held_s'), 0)} / {fmt(med(rs, 'held_polled_s'), 2)} | {fmt(med(rs, 'node_s'), 0)} "
              f"| {fmt(med(rs, 'ratio_polled'), 3)} ({fmt(max(r['ratio_polled'] for r in rs), 3)}) |")
    print()
    ratios = [r["ratio_polled"] for r in b]
    within = sum(1 for x in ratios if x <= 1.05)
    print(f"**(b) node-seconds <= 1.05 x the chief's running time**, read as: the job's node-seconds against the "
          f"node-seconds of a job held on the same nodes exactly as long as its chief ran, i.e. held / chief ran "
          f"<= 1.05. Polled: {', '.join(fmt(x, 3) for x in ratios)} (p50 {fmt(statistics.median(ratios), 3)}); "
          f"from Slurm's whole-second times: {', '.join(fmt(r['ratio'], 3) for r in b)}: "
          f"{'met' if within == len(ratios) else 'MISSED'} (polled: within 1.05 in {within} of {len(ratios)} runs). "
          f"(a) for comparison: {', '.join(fmt(r['ratio_polled'], 3) for r in a)}.  ")
    diff = med(b, "first_step_s") - med(a, "first_step_s")
    pairs = [rb["first_step_s"] - ra["first_step_s"] for ra, rb in zip(a, b)]
    print(f"**(b) submit -> first step within 2 s of (a)'s**: p50 {fmt(med(b, 'first_step_s'), 2)} s vs "
          f"{fmt(med(a, 'first_step_s'), 2)} s, (b) - (a) = {diff:+.2f} s (run by run: "
          f"{', '.join(f'{d:+.2f}' for d in pairs)}): {'met' if diff <= 2.0 else 'MISSED'}. Of which submit -> chief "
          f"start p50 {fmt(med(b, 'launch_s'), 2)} s vs {fmt(med(a, 'launch_s'), 2)} s, and chief start -> first step "
          f"(TensorFlow's start-up, the same program both ways) p50 {fmt(med(b, 'tf_start_s'), 2)} s vs "
          f"{fmt(med(a, 'tf_start_s'), 2)} s.  ")
    timeouts = sum(1 for r in a if r["state"] == "TIMEOUT" and r["held_s"] >= r["time_limit_s"])
    print(f"**(a) holds its nodes until its time limit**: JobState {', '.join(r['state'] for r in a)}; held "
          f"{', '.join(fmt(r['held_s'], 0) for r in a)} s (Slurm) against a limit of {fmt(a[0]['time_limit_s'], 0)} s, "
          f"while its chief ran {', '.join(fmt(r['chief_ran_s'], 1) for r in a)} s; slurmctld logged \"Time limit "
          f"exhausted\" {', '.join(fmt(r.get('limit_logged_after_start_s'), 1) for r in a)} s after StartTime: "
          f"{'shown' if timeouts == len(a) else 'NOT shown'} in {timeouts} of {len(a)} runs.")
    return 1 if any(r["problems"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
