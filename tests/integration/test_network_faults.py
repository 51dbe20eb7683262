"""Issue 43, point 4: the network faults a real cluster has, on the local
cluster with its hosts apart (deploy/local-slurm/start.sh --hosts-apart),
with real PyTorch DDP (examples/ddp) across the nodes. What must happen is
written in docs/restarts.md, "Network faults"; the faults are nftables rules
in one host's network namespace (helpers/netfault.py), packets dropped
silently both ways.

The tests run on the service host (conftest): while the service host is cut
off, so are they, and they ask Slurm nothing then.
"""
import os
import re
import subprocess
import time

import pytest

from conftest import BIN, scontrol_job, slurm_env, wait_for
from helpers import hosts, netfault
from test_pytorch import ddp_spec, digests, rank_pid
from test_tensorflow import task_log, wait_ended
from unix_users import admin_token

pytestmark = pytest.mark.usefixtures("hosts_apart")


@pytest.fixture
def hosts_apart(slurm_cluster):
    if not hosts.apart(slurm_cluster):
        pytest.skip("TFSLURM_LOOPBACK=1: the cluster's hosts share one network")
    yield
    for host in ("svc", "node1", "node2", "node3"):
        netfault.heal(slurm_cluster, host)


def agents_of(job_id, node):
    """The pids of the tfslurm-agent processes of Slurm job `job_id` on `node`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = set(open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace").split("\0"))
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            continue
        if exe == "tfslurm-agent" and {f"SLURM_JOB_ID={job_id}", f"SLURMD_NODENAME={node}"} <= env:
            found.append(int(pid))
    return found


def alive(pid):
    try:
        return open(f"/proc/{pid}/stat").read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def last_step(exp, proc, attempt=1):
    steps = re.findall(r"ddp: step=(\d+)", task_log(exp, proc, attempt))
    return int(steps[-1]) if steps else -1


def test_a_node_cut_off_from_the_service_only_briefly_then_past_the_window(service, slurm_cluster):
    """Shorter than the reconnect window (12 s here: heartbeats every 1 s,
    --reconnect-window-s 12): nothing restarts. Longer: node2's rank is gone,
    the attempt restarts in place with the spare node3 in node2's place, and
    node2 leaves the Slurm job, so that its slurmd ends the old programs
    there while the link is still down; when it comes back, nothing of the
    old attempt trains on."""
    spec = ddp_spec("cut-svc", ["--steps", "1500", "--checkpoint-every", "50", "--step-delay-ms", "25"],
                    nodes=2, tasks_per_node=1, restart={"max_restarts": 1})
    spec["resources"]["spare_nodes"] = 1
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    e = wait_for(lambda: (lambda x: x if x["checkpoint"] and x["checkpoint"]["step"] >= 50 else None)(
        service.experiment("cut-svc")), 240, "rank 0's first checkpoint")
    assert {t["index"]: t["node"] for t in e["tasks"]} == {0: "node1", 1: "node2"}, e["tasks"]
    job = e["attempts"][0]["slurm_job_id"]
    before = (rank_pid("cut-svc", 0, attempt=1), rank_pid("cut-svc", 1, attempt=1))
    assert all(before), before

    # Shorter than the window.
    with netfault.cut(slurm_cluster, "node2", ["svc"]):
        time.sleep(6)
    wait_for(lambda: all(t["state"] == "running" for t in service.experiment("cut-svc")["tasks"]), 30,
             "node2's rank to be heard again")
    e = service.experiment("cut-svc")
    assert len(e["attempts"]) == 1 and e["state"] == "running", e["reason"]
    assert all(alive(p) for p in before), "the programs trained on"

    # Longer: until the attempt has restarted on the spare.
    netfault.cut_start(slurm_cluster, "node2", ["svc"])
    cut_at = time.time()
    try:
        e = wait_for(lambda: (lambda x: x if len(x["attempts"]) == 2 and x["state"] == "running" else None)(
            service.experiment("cut-svc")), 120, "attempt 2 to run in place")
        restarted_after = time.time() - cut_at
        one, two = e["attempts"]
        assert one["end_reason"] == "node_fail" and two["in_place"], e["attempts"]
        assert {t["index"]: t["node"] for t in e["tasks"]} == {0: "node1", 1: "node3"}, e["tasks"]
        whys = [ev["why"] for ev in e["events"] if ev["what"] == "restart"]
        assert any("node3 (a spare) takes node2's place; node2 taken out of Slurm job" in w for w in whys), whys
        gone = [ev["why"] for ev in e["events"] if ev["what"] == "lost"]
        assert any("rank 1 (on node2) is gone: its node stopped answering" in w for w in gone), gone
        # Slurm took node2 out of the job and its slurmd ended what ran
        # there: the old program and its agent, while node2 is still cut off.
        wait_for(lambda: scontrol_job(slurm_cluster, job).get("NodeList") == "node[1,3]", 30,
                 "node2 to leave the Slurm job")
        wait_for(lambda: not alive(before[1]) and not agents_of(job, "node2"), 30,
                 "node2's old program and agent to be ended by its slurmd")
    finally:
        netfault.heal(slurm_cluster, "node2")
    time.sleep(3)  # the link is back: nothing of attempt 1 may come back to life
    assert rank_pid("cut-svc", 1, attempt=1) is None and not agents_of(job, "node2")
    done = wait_ended(service, "cut-svc", 300)
    assert done["state"] == "succeeded" and len(done["attempts"]) == 2, done["reason"]
    found = digests(done["model_dir"])
    assert len(found) == 2 and len(set(found.values())) == 1, found
    print(f"cut-svc: node2 cut off from the service; attempt 2 ran in place {restarted_after:.1f} s later")


def test_a_node_cut_off_from_everything_goes_slurms_node_fail_way(service_factory, slurm_cluster):
    """node2 reaches nobody, past Slurm's SlurmdTimeout (30 s on this
    cluster) and within tfslurmd's reconnect window (90 s here): slurmctld
    marks node2 DOWN and ends the job NODE_FAIL, and the next attempt is a
    new job without node2. When node2 is back its slurmd registers, and
    slurmctld has it end the old job's processes, which no one could reach."""
    service = service_factory(["--reconnect-window-s", "90"])
    spec = ddp_spec("cut-all", ["--steps", "1200", "--checkpoint-every", "50", "--step-delay-ms", "25"],
                    nodes=2, tasks_per_node=1, restart={"max_restarts": 1, "backoff_s": 1})
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    e = wait_for(lambda: (lambda x: x if x["checkpoint"] and x["checkpoint"]["step"] >= 50 else None)(
        service.experiment("cut-all")), 240, "rank 0's first checkpoint")
    node = next(t["node"] for t in e["tasks"] if t["index"] == 1)
    old = rank_pid("cut-all", 1, attempt=1)
    assert old
    netfault.cut_start(slurm_cluster, node)
    cut_at = time.time()
    try:
        e = wait_for(lambda: (lambda x: x if len(x["attempts"]) == 2 else None)(service.experiment("cut-all")), 150,
                     "attempt 2 in a new job")
        one = e["attempts"][0]
        assert one["end_reason"] == "node_fail" and one["slurm_state"] == "NODE_FAIL", one
        assert not e["attempts"][1]["in_place"], e["attempts"]
        down_after = time.time() - cut_at
        state = subprocess.run(hosts.on_host(slurm_cluster, "login", ["sinfo", "-h", "-N", "-n", node, "-o", "%T"]),
                               env=slurm_env(slurm_cluster), stdout=subprocess.PIPE, text=True).stdout.split()
        assert state and state[0].startswith("down"), state
        e = wait_for(lambda: (lambda x: x if x["state"] == "running" else None)(service.experiment("cut-all")), 120,
                     "attempt 2 to run")
        assert node not in {t["node"] for t in e["tasks"]}, e["tasks"]
        assert alive(old), "cut off from slurmctld, nothing could end it"
    finally:
        netfault.heal(slurm_cluster, node)
    wait_for(lambda: not alive(old) and not agents_of(one["slurm_job_id"], node), 90,
             f"{node}'s slurmd, registered again, to end the old job's processes")
    done = wait_ended(service, "cut-all", 300)
    assert done["state"] == "succeeded", done["reason"]
    print(f"cut-all: {node} cut off; Slurm's NODE_FAIL and the next attempt {down_after:.1f} s later")


def test_the_service_host_unreachable_for_60_s_training_goes_on(service_factory, slurm_cluster):
    """Every agent falls silent at once, and slurmctld does not answer
    tfslurmd: the service takes the silence for its own, counts nobody lost,
    and the agents come back by themselves. tfctl on the login host says it
    cannot reach tfslurmd meanwhile, and works again after."""
    service = service_factory(auth=True)
    service.token = admin_token(service)
    tfctl = hosts.on_host(slurm_cluster, "login", [os.path.join(BIN, "tfctl"), "status", "cut-svc-host"])
    env = dict(os.environ, TFSLURM_URL=service.cluster_url, TFSLURM_TOKEN=service.token)
    spec = ddp_spec("cut-svc-host", ["--steps", "4000", "--checkpoint-every", "200", "--step-delay-ms", "25"],
                    nodes=2, tasks_per_node=1, restart={"max_restarts": 0})
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    e = wait_for(lambda: (lambda x: x if x["state"] == "running" and last_step(x, 0) >= 20 else None)(
        service.experiment("cut-svc-host")), 240, "training")
    pids = (rank_pid("cut-svc-host", 0), rank_pid("cut-svc-host", 1))
    assert subprocess.run(tfctl, env=env, stdout=subprocess.PIPE, text=True).returncode == 0
    step_at_cut = last_step(e, 0)
    netfault.cut_start(slurm_cluster, "svc")
    try:
        time.sleep(5)
        r = subprocess.run(tfctl, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=120)
        assert r.returncode != 0 and "cannot reach tfslurmd" in r.stderr, (r.returncode, r.stderr)
        time.sleep(max(0, 60 - 5))
        step_at_heal = last_step(e, 0)
    finally:
        netfault.heal(slurm_cluster, "svc")
    assert step_at_heal > step_at_cut + 100, f"training went on: step {step_at_cut} -> {step_at_heal}"
    wait_for(lambda: subprocess.run(tfctl, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    timeout=120).returncode == 0, 60, "tfctl on the login host to reach tfslurmd")
    # The agents are heard again: heartbeats and checkpoints, on the same programs.
    e = wait_for(lambda: (lambda x: x if x["checkpoint"] and x["checkpoint"]["step"] > step_at_heal else None)(
        service.experiment("cut-svc-host")), 150, "a checkpoint reported after the outage")
    assert all(alive(p) for p in pids) or e["state"] == "succeeded"
    done = wait_ended(service, "cut-svc-host", 300)
    assert done["state"] == "succeeded" and len(done["attempts"]) == 1, done["reason"]
    assert not [ev for ev in done["events"] if ev["what"] in ("lost", "restart")], done["events"]
    found = digests(done["model_dir"])
    assert len(found) == 2 and len(set(found.values())) == 1, found


def test_a_lossy_slow_link_still_rendezvous_and_heartbeats(service, slurm_cluster):
    """5% of node2's packets lost and the rest 100 ms late (as tc netem
    would): the rendezvous and the heartbeats work, nothing is lost."""
    with netfault.slow_link(slurm_cluster, "node2", delay_ms=100, loss_percent=5):
        spec = ddp_spec("lossy", ["--steps", "60", "--checkpoint-every", "20", "--step-delay-ms", "20"],
                        nodes=3, tasks_per_node=1)
        status, body = service.post("/experiments", spec)
        assert status == 201, body
        done = wait_ended(service, "lossy", 300)
    assert done["state"] == "succeeded" and len(done["attempts"]) == 1, done["reason"]
    assert "node2" in {t["node"] for t in done["tasks"]}
    assert not [ev for ev in done["events"] if ev["what"] == "lost"], done["events"]
