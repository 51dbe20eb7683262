"""Issue 17: one tfslurmd per database and per port, and agents that reached
another tfslurmd than their job's."""
import os
import re
import signal
import subprocess
import tempfile

from conftest import BIN, slurm_env, wait_for
from helpers import hosts


def start_second(slurm_conf, workdir, db, listen="127.0.0.1:0", agent_listen="127.0.0.1:0"):
    """Runs another tfslurmd to its exit (it must refuse to start); (rc, output)."""
    out = subprocess.run(
        [os.path.join(BIN, "tfslurmd"), "--no-auth", "--listen", listen, "--agent-listen", agent_listen,
         "--db", db, "--output-root", os.path.join(workdir, "out2")] + (["--allow-root"] if os.geteuid() == 0 else []),
        env=slurm_env(slurm_conf), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    return out.returncode, out.stdout


def listening_pids(port):
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], stdout=subprocess.PIPE, text=True, check=True)
    return [int(p) for p in re.findall(r"pid=(\d+)", out.stdout)]


def test_a_second_tfslurmd_on_the_same_database_is_refused_naming_the_holder(service, slurm_cluster):
    rc, output = start_second(slurm_cluster, service.workdir, service.db)
    # 3, refused: the packaged unit does not restart it into the same refusal.
    assert rc == 3, output
    assert f"database {service.db} is owned by another tfslurmd (pid {service.proc.pid} on host " in output, output
    assert "Stop that one first" in output
    # It stopped before touching anything: no port of its own, the first one
    # still answers.
    assert service.get("/healthz")[0] == 200
    assert not os.path.exists(os.path.join(service.workdir, "out2"))


def test_a_second_tfslurmd_on_the_same_agent_or_rest_port_is_refused(service, slurm_cluster):
    other = tempfile.mkdtemp(prefix="tfsd-", dir="/tmp")
    agent_port = service.agent_port
    http_port = int(service.url.rsplit(":", 1)[1])

    rc, output = start_second(slurm_cluster, other, os.path.join(other, "a.db"),
                              agent_listen=f"127.0.0.1:{agent_port}")
    assert rc == 1, output
    assert f"cannot listen for agents on 127.0.0.1:{agent_port}" in output, output

    rc, output = start_second(slurm_cluster, other, os.path.join(other, "b.db"), listen=f"127.0.0.1:{http_port}")
    assert rc == 1, output
    assert f"cannot listen on 127.0.0.1:{http_port}: Address already in use" in output, output

    # Neither port is shared: the first daemon is their only listener.
    assert listening_pids(agent_port) == [service.proc.pid]
    assert listening_pids(http_port) == [service.proc.pid]
    subprocess.run(["rm", "-rf", other], check=False)


def test_agents_that_reached_another_tfslurmd_retry_until_their_own_answers(service_factory, slurm_cluster, request):
    # The job's tfslurmd (A) tells its agents to come to 127.0.0.2:P. Another
    # tfslurmd (B, its own database) listens there; A listens on 127.0.0.1:P.
    # With the hosts apart, the same on the service host's cluster address
    # and a second one it is given on the same link.
    first, second = "127.0.0.1", "127.0.0.2"
    if hosts.apart(slurm_cluster):
        first = hosts.address(slurm_cluster, "svc")
        second, remove = hosts.extra_address(slurm_cluster, "svc", 5)
        request.addfinalizer(remove)
    own = service_factory(extra_args=["--advertise", second], agent_host=first)
    status, body = own.post("/experiments", {
        "id": "owner-rdv", "command": ["/bin/sh", "-c", "echo trained by $TFSLURM_ROLE $TFSLURM_INDEX"],
        "cluster": {"worker": 2}, "resources": {"partition": "debug", "nodes": 1, "tasks_per_node": 2},
        "restart": {"max_restarts": 0}})
    assert status == 201, body
    other_dir = tempfile.mkdtemp(prefix="tfsd-", dir="/tmp")
    with open(os.path.join(other_dir, "agent_port"), "w") as f:
        f.write(str(own.agent_port))
    other = service_factory(workdir=other_dir, agent_host=second)

    exp = own.experiment("owner-rdv")
    logs = [os.path.join(exp["model_dir"], "logs", "attempt-1", f"task-{i}.out") for i in range(2)]

    def both_told():
        return all(os.path.exists(p) and "may be another tfslurmd than the one that started this job"
                   in open(p, errors="replace").read() for p in logs)

    wait_for(both_told, 60, "both agents to be told by the other tfslurmd that it does not know the experiment")
    assert own.experiment("owner-rdv")["state"] in ("queued", "starting"), own.experiment("owner-rdv")

    # The job's own tfslurmd takes the address its agents use; the other goes.
    other.stop()
    own.stop()
    again = service_factory(workdir=own.workdir, agent_host=second, extra_args=["--advertise", second])
    done = again.wait_state("owner-rdv", ("succeeded", "failed"), timeout=120)
    assert done["state"] == "succeeded", done["reason"]
    for p in logs:
        text = open(p, errors="replace").read()
        assert re.search(r"trained by worker [01]", text), text
        assert "refused this task" not in text, text
