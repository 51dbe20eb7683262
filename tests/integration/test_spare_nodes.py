"""Issue 29, point 2: spare nodes on the real local Slurm cluster, with real
PyTorch DDP (examples/ddp).

A job of two ranks on two nodes and resources.spare_nodes 1 holds three
nodes; node3's agent waits with no program. node2 then fails as a node does
(conftest.fail_node: its slurmd, slurmstepd, agent and program killed -9, the
node set DOWN). The job was submitted --no-kill and its step runs with srun
--no-kill, so Slurm takes node2 out of the job and the job runs on
(excise_node_from_job in src/slurmctld/job_mgr.c; without SSF_NO_KILL,
kill_step_on_node would SIGKILL the whole step). The attempt ends node_fail,
and the next starts in the same Slurm job with node3 in node2's place,
resumes from rank 0's checkpoint. node2 is then mended, but it has left the
job, so a second failure (node3's) finds no spare: the attempt ends
node_fail and the next is a new Slurm job of three nodes again. Every rank
ends with the same parameters.
"""
import os
import re
import time

from conftest import fail_node, restore_node, scontrol_job, wait_for
from test_pytorch import ddp_spec, digests, rank_pid
from test_tensorflow import task_log, wait_ended


# The time from a node's kill to attempt 2 running in place with the spare:
# issue 29's target is 15 s to the resumed first step, and this comes
# before it. It is the service's poll (2 s), its wait for the agents left,
# and a rendezvous: a few seconds on a loaded machine (bench/in_place.sh
# measures the first step: 1.43 s median on an idle one).
IN_PLACE_BOUND_S = 15


def attempt_running(service, exp_id, number):
    def running():
        x = service.experiment(exp_id)
        return x if len(x["attempts"]) == number and x["state"] == "running" else None
    return running


def test_a_spare_node_takes_a_failed_nodes_place_then_a_second_failure_falls_back_to_a_new_job(
        service, slurm_cluster):
    steps = 600
    spec = ddp_spec("spare", ["--steps", str(steps), "--checkpoint-every", "50", "--step-delay-ms", "25"],
                    nodes=2, tasks_per_node=1, restart={"max_restarts": 2, "backoff_s": 1})
    spec["resources"]["spare_nodes"] = 1
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    status, script = service.request("GET", "/experiments/spare/sbatch?attempt=1", raw=True)
    assert "#SBATCH --nodes=3\n" in script and "#SBATCH --no-kill\n" in script, script
    assert "srun --kill-on-bad-exit=0 --no-kill " in script, script

    e = wait_for(lambda: (lambda x: x if x["checkpoint"] and x["checkpoint"]["step"] >= 50 else None)(
        service.experiment("spare")), 240, "rank 0's first checkpoint")
    first = e["attempts"][0]
    assert sorted(t["node"] for t in e["tasks"]) == ["node1", "node2"], e["tasks"]
    assert [s["node"] for s in e["spares"]] == ["node3"] and e["spares"][0]["waiting"], e["spares"]
    assert rank_pid("spare", 1, attempt=1)

    failed = []
    try:
        # The first failure: node3, the spare, takes node2's place in the job.
        failed.append("node2")
        failed_at = fail_node(slurm_cluster, "node2")
        e = wait_for(attempt_running(service, "spare", 2), 120, "attempt 2 to run in place")
        running_in = time.time() - failed_at
        print(f"spare: node2 killed; attempt 2 ran in place on node1 and node3 {running_in:.1f} s later")
        assert running_in <= IN_PLACE_BOUND_S, f"attempt 2 ran in place {running_in:.1f} s after node2's failure"
        job = scontrol_job(slurm_cluster, first["slurm_job_id"])
        assert job.get("JobState") == "RUNNING" and job.get("NodeList") == "node[1,3]", job
        one, two = e["attempts"]
        # Rank 0 may fail first (gloo's connection to rank 1 breaks); the
        # node's loss is the attempt's class either way.
        assert one["end_reason"] == "node_fail", one
        assert two["in_place"] and two["slurm_job_id"] == one["slurm_job_id"], e["attempts"]
        ranks = {t["index"]: t["node"] for t in e["tasks"]}
        assert ranks == {0: "node1", 1: "node3"}, e["tasks"]
        assert e["spares"] == [], e["spares"]
        whys = [ev["why"] for ev in e["events"] if ev["what"] == "restart"]
        assert any("node3 (a spare) takes node2's place" in w for w in whys), whys
        gone = [ev["why"] for ev in e["events"] if ev["what"] == "lost"]
        assert any(w.startswith("rank 1 (on node2) is gone: its node left Slurm job") for w in gone), gone

        # node2 is mended, but it has left the job: the job has no spare now.
        # The second failure, node3's, falls back to a new job.
        restore_node(slurm_cluster, "node2")
        failed.remove("node2")
        wait_for(lambda: (lambda x: x if x["checkpoint"]["step"] > two["start_step"] else None)(
            service.experiment("spare")), 120, "a checkpoint of attempt 2")
        failed.append("node3")
        fail_node(slurm_cluster, "node3")
        try:
            e = wait_for(lambda: (lambda x: x if len(x["attempts"]) == 3 and x["attempts"][2]["slurm_job_id"] else None)(
                service.experiment("spare")), 120, "attempt 3 with a Slurm job of its own")
        except AssertionError as timed_out:
            x = service.experiment("spare")
            raise AssertionError(f"{timed_out}\nstate {x['state']}: {x['reason']}\nattempts: {x['attempts']}\n"
                                 + "\n".join(f"{ev['what']}: {ev['why']}" for ev in x["events"][-12:])) from None
        two, three = e["attempts"][1:]
        assert two["end_reason"] == "node_fail", two
        assert not three["in_place"] and three["slurm_job_id"] != first["slurm_job_id"], e["attempts"]
        assert three["job_name"] == "tfx-spare-a3", three
        # The new job holds three nodes again (two and the spare): node3 is
        # mended so that it can start.
        restore_node(slurm_cluster, "node3")
        failed.remove("node3")
        e = wait_for(attempt_running(service, "spare", 3), 180, "attempt 3 to run in its new job")
        assert scontrol_job(slurm_cluster, three["slurm_job_id"]).get("NodeList") == "node[1-3]", \
            scontrol_job(slurm_cluster, three["slurm_job_id"])
        assert len(e["spares"]) == 1 and not ({s["node"] for s in e["spares"]} & {t["node"] for t in e["tasks"]}), e

        done = wait_ended(service, "spare", 360)
        assert done["state"] == "succeeded", done["reason"]
        assert len(done["attempts"]) == 3, done["attempts"]
        # In attempt 2 the spare's agent ran rank 1 under its own
        # SLURM_PROCID, 2: its output is task-2.out, as the logs API finds it.
        assert "ddp: rank=1 " in task_log(done, 2, attempt=2), task_log(done, 2, attempt=2)[-2000:]
        status, spare_log = service.request("GET", "/experiments/spare/logs?attempt=2&task=rank:1", raw=True)
        assert status == 200 and spare_log == task_log(done, 2, attempt=2), spare_log[-500:]
        # Each attempt resumed from rank 0's checkpoint, and every rank ends
        # with the same parameters.
        for n in (2, 3):
            log = task_log(done, 0, attempt=n)
            restored = re.search(r"ddp: restored step=(\d+)", log)
            assert restored and int(restored.group(1)) >= 50, log[-2000:]
            assert int(restored.group(1)) == done["attempts"][n - 1]["start_step"], done["attempts"][n - 1]
        found = digests(done["model_dir"])
        assert len(found) == 2 and len(set(found.values())) == 1, found
        assert next(iter(found.values()))[0] == str(steps)
    finally:
        service.request("DELETE", "/experiments/spare")
        for node in failed:
            restore_node(slurm_cluster, node)
