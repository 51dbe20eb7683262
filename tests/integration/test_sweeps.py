"""Issue 33: sweeps on the real local cluster with a real workload
(examples/linear_ps): trials run at most max_concurrent at once in Slurm,
ASHA stops the worse ones in Slurm, the best trial is reported, and a
tfslurmd killed -9 mid-sweep carries on with no trial lost or repeated. A
bad sweep is refused whole, naming the field, and leaves nothing behind."""
import datetime
import json
import os
import signal
import subprocess

from conftest import REPO, slurm_env, squeue_ids, wait_for

TRAIN = os.path.join(REPO, "examples/linear_ps/train.py")


def sweep_spec(sweep_id, trials=8):
    # One node per trial (1 ps + 1 worker), so that two trials fit the
    # three-node cluster with room to spare: "at most 2 in Slurm" is then
    # the sweep's doing, not the cluster's.
    return {
        "id": sweep_id,
        "experiment": {
            "command": ["python3", TRAIN, "--steps=60", "--log-every=5", "--checkpoint-every=30",
                        "--step-sleep=0.05"],
            "workdir": os.path.join(REPO, "examples/linear_ps"),
            "cluster": {"ps": 1, "worker": 1},
            "resources": {"partition": "debug", "nodes": 1, "tasks_per_node": 2,
                          "time_limit": "00:10:00"},
            "restart": {"max_restarts": 0},
            "checkpoint": {"signal_grace_s": 30},
        },
        # Learning rates from about right down to far too small: the trials
        # after the first two reach each rung after them, and worse, so ASHA
        # stops them there.
        "parameters": {"arg.--lr": {"values": [0.2, 0.1, 0.05, 0.02, 0.01, 0.003, 0.001, 0.0001][:trials]}},
        "max_concurrent": 2,
        "objective": {"tag": "loss", "goal": "min"},
        "early_stopping": {"rule": "asha", "rungs": [15, 30], "reduction_factor": 2},
    }


def slurm_jobs(conf, service, prefix):
    """This service's jobs whose name starts with `prefix`, as slurmctld
    records them (`scontrol -o show job`: every job it still holds, ended
    ones included), each as its fields. slurmctld purges an ended job only
    once its end_time is MinJobAge old (_list_find_job_old in
    src/slurmctld/job_mgr.c, slurm-22-05-8-1), and the local cluster sets
    MinJobAge=3600 (deploy/local-slurm/start.sh): every job of the test is
    still there at its end."""
    out = subprocess.run(["scontrol", "-o", "show", "job"], env=slurm_env(conf), stdout=subprocess.PIPE,
                         text=True, check=True).stdout
    jobs = []
    for line in out.splitlines():
        fields = dict(t.split("=", 1) for t in line.split() if "=" in t)
        if fields.get("JobName", "").startswith(prefix) and fields.get("WorkDir", "").startswith(
                service.output_root + "/"):
            jobs.append(fields)
    return jobs


def most_at_once(jobs):
    """The most jobs that ran at once, from Slurm's StartTime and EndTime. Slurm
    keeps whole seconds (job_record_t's start_time and end_time are time_t,
    src/slurmctld/slurmctld.h), so a job is taken to run over [start, end):
    one that starts in the second another ended does not count as beside it.
    Every job must have started and ended."""
    edges = []
    for j in jobs:
        start, end = (datetime.datetime.fromisoformat(j[k]) for k in ("StartTime", "EndTime"))
        assert start <= end, j
        edges += [(end, -1), (start, 1)]
    running = most = 0
    for _, step in sorted(edges):  # at the same second, ends before starts
        running += step
        most = max(most, running)
    return most


def scalars_written(service, experiment_id):
    """(step, loss) as the trial's program wrote them to its own scalars file
    ($TFSLURM_SCALARS_FILE in its MODEL_DIR, docs/scalars.md)."""
    path = os.path.join(service.experiment(experiment_id)["model_dir"], "tfslurm-scalars.jsonl")
    with open(path) as f:
        return [(p["step"], p["loss"]) for p in map(json.loads, f) if "loss" in p]


def get_sweep(service, sweep_id):
    status, body = service.get(f"/sweeps/{sweep_id}")
    assert status == 200, body
    return body


def test_sweep_runs_two_at_a_time_stops_early_and_survives_kill_9(service, slurm_cluster):
    status, body = service.post("/sweeps", sweep_spec("lr"))
    assert status == 201, body
    assert body["trials_total"] == 8
    assert len(body["trials"]) == 2, "max_concurrent trials start at once"

    # Mid-sweep: a trial beyond the first two has started.
    wait_for(lambda: len(get_sweep(service, "lr")["trials"]) >= 3, 150, "a third trial to start")
    service.stop(signal.SIGKILL)
    service.start()
    done = wait_for(lambda: (lambda s: s if s["state"] != "running" else None)(get_sweep(service, "lr")),
                    200, "the sweep to complete", interval=0.5)

    assert done["state"] == "completed", done["reason"]
    trials = done["trials"]
    # No trial lost or repeated: 8 trials, each an experiment, each one job.
    assert [t["index"] for t in trials] == list(range(1, 9)), trials
    assert [t["experiment_id"] for t in trials] == [f"lr-{i}" for i in range(1, 9)]
    assert all(t["state"] == "ended" for t in trials), [(t["index"], t["state"], t["note"]) for t in trials]
    for t in trials:
        exp = service.experiment(t["experiment_id"])
        assert len(exp["attempts"]) == 1, exp["attempts"]
        assert exp["attempts"][0]["job_name"] == f"tfx-{t['experiment_id']}-a1"
    # Slurm's own record of the sweep's jobs: one per trial, never
    # submitted twice, and at most two running at any time (from their start
    # and end times, not from sampling, which misses a short overlap).
    jobs = slurm_jobs(slurm_cluster, service, "tfx-lr-")
    assert sorted(j["JobName"] for j in jobs) == sorted(f"tfx-lr-{i}-a1" for i in range(1, 9)), \
        [(j["JobId"], j["JobName"]) for j in jobs]
    timeline = sorted((j["StartTime"], j["EndTime"], j["JobName"]) for j in jobs)
    assert most_at_once(jobs) <= 2, f"more than 2 of the sweep's jobs ran at once: {timeline}"
    assert most_at_once(jobs) == 2, f"the sweep never ran two trials at once: {timeline}"

    # At least one trial stopped early, in Slurm too, with its value against the cut.
    stopped = [t for t in trials if t["end_reason"] == "stopped_early"]
    assert stopped, [(t["index"], t["end_reason"], t["objective"]) for t in trials]
    for t in stopped:
        exp = service.experiment(t["experiment_id"])
        assert exp["attempts"][0]["state"] == "ended", exp["attempts"][0]
        assert exp["attempts"][0]["slurm_job_id"] not in squeue_ids(slurm_cluster)
        events = [e for e in exp["events"] if e["what"] == "stopped_early"]
        assert events and "cut" in events[0]["why"], exp["events"]
        assert "worse than rung" in t["note"], t["note"]

    # Each trial's objective is what its program wrote: the last loss of one
    # that ran to the end, the loss at its last rung of one stopped there.
    written = {t["experiment_id"]: scalars_written(service, t["experiment_id"]) for t in trials}
    for t in trials:
        points = written[t["experiment_id"]]
        assert (t["objective_step"], t["objective"]) in points, (t, points)
        if t["end_reason"] == "succeeded":
            assert (t["objective_step"], t["objective"]) == points[-1], (t, points)
    # The best trial: the lowest final loss its program wrote, among those
    # that ran to the end.
    best = done["best_trial"]
    assert best is not None, done
    finished = [t["experiment_id"] for t in trials if t["end_reason"] == "succeeded"]
    assert finished, trials
    lowest = min(finished, key=lambda i: written[i][-1][1])
    assert (best["experiment_id"], best["objective"]) == (lowest, written[lowest][-1][1]), (best, written)
    assert best["experiment_id"] in done["reason"], done["reason"]

    # /metrics counts the trials by end reason.
    status, text = service.request("GET", "/metrics", raw=True)
    assert status == 200
    assert f'tfslurm_sweep_trials_ended{{end_reason="stopped_early"}} {len(stopped)}' in text, text


def test_a_bad_sweep_is_refused_naming_the_field_and_nothing_is_stored(service):
    bad = sweep_spec("bad")
    bad["max_concurrent"] = 0
    bad["parameters"]["env.LR"] = {"range": [1, 0.5], "count": 2}
    status, body = service.post("/sweeps", bad)
    assert status == 400, body
    fields = {f["field"]: f["reason"] for f in body["error"]["fields"]}
    assert "got 0" in fields["max_concurrent"], fields
    assert "low < high" in fields["parameters.env.LR.range"], fields

    # A trial the cluster cannot run: refused before anything is stored.
    too_big = sweep_spec("big")
    too_big["parameters"]["resources.cpus_per_task"] = {"values": [1, 64]}
    status, body = service.post("/sweeps", too_big)
    assert status == 400, body
    assert any(f["field"].startswith("experiment.resources") for f in body["error"]["fields"]), body

    status, listed = service.get("/sweeps")
    assert status == 200 and listed["sweeps"] == [], listed
    status, experiments = service.get("/experiments")
    assert status == 200 and experiments["experiments"] == [], experiments
    assert service.get("/sweeps/bad")[0] == 404


def test_a_stopped_trial_is_stopped_through_its_agents_and_shows_where(service, slurm_cluster):
    """Issue 48: the rule's stop reaches the trial's agents at once (a
    Shutdown, as a decided attempt's), not only through Slurm's cancel, and
    the sweep shows both the rung it was judged at and the step it stopped
    at. How fast, against Slurm's cancel alone: bench/sweep_stop.sh."""
    spec = sweep_spec("halt", trials=2)
    # Far more steps than either trial runs: trial 1 is cancelled once it has
    # passed the rung, trial 2 can only end by being stopped.
    spec["experiment"]["command"] = ["python3", TRAIN, "--steps=1000000", "--log-every=1",
                                     "--checkpoint-every=1000000", "--step-sleep=0.05"]
    spec["parameters"] = {"arg.--lr": {"values": [0.2, 0.0001]}}
    spec["search"] = {"type": "grid", "order": "listed"}
    spec["max_concurrent"] = 1
    spec["early_stopping"] = {"rule": "asha", "rungs": [10], "reduction_factor": 2}
    status, body = service.post("/sweeps", spec)
    assert status == 201, body
    wait_for(lambda: any(t["index"] == 1 and t["rungs_passed"] == 1 for t in get_sweep(service, "halt")["trials"]),
             120, "trial 1 to pass the rung")
    status, body = service.request("DELETE", "/experiments/halt-1")
    assert status == 200, body
    done = wait_for(lambda: (lambda s: s if s["state"] != "running" else None)(get_sweep(service, "halt")),
                    150, "the sweep to complete", interval=0.5)
    trial = next(t for t in done["trials"] if t["index"] == 2)
    assert trial["end_reason"] == "stopped_early", trial

    # Each stop, the user's cancel of trial 1 and the rule's of trial 2, is a
    # Shutdown to every agent in the same decision.
    for exp_id in ("halt-1", "halt-2"):
        exp = service.experiment(exp_id)
        events = [(e["what"], e["why"]) for e in exp["events"]]
        cancelled = next(i for i, (what, why) in enumerate(events) if what == "state" and "-> cancelled" in why)
        reaping = next((why for what, why in events[cancelled:] if what == "reaping"), "")
        assert reaping.startswith("Shutdown sent to ") and "ps:0" in reaping and "worker:0" in reaping, events
        assert sorted(t["state"] for t in exp["tasks"]) == ["reaped", "reaped"], exp["tasks"]

    # Judged at the rung; stopped a little later, at the step its program
    # last reported (not at the end of its million steps).
    assert 10 <= trial["objective_step"] <= trial["last_step"] < 1000, trial
    status, metrics = service.get("/experiments/halt-2/metrics?tag=loss")
    assert status == 200, metrics
    assert trial["last_step"] == max(metrics["series"][0]["step"]), (trial, metrics["series"][0]["step"][-5:])


def test_a_misspelled_objective_is_named_and_stops_the_sweep(service, slurm_cluster):
    """Issue 48: objective.tag `heldout_loss` where linear_ps reports
    `held_out_loss`. While trial 1 runs the sweep's reason warns, naming the
    tags it reports and the nearest; once it has succeeded without the tag,
    the sweep stops: every trial would run to its end unjudged."""
    spec = sweep_spec("typo", trials=3)
    spec["max_concurrent"] = 1
    spec["search"] = {"type": "grid", "order": "listed"}
    spec["objective"] = {"tag": "heldout_loss", "goal": "min"}
    status, body = service.post("/sweeps", spec)
    assert status == 201, body
    warned = wait_for(lambda: (lambda s: s if "warning:" in s["reason"] or s["state"] != "running" else None)(
        get_sweep(service, "typo")), 120, "the sweep to warn", interval=0.5)
    if warned["state"] == "running":
        assert "did you mean 'held_out_loss'?" in warned["reason"], warned["reason"]
    done = wait_for(lambda: (lambda s: s if s["state"] != "running" else None)(get_sweep(service, "typo")),
                    120, "the sweep to stop", interval=0.5)
    assert done["state"] == "cancelled", done
    assert done["reason"].startswith("stopped: trial typo-1 reported "), done["reason"]
    assert "held_out_loss" in done["reason"] and "but not heldout_loss, the sweep's objective (did you mean " \
        "'held_out_loss'?)" in done["reason"], done["reason"]
    assert [t["index"] for t in done["trials"]] == [1], "no more trials start"
