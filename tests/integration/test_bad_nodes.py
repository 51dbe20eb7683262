"""Issue 18, part 4: bad-node memory on the real local Slurm cluster. A node
fails under a running attempt (its slurmd and processes killed and the node
set DOWN, conftest.fail_node); Slurm ends the job NODE_FAIL; the next
attempt is submitted with that node excluded, and the event names it."""
from conftest import fail_node, restore_node, scontrol_job, wait_for

SLEEPERS = {"command": ["sleep", "600"], "cluster": {"worker": 2},
            "resources": {"partition": "debug", "nodes": 2, "tasks_per_node": 1, "time_limit": "00:05:00"},
            "checkpoint": {"signal_grace_s": 10},
            "restart": {"max_restarts": 1, "on": ["node_fail"], "backoff_s": 1}}


def test_a_node_failure_excludes_that_node_from_the_next_attempt(service, slurm_cluster):
    status, body = service.post("/experiments", dict(SLEEPERS, id="badnode"))
    assert status == 201, body
    e = service.wait_state("badnode", "running", timeout=120)
    failed_node = e["tasks"][1]["node"]
    other_node = e["tasks"][0]["node"]
    try:
        fail_node(slurm_cluster, failed_node)
        e = wait_for(lambda: (lambda x: x if len(x["attempts"]) == 2 and x["attempts"][1]["slurm_job_id"] else None)(
            service.experiment("badnode")), 120, "attempt 2 to be submitted")
        first, second = e["attempts"]
        assert first["end_reason"] == "node_fail", first
        assert e["excluded_nodes"] == [failed_node], e["excluded_nodes"]
        whys = [ev["why"] for ev in e["events"] if ev["what"] == "exclude"]
        assert whys == [f"excluding {failed_node} from the next attempts (its attempt 1 ended NODE_FAIL); "
                        "a resume clears the list"], whys
        job = scontrol_job(slurm_cluster, second["slurm_job_id"])
        assert job.get("ExcNodeList") == failed_node, job
        # No spare node: Slurm ended the job NODE_FAIL, so not in place.
        assert not second["in_place"], second
        assert any(ev["what"] == "restart" and ev["why"] == "in a new Slurm job, not in place: Slurm job "
                   f"{first['slurm_job_id']} has ended (NODE_FAIL)" for ev in e["events"]), e["events"]
        status, script = service.request("GET", "/experiments/badnode/sbatch?attempt=2", raw=True)
        assert status == 200 and f"\n#SBATCH --exclude={failed_node}\n" in script, script
        status, script1 = service.request("GET", "/experiments/badnode/sbatch?attempt=1", raw=True)
        assert "--exclude" not in script1, script1
        # Attempt 2 runs without it: on the two nodes left.
        e = service.wait_state("badnode", "running", timeout=120)
        nodes = sorted(t["node"] for t in e["tasks"])
        assert failed_node not in nodes and other_node in nodes, nodes
    finally:
        service.request("DELETE", "/experiments/badnode")
        restore_node(slurm_cluster, failed_node)
