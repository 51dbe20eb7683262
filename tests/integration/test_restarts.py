"""Issue 4: resume from checkpoints, automatic restarts, preemption, time
limits and crash safety, on the real local Slurm cluster."""
import json
import os
import re
import signal
import sqlite3
import subprocess
import threading
import time

import pytest

from conftest import REPO, program_pid, programs, scontrol_job, slurm_env, squeue_ids, wait_for
from helpers import hosts

TRAIN = os.path.join(REPO, "examples/linear_ps/train.py")


def spec(exp_id, steps, step_sleep, restart, extra_args=(), time_limit="00:10:00", grace=30, cluster=None,
         nodes=3, tasks_per_node=2):
    return {
        "id": exp_id,
        "command": ["python3", TRAIN, "--steps", str(steps), "--checkpoint-every", "10",
                    "--step-sleep", str(step_sleep)] + list(extra_args),
        "workdir": os.path.join(REPO, "examples/linear_ps"),
        "cluster": cluster or {"ps": 2, "worker": 4},
        "resources": {"partition": "debug", "nodes": nodes, "tasks_per_node": tasks_per_node,
                      "time_limit": time_limit},
        "restart": restart,
        "checkpoint": {"signal_grace_s": grace},
    }


def log(exp, attempt, proc):
    path = os.path.join(exp["model_dir"], "logs", f"attempt-{attempt}", f"task-{proc}.out")
    return open(path, errors="replace").read() if os.path.exists(path) else ""


def task_addresses(service, exp_id, attempt):
    """The host:port of an attempt's tasks, from the service's database (GET shows the current attempt's)."""
    db = sqlite3.connect(f"file:{service.db}?mode=ro", uri=True)
    try:
        return {r[0] for r in db.execute("SELECT address FROM tasks WHERE experiment_id = ? AND attempt = ?",
                                         (exp_id, attempt)) if r[0]}
    finally:
        db.close()


def start_steps(exp, attempt):
    """start_step printed by the workers of an attempt."""
    steps = set()
    for proc in range(6):
        steps |= {int(m) for m in re.findall(r"linear_ps: role=\w+ index=\d+ attempt=\d+ start_step=(\d+)",
                                             log(exp, attempt, proc))}
    return steps


def checkpoints_written(exp, attempt):
    """The steps of the checkpoints an attempt's programs wrote, as they
    logged them (linear_ps's checkpointing task prints a line per save:
    "checkpoint step=N path=..." or "checkpoint on signal step=N ...")."""
    steps = set()
    for proc in range(6):
        steps |= {int(m) for m in re.findall(r"^linear_ps: checkpoint (?:on signal )?step=(\d+)",
                                             log(exp, attempt, proc), re.M)}
    return steps


def checkpoint_at_least(service, exp_id, step):
    e = service.experiment(exp_id)
    return e if e["checkpoint"] and e["checkpoint"]["step"] >= step else None


def jobs_named(conf, name, service):
    """This service's jobs with that name (the shared cluster keeps other tests' jobs too)."""
    out = subprocess.run(["scontrol", "-o", "show", "job"], env=slurm_env(conf), stdout=subprocess.PIPE, text=True)
    return [line for line in out.stdout.splitlines()
            if f"JobName={name} " in line and f"WorkDir={service.output_root}/" in line]


@pytest.mark.parametrize("in_allocation", [True, False], ids=["in-place", "new-job"])
def test_kill9_of_a_worker_restarts_from_the_last_checkpoint(service, slurm_cluster, in_allocation):
    exp_id = "rs-kill9" if in_allocation else "rs-kill9-newjob"
    # max_task_restarts 0: the worker's death fails the attempt (with lone
    # restarts, the default, it would restart alone: test_tensorflow).
    s = spec(exp_id, steps=300, step_sleep=0.1, restart={"max_restarts": 2, "on": ["retryable_exit"],
                                                         "backoff_s": 1, "in_allocation": in_allocation,
                                                         "max_task_restarts": 0})
    assert service.post("/experiments", s)[0] == 201
    wait_for(lambda: checkpoint_at_least(service, exp_id, 30), 120, "a checkpoint reported as progress")
    # Resume of a running experiment: 409 (not 503, which means "ended, its job still finishing").
    status, body = service.post(f"/experiments/{exp_id}/resume", {})
    assert status == 409, (status, body)
    assert "cancel it first" in json.dumps(body), body
    pid = wait_for(lambda: program_pid(exp_id, "worker", 1), 30, "worker 1's program")
    os.kill(pid, signal.SIGKILL)
    done = service.wait_state(exp_id, ("succeeded", "failed"), timeout=240)
    assert done["state"] == "succeeded", done["reason"]
    assert len(done["attempts"]) == 2, done["attempts"]
    first, second = done["attempts"]
    assert first["end_reason"] == "retryable_exit" and "signal 9" in first["reason"], first
    # From the last checkpoint attempt 1 wrote, its exact step: what the
    # service recorded, what every program of attempt 2 says it started
    # from, and what the checkpointing task restored.
    latest = max(checkpoints_written(done, 1), default=None)
    assert latest and latest >= 30, checkpoints_written(done, 1)
    assert second["start_step"] == latest, (second, sorted(checkpoints_written(done, 1)))
    assert start_steps(done, 2) == {latest}, (start_steps(done, 2), latest)
    assert any(re.search(rf"^linear_ps: restored step={latest} path=\S*model\.ckpt-{latest}$", log(done, 2, proc), re.M)
               for proc in range(6)), [log(done, 2, proc)[-500:] for proc in range(6)]
    assert done["checkpoint"]["step"] >= 300
    assert any(e["what"] == "state" and "restart 1 of 2" in e["why"] for e in done["events"])
    if in_allocation:
        # Restarted inside the same Slurm job: one job for both attempts,
        # every program of attempt 2 on new ports, and the job COMPLETED.
        assert second["in_place"] and second["slurm_job_id"] == first["slurm_job_id"], done["attempts"]
        assert second["job_name"] == first["job_name"] == f"tfx-{exp_id}-a1", done["attempts"]
        assert any(e["what"] == "restart" and e["why"].startswith(
            f"attempt 2 in Slurm job {first['slurm_job_id']}, restarted in place") for e in done["events"])
        ports = [task_addresses(service, exp_id, n) for n in (1, 2)]
        assert ports[0] and ports[1] and not ports[0] & ports[1], ports
        wait_for(lambda: scontrol_job(slurm_cluster, first["slurm_job_id"]).get("JobState") == "COMPLETED",
                 60, "the one job to complete")
        assert len(jobs_named(slurm_cluster, f"tfx-{exp_id}-a2", service)) == 0
    else:
        assert not second["in_place"] and second["slurm_job_id"] != first["slurm_job_id"], done["attempts"]
        assert second["job_name"] == f"tfx-{exp_id}-a2", second


def test_a_failure_close_to_the_time_limit_restarts_in_a_new_job_and_says_why(service, slurm_cluster):
    # A one-minute job: less than signal_grace_s + 60 s is ever left, so an
    # attempt in place would hardly reach a checkpoint before the warning.
    exp_id = "rs-late"
    s = spec(exp_id, steps=200, step_sleep=0.1, time_limit="1", grace=5,
             restart={"max_restarts": 1, "on": ["retryable_exit"], "backoff_s": 0, "in_allocation": True,
                      "max_task_restarts": 0})
    assert service.post("/experiments", s)[0] == 201
    wait_for(lambda: checkpoint_at_least(service, exp_id, 20), 120, "a checkpoint reported as progress")
    os.kill(wait_for(lambda: program_pid(exp_id, "worker", 1), 30, "worker 1's program"), signal.SIGKILL)
    done = service.wait_state(exp_id, ("succeeded", "failed"), timeout=240)
    assert done["state"] == "succeeded", done["reason"]
    first, second = done["attempts"]
    assert first["end_reason"] == "retryable_exit", first
    assert not second["in_place"] and second["slurm_job_id"] != first["slurm_job_id"], done["attempts"]
    assert second["start_step"] >= 20, second
    said = [e["why"] for e in done["events"] if e["what"] == "restart"]
    job = first["slurm_job_id"]
    assert any(re.fullmatch(rf"not in place: only \d+ s left before Slurm job {job}'s time limit; an attempt in "
                            r"place needs at least 65 s \(checkpoint.signal_grace_s \+ 60 s\); the job's end decides",
                            why) for why in said), said
    assert f"in a new Slurm job, not in place: Slurm job {job} has ended (FAILED)" in said, said


def test_real_preemption_comes_back_and_finishes_from_checkpoint(service, slurm_cluster):
    s = spec("rs-preempt", steps=400, step_sleep=0.1, restart={"max_restarts": 2, "on": ["preempted"],
                                                               "backoff_s": 1})
    status, body = service.post("/experiments", s)
    assert status == 201, body
    wait_for(lambda: checkpoint_at_least(service, "rs-preempt", 20), 120, "training to checkpoint")
    # A high-priority job that needs every CPU of every node.
    urgent = subprocess.run(["sbatch", "--parsable", "-p", "urgent", "-N3", "--ntasks-per-node=4",
                             "--mem-per-cpu=100", "--output=/dev/null", "--wrap", "sleep 5"], env=slurm_env(slurm_cluster),
                            stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    try:
        e = wait_for(lambda: (lambda x: x if x["attempts"][0]["end_reason"] else None)(service.experiment("rs-preempt")),
                     120, "attempt 1 to end")
        assert e["attempts"][0]["end_reason"] == "preempted", e["attempts"][0]
        assert e["attempts"][0]["slurm_state"] == "PREEMPTED", e["attempts"][0]
        done = service.wait_state("rs-preempt", ("succeeded", "failed"), timeout=300)
        assert done["state"] == "succeeded", done["reason"]
        assert done["attempts"][1]["start_step"] > 0
        assert min(start_steps(done, 2)) > 0
        # A preempted job has ended: the restart cannot be in place.
        first, second = done["attempts"][:2]
        assert not second["in_place"] and second["slurm_job_id"] != first["slurm_job_id"], done["attempts"]
        assert any(e["what"] == "restart" and e["why"] == "in a new Slurm job, not in place: Slurm job "
                   f"{first['slurm_job_id']} has ended (PREEMPTED)" for e in done["events"]), done["events"]
    finally:
        subprocess.run(["scancel", urgent], env=slurm_env(slurm_cluster))


def test_time_limit_runs_as_a_chain_of_attempts_checkpointing_on_the_signal(service):
    # One-minute attempts; SIGUSR1 20 s before the end; about 100 s of training.
    # SIGUSR1 5 to 35 s before each one-minute limit (docs/restarts.md), never
    # while the program still imports TF.
    s = spec("rs-timelimit", steps=1000, step_sleep=0.4, time_limit="1", grace=5,
             restart={"max_restarts": 5, "on": ["timeout"], "backoff_s": 1})
    assert service.post("/experiments", s)[0] == 201
    done = service.wait_state("rs-timelimit", ("succeeded", "failed"), timeout=420)
    assert done["state"] == "succeeded", done["reason"]
    attempts = done["attempts"]
    assert len(attempts) >= 2, attempts
    for a in attempts[:-1]:
        assert a["end_reason"] == "timeout" and a["slurm_state"] == "TIMEOUT", a
    for n in range(2, len(attempts) + 1):
        previous_chief_log = log(done, n - 1, 1)  # worker 0 checkpoints (task 1 under spread)
        # The checkpoint written on Slurm's --signal (SIGUSR1, signal_grace_s before the limit),
        # not the one the program also writes on the SIGTERM at the limit itself.
        on_signal = [int(x) for x in re.findall(r"checkpoint on signal step=(\d+) signal=SIGUSR1 ",
                                                previous_chief_log)]
        assert on_signal, f"attempt {n - 1} wrote no checkpoint on SIGUSR1:\n{previous_chief_log[-1500:]}"
        assert attempts[n - 1]["start_step"] >= max(on_signal) > 0, (attempts[n - 1], on_signal)
    assert done["checkpoint"]["step"] >= 1000


def test_max_restarts_reached_fails_with_that_reason(service):
    s = spec("rs-max", steps=100000, step_sleep=0.01,
             restart={"max_restarts": 1, "on": ["retryable_exit"], "backoff_s": 1},
             extra_args=["--fail-at-step", "20", "--fail-task", "worker:1", "--fail-code", "137",
                         "--fail-every-attempt"])
    assert service.post("/experiments", s)[0] == 201
    failed = service.wait_state("rs-max", "failed", timeout=240)
    assert "max_restarts 1 reached" in failed["reason"], failed["reason"]
    assert len(failed["attempts"]) == 2


def test_permanent_exit_code_is_not_restarted(service):
    s = spec("rs-permanent", steps=100000, step_sleep=0.01,
             restart={"max_restarts": 3, "on": ["retryable_exit", "preempted"], "backoff_s": 1},
             extra_args=["--fail-at-step", "20", "--fail-task", "worker:0", "--fail-code", "2"])
    assert service.post("/experiments", s)[0] == 201
    failed = service.wait_state("rs-permanent", "failed", timeout=180)
    assert "permanent_exit is not in restart.on" in failed["reason"], failed["reason"]
    assert len(failed["attempts"]) == 1


def test_resume_of_a_finished_experiment_starts_at_its_checkpoint(service):
    s = spec("rs-resume", steps=60, step_sleep=0.01, restart={"max_restarts": 0})
    assert service.post("/experiments", s)[0] == 201
    first = service.wait_state("rs-resume", ("succeeded", "failed"), timeout=180)
    assert first["state"] == "succeeded", first["reason"]
    step = first["checkpoint"]["step"]
    assert step >= 60
    assert service.post("/experiments/rs-unknown/resume", {})[0] == 404
    wait_for(lambda: (lambda st: st if st[0] == 202 else None)(service.post("/experiments/rs-resume/resume", {})),
             30, "resume to be accepted once the job has left Slurm")
    running = service.experiment("rs-resume")
    assert running["attempt"] == 2 and running["attempts"][1]["start_step"] == step
    # Still open (409), or already succeeded with its job finishing (503): attempt 2 has
    # nothing left to train. test_kill9_... pins the 409 on an experiment that surely runs.
    assert service.post("/experiments/rs-resume/resume", {})[0] in (409, 503)
    done = service.wait_state("rs-resume", ("succeeded", "failed"), timeout=180)
    assert done["state"] == "succeeded", done["reason"]
    assert start_steps(done, 2) == {step}


def test_service_killed_while_tasks_run_is_down_30s_and_the_experiment_completes(service_factory, slurm_cluster):
    first = service_factory()
    s = spec("rs-crash", steps=150, step_sleep=0.15, restart={"max_restarts": 0})
    assert first.post("/experiments", s)[0] == 201
    first.wait_state("rs-crash", "running", timeout=120)
    first.stop(signal.SIGKILL)
    time.sleep(30)  # the outage itself is what is tested: agents must ride it out
    second = service_factory(workdir=first.workdir)
    done = second.wait_state("rs-crash", ("succeeded", "failed"), timeout=240)
    assert done["state"] == "succeeded", done["reason"]
    done = wait_for(lambda: (lambda e: e if all(t["state"] != "running" for t in e["tasks"]) else None)(
        second.experiment("rs-crash")), 60, "the ps to be reaped")
    assert [t["state"] for t in done["tasks"] if t["role"] == "ps"] == ["reaped", "reaped"]
    assert len(jobs_named(slurm_cluster, "tfx-rs-crash-a1", second)) == 1
    job = wait_for(lambda: (lambda j: j if j.get("JobState") == "COMPLETED" else None)(
        scontrol_job(slurm_cluster, done["slurm_job_id"])), 60, "the job to complete")
    assert job["JobState"] == "COMPLETED"


def test_service_killed_in_the_middle_of_a_restart_in_place_finishes_it_once(service_factory, slurm_cluster):
    first = service_factory()
    exp_id = "rs-mid"
    s = spec(exp_id, steps=120, step_sleep=0.1, restart={"max_restarts": 1, "on": ["retryable_exit"], "backoff_s": 0,
                                                         "in_allocation": True, "max_task_restarts": 0})
    # Each program lingers 5 s after train.py ends (its wrapper ignores the
    # Shutdown's SIGTERM; train.py checkpoints on it and exits): the restart
    # stays in its middle (attempt 1 has failed, its programs are being
    # stopped, attempt 2 is not recorded) long enough to kill tfslurmd there.
    s["command"] = ["/bin/sh", "-c", 'trap "" TERM; "$@"; rc=$?; sleep 5; exit $rc', "sh"] + s["command"]
    assert first.post("/experiments", s)[0] == 201
    wait_for(lambda: checkpoint_at_least(first, exp_id, 20), 120, "a checkpoint reported as progress")
    os.kill(wait_for(lambda: program_pid(exp_id, "worker", 1), 30, "worker 1's program"), signal.SIGKILL)
    middle = wait_for(lambda: (lambda e: e if any(ev["what"] == "reaping" for ev in e["events"]) else None)(
        first.experiment(exp_id)), 60, "the Shutdowns of attempt 1")
    first.stop(signal.SIGKILL)
    assert len(middle["attempts"]) == 1, middle["attempts"]

    second = service_factory(workdir=first.workdir)
    done = second.wait_state(exp_id, ("succeeded", "failed"), timeout=240)
    assert done["state"] == "succeeded", done["reason"]
    one, two = done["attempts"]
    assert one["end_reason"] == "retryable_exit", one
    assert two["in_place"] and two["slurm_job_id"] == one["slurm_job_id"] and two["start_step"] >= 20, done["attempts"]
    # Once: no second Slurm job, and no program of attempt 1 left behind.
    assert len(jobs_named(slurm_cluster, f"tfx-{exp_id}-a2", second)) == 0
    assert programs({f"EXPERIMENT_ID={exp_id}", "TFSLURM_ATTEMPT=1"}) == []
    assert sum(1 for e in done["events"] if e["what"] == "restart" and "restarted in place" in e["why"]) == 1, \
        done["events"]


def slurmctld_port(conf):
    return int(next(line.split("=", 1)[1] for line in open(conf) if line.startswith("SlurmctldPort=")))


def submission_waiting_in_slurmctld(conf, pid, port):
    """The submission of process pid is in slurmctld's socket, whole: a
    connection of pid to slurmctld whose bytes have all left it (Send-Q 0)
    and wait on slurmctld's side, unread, more than a poll's small request
    holds (a job description: its script and environment, some kilobytes).
    slurmctld is stopped, so its kernel holds them until it reads."""
    def sockets(host, selector):
        out = hosts.ss(conf, host, ["-Htnp", "state", "established", selector])
        return [line.split() for line in out.splitlines()]
    # ss -H: Recv-Q Send-Q Local Peer [users:(...)]; slurmctld's end on its
    # host, tfslurmd's on the service host (the same host when not apart).
    waiting = {f[3]: int(f[0]) for f in sockets("ctld", f"sport = :{port}")}
    ours = [f for f in sockets("svc", f"dport = :{port}") if f"pid={pid}," in " ".join(f[4:])]
    return [(f[2], waiting.get(f[2])) for f in ours if int(f[1]) == 0 and waiting.get(f[2], 0) > 1024]


def test_service_killed_during_a_submission_leaves_exactly_one_job(service_factory, slurm_cluster):
    first = service_factory()
    ctld = int(subprocess.run(["pgrep", "-f", f"slurmctld.*{os.path.dirname(os.path.dirname(slurm_cluster))}"],
                              stdout=subprocess.PIPE, text=True).stdout.split()[0])
    s = spec("rs-midsubmit", steps=40, step_sleep=0.01, restart={"max_restarts": 0})
    # A dry run first, so the partition's shape is cached and the real
    # submission goes straight to recording its intent and calling Slurm.
    assert first.request("POST", "/experiments?dry_run=true", s)[0] == 200
    # slurmctld frozen: the submission RPC is sent and waits for its answer.
    os.kill(ctld, signal.SIGSTOP)
    try:
        def submit():
            try:
                first.post("/experiments", s)
            except OSError:
                pass  # the service is killed mid-request: that is the point

        t = threading.Thread(target=submit, daemon=True)
        t.start()

        def intent_recorded():
            db = sqlite3.connect(f"file:{first.db}?mode=ro", uri=True)
            try:
                row = db.execute("SELECT state FROM attempts WHERE experiment_id='rs-midsubmit'").fetchone()
            finally:
                db.close()
            return row and row[0] == "submitting"

        wait_for(intent_recorded, 30, "the intent to be recorded")
        wait_for(lambda: submission_waiting_in_slurmctld(slurm_cluster, first.proc.pid,
                                                         slurmctld_port(slurm_cluster)), 30,
                 "the submission to wait, whole, in slurmctld's socket")
        first.stop(signal.SIGKILL)
    finally:
        os.kill(ctld, signal.SIGCONT)
    second = service_factory(workdir=first.workdir)
    done = second.wait_state("rs-midsubmit", ("succeeded", "failed"), timeout=180)
    assert done["state"] == "succeeded", done["reason"]
    assert len(jobs_named(slurm_cluster, "tfx-rs-midsubmit-a1", second)) == 1
    # slurmctld read the request once it ran again and made the job: the new
    # service found it and adopted it, and submitted nothing itself.
    recovered = [e["why"] for e in done["events"] if e["what"] == "recovered"]
    assert recovered == [f"found Slurm job {done['slurm_job_id']} (tfx-rs-midsubmit-a1), whose submission was "
                         "not confirmed; adopting it"], done["events"]
