"""Issue 33: sweeps on the real local cluster with a real workload
(examples/linear_ps): trials run at most max_concurrent at once in Slurm,
ASHA stops the worse ones in Slurm, the best trial is reported, and a
tfslurmd killed -9 mid-sweep carries on with no trial lost or repeated. A
bad sweep is refused whole, naming the field, and leaves nothing behind."""
import os
import signal
import subprocess
import threading

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


class SlurmWatcher(threading.Thread):
    """Polls squeue for the sweep's jobs: the most in Slurm at once, and
    every job id seen under each job name."""

    def __init__(self, conf, prefix):
        super().__init__(daemon=True)
        self.conf, self.prefix = conf, prefix
        self.most = 0
        self.ids_by_name = {}
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            out = subprocess.run(["squeue", "-h", "-o", "%i %j"], env=slurm_env(self.conf),
                                 stdout=subprocess.PIPE, text=True).stdout
            jobs = [line.split(None, 1) for line in out.splitlines() if line.strip()]
            mine = [(int(i), n) for i, n in jobs if n.startswith(self.prefix)]
            self.most = max(self.most, len(mine))
            for job_id, name in mine:
                self.ids_by_name.setdefault(name, set()).add(job_id)
            self.done.wait(0.2)


def get_sweep(service, sweep_id):
    status, body = service.get(f"/sweeps/{sweep_id}")
    assert status == 200, body
    return body


def test_sweep_runs_two_at_a_time_stops_early_and_survives_kill_9(service, slurm_cluster):
    watcher = SlurmWatcher(slurm_cluster, "tfx-lr-")
    watcher.start()
    try:
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
    finally:
        watcher.done.set()
        watcher.join()

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
    repeated = {name: ids for name, ids in watcher.ids_by_name.items() if len(ids) > 1}
    assert not repeated, f"a trial was submitted twice: {repeated}"
    assert watcher.most <= 2, f"{watcher.most} of the sweep's jobs were in Slurm at once"
    assert watcher.most == 2, "the sweep never ran two trials at once"

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

    # The best trial: the best loss among those that ran to the end.
    best = done["best_trial"]
    assert best is not None, done
    finished = [t for t in trials if t["end_reason"] == "succeeded" and t["objective"] is not None]
    assert finished, trials
    assert best["objective"] == min(t["objective"] for t in finished)
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
