"""Issue 3: every task learns its role, index and cluster spec from the
service; when training is done the parameter servers are reaped and the
Slurm job completes."""
import json
import os
import re
import signal
import tempfile

from conftest import REPO, agent_hanging_task, scontrol_job, squeue_ids, wait_for
from unix_users import admin_token

TRAIN = os.path.join(REPO, "examples/linear_ps/train.py")


def linear_ps_spec(exp_id, steps=150, placement="spread", extra_args=()):
    return {
        "id": exp_id,
        "command": ["python3", TRAIN, "--steps", str(steps), "--checkpoint-every", "50",
                    "--step-sleep", "0.01"] + list(extra_args),
        "workdir": os.path.join(REPO, "examples/linear_ps"),
        "cluster": {"ps": 2, "worker": 4},
        "placement": placement,
        "resources": {"partition": "debug", "nodes": 3, "tasks_per_node": 2, "time_limit": "00:10:00"},
        "restart": {"max_restarts": 0},
        "checkpoint": {"signal_grace_s": 30},
    }


def task_log(exp, proc, attempt=1):
    path = os.path.join(exp["model_dir"], "logs", f"attempt-{attempt}", f"task-{proc}.out")
    return open(path, errors="replace").read() if os.path.exists(path) else ""


def wait_job_final(conf, job_id):
    return wait_for(lambda: (lambda j: j if j.get("JobState") not in (None, "RUNNING", "PENDING", "COMPLETING") else None)(
        scontrol_job(conf, job_id)), 60, f"job {job_id} to end")


def test_linear_ps_spread_succeeds_reaps_ps_and_job_completes(service, slurm_cluster):
    status, body = service.post("/experiments", linear_ps_spec("rdv-spread"))
    assert status == 201, body
    done = service.wait_state("rdv-spread", ("succeeded", "failed"), timeout=180)
    assert done["state"] == "succeeded", done["reason"]
    # Success is decided first; the ps are reaped right after.
    done = wait_for(lambda: (lambda e: e if all(t["state"] != "running" for t in e["tasks"]) else None)(
        service.experiment("rdv-spread")), 30, "the ps to be reaped")

    # spread: the ps land on different nodes; roles by SLURM_PROCID.
    expected = ["ps:0", "worker:0", "ps:1", "worker:1", "worker:2", "worker:3"]
    assert [f'{t["role"]}:{t["index"]}' for t in done["tasks"]] == expected
    addresses = [t["address"] for t in done["tasks"]]
    assert len(set(addresses)) == 6 and all(re.fullmatch(r"[^:]+:\d+", a) for a in addresses), addresses
    for t in done["tasks"]:
        role, index = expected[t["proc_id"]].split(":")
        log = task_log(done, t["proc_id"])
        if role == "worker":
            assert f"linear_ps: role=worker index={index} attempt=1" in log, log[-2000:]
            assert t["state"] == "succeeded"
        else:
            assert t["state"] == "reaped", t
    # The workers reached ps at the addresses TF_CONFIG gave: training finished.
    assert "linear_ps: done step=" in task_log(done, 1)
    assert done["checkpoint"] is not None and done["checkpoint"]["step"] >= 100, done["checkpoint"]
    final = wait_job_final(slurm_cluster, done["slurm_job_id"])
    assert final["JobState"] == "COMPLETED", final


def alive(pid):
    """True while `pid` exists and is not a zombie."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def agent_pids(job_id, proc_id):
    """The pids of the tfslurm-agent processes of task `proc_id` of Slurm job `job_id`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = open(f"/proc/{pid}/comm").read().strip()
            env = set(open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace").split("\0"))
        except OSError:
            continue
        if comm == "tfslurm-agent" and {f"SLURM_JOB_ID={job_id}", f"SLURM_PROCID={proc_id}"} <= env:
            found.append(int(pid))
    return found


def test_an_agent_that_does_not_confirm_its_shutdown_has_its_step_ended_by_slurm(service, slurm_cluster):
    """The ps's agent is stopped (SIGSTOP), so it cannot confirm the Shutdown
    tfslurm sends when the worker succeeds: after the shutdown grace (3 s
    here) tfslurmd ends the job's step through Slurm (slurm_kill_job_step),
    which kills the stopped agent too, and the job leaves Slurm."""
    spec = {"id": "rdv-stopped", "cluster": {"ps": 1, "worker": 1},
            "command": ["/bin/sh", "-c", 'if [ "$TFSLURM_ROLE" = ps ]; then exec sleep 600; fi; '
                        'while [ ! -e "$MODEL_DIR/go" ]; do sleep 0.1; done'],
            "resources": {"partition": "debug", "nodes": 2, "tasks_per_node": 1, "time_limit": "00:10:00"},
            "restart": {"max_restarts": 0}}
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    running = wait_for(lambda: (lambda e: e if len(e["tasks"]) == 2 and all(
        t["state"] == "running" for t in e["tasks"]) else None)(service.experiment("rdv-stopped")),
        120, "both tasks to run")
    job = running["slurm_job_id"]
    ps_proc = next(t["proc_id"] for t in running["tasks"] if t["role"] == "ps")
    stopped = wait_for(lambda: agent_pids(job, ps_proc), 30, "the ps's agent process")
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    open(os.path.join(running["model_dir"], "go"), "w").close()

    done = service.wait_state("rdv-stopped", ("succeeded", "failed"), timeout=60)
    assert done["state"] == "succeeded", done["reason"]
    event = wait_for(lambda: next((e for e in service.experiment("rdv-stopped")["events"]
                                   if "did not confirm the Shutdown" in e["why"]), None),
                     30, "the step-ending event")
    assert f"ending step {job}.0 through Slurm" in event["why"], event
    assert "ps:0" in event["why"], event
    wait_for(lambda: not any(alive(pid) for pid in stopped), 30, "Slurm to kill the stopped agent")
    wait_job_final(slurm_cluster, job)


def test_explicit_placement_puts_ps_where_the_list_says(service, slurm_cluster):
    roles = ["worker", "worker", "worker", "ps", "worker", "ps"]
    status, body = service.post("/experiments", linear_ps_spec("rdv-explicit", steps=60, placement=roles))
    assert status == 201, body
    done = service.wait_state("rdv-explicit", ("succeeded", "failed"), timeout=180)
    assert done["state"] == "succeeded", done["reason"]
    ps = [t for t in done["tasks"] if t["role"] == "ps"]
    assert [(t["proc_id"], t["index"], t["node"]) for t in ps] == [(3, 0, "node2"), (5, 1, "node3")]


def test_worker_exiting_1_fails_attempt_reaps_everything_and_job_leaves(service, slurm_cluster):
    spec = linear_ps_spec("rdv-fail", steps=100000,
                          extra_args=["--fail-at-step", "30", "--fail-task", "worker:1", "--fail-code", "1"])
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    failed = service.wait_state("rdv-fail", "failed", timeout=180)
    assert "worker:1" in failed["reason"] and "exited with code 1" in failed["reason"], failed["reason"]
    wait_for(lambda: body["slurm_job_id"] not in squeue_ids(slurm_cluster), 60, "the failed job to leave Slurm")
    tasks = service.experiment("rdv-fail")["tasks"]
    assert [t["state"] for t in tasks if t["role"] == "ps"] == ["reaped", "reaped"], tasks
    assert all(t["state"] in ("failed", "reaped") for t in tasks), tasks


def test_task_that_never_registers_fails_the_barrier_naming_it(service_factory, slurm_cluster):
    service = service_factory(["--agent-path", agent_hanging_task(4), "--barrier-timeout-s", "8"])
    status, body = service.post("/experiments", linear_ps_spec("rdv-barrier"))
    assert status == 201, body
    failed = service.wait_state("rdv-barrier", "failed", timeout=120)
    assert "barrier timeout" in failed["reason"], failed["reason"]
    assert "worker:2 (task 4 on node3)" in failed["reason"], failed["reason"]
    assert "1 of 6 tasks" in failed["reason"], failed["reason"]
    wait_for(lambda: body["slurm_job_id"] not in squeue_ids(slurm_cluster), 60, "the job to be cancelled")


def agent_message(service, message, wait_s=60):
    return service.request("POST", f"/agent/v1/message?wait_s={wait_s}", message)


def test_wrong_secret_is_refused(service):
    status, body = service.post("/experiments", linear_ps_spec("rdv-secret", steps=100000))
    assert status == 201, body
    status, reply = agent_message(service, {"task": {"experiment_id": "rdv-secret", "attempt": 1,
                                                     "secret": "not-the-secret", "proc_id": 0},
                                            "register": {"node_name": "node1", "address": "x", "port": 1}})
    assert status == 200, reply
    assert reply["refused"]["permanent"] is True
    assert reply["refused"]["reason"] == "no experiment 'rdv-secret' with attempt 1 and this secret", reply
    status, reply = agent_message(service, {"task": {"experiment_id": "rdv-secret", "attempt": 1,
                                                     "secret": "nope", "proc_id": 0}, "heartbeat": {}})
    assert status == 404, reply
    service.request("DELETE", "/experiments/rdv-secret")


CURL_AGENT = r'''#!/bin/bash
# A stand-in for tfslurm-agent built from curl: registers over the JSON
# path, runs the assigned command with the assigned env, reports the exit.
# The attempt secret is in the file TFSLURM_SECRET_FILE names, as the real
# agent reads it.
set -euo pipefail
while [ $# -gt 0 ]; do
  case "$1" in --experiment) exp=$2; shift 2;; --attempt) attempt=$2; shift 2;; *) shift;; esac
done
url=@URL@
# Over TLS, the service is verified against the CA every job carries
# (TFSLURM_CA, PEM), as the real agent verifies it.
cacert=()
if [ -n "${TFSLURM_CA:-}" ] && [ "$TFSLURM_CA" != system ]; then
  ca_file=$(mktemp); printf '%s\n' "$TFSLURM_CA" > "$ca_file"; cacert=(--cacert "$ca_file")
fi
task=$(/usr/bin/python3 -c 'import json,os,sys; print(json.dumps({"experiment_id": sys.argv[1],
  "attempt": int(sys.argv[2]), "secret": open(os.environ["TFSLURM_SECRET_FILE"]).read(), "proc_id": int(os.environ["SLURM_PROCID"])}))' "$exp" "$attempt")
reply=""
until [ -n "$reply" ] && [ "$reply" != "{}" ]; do
  reply=$(curl -sS "${cacert[@]}" -X POST "$url/agent/v1/message?wait_s=30" -H 'Content-Type: application/json' \
    -d "{\"task\": $task, \"register\": {\"node_name\": \"$SLURMD_NODENAME\", \"address\": \"$(hostname)\", \"port\": $((30000 + SLURM_PROCID))}}")
done
echo "$reply" > "$TMPDIR_FOR_TEST/assignment-$SLURM_PROCID.json"
# Heartbeats while the program runs, as every agent sends them: a task
# silent past the reconnect window is gone (docs/restarts.md).
(while :; do sleep 1; curl -sS "${cacert[@]}" -X POST "$url/agent/v1/message" -H 'Content-Type: application/json' \
   -d "{\"task\": $task, \"heartbeat\": {}}" > /dev/null; done) &
beating=$!
set +e
/usr/bin/python3 -c 'import json,os,sys; a=json.load(open(sys.argv[1]))["assignment"];
env=dict(os.environ); env.update(a.get("env", {})); env["TF_CONFIG"]=a["tf_config"]; os.chdir(a["workdir"]); os.execvpe(a["command"][0], a["command"], env)' \
  "$TMPDIR_FOR_TEST/assignment-$SLURM_PROCID.json"
rc=$?
set -e
kill $beating
curl -sS "${cacert[@]}" -X POST "$url/agent/v1/message" -H 'Content-Type: application/json' \
  -d "{\"task\": $task, \"exited\": {\"exit_code\": $rc}}" > /dev/null
exit $rc
'''


def test_curl_json_registration_path_end_to_end(service_factory, slurm_cluster):
    d = tempfile.mkdtemp(prefix="tfs-curl-", dir="/tmp")
    os.chmod(d, 0o777)
    # The JSON route is on the REST port, which the tasks on the compute
    # nodes reach by the service host's cluster address when the hosts are
    # apart: a REST API off loopback has tokens (--no-auth is loopback only);
    # the agent route's credential is the attempt's secret, not a token.
    first = service_factory(auth=True)
    agent = os.path.join(d, "curl-agent")
    with open(agent, "w") as f:
        f.write(CURL_AGENT.replace("@URL@", first.cluster_url or first.url).replace("$TMPDIR_FOR_TEST", d))
    os.chmod(agent, 0o755)
    first.stop()
    service = service_factory(["--agent-path", agent], workdir=first.workdir, auth=True)
    service.token = admin_token(service)
    # Same port is not guaranteed after a restart; point the script at the new one.
    with open(agent, "w") as f:
        f.write(CURL_AGENT.replace("@URL@", service.cluster_url or service.url).replace("$TMPDIR_FOR_TEST", d))
    spec = {"id": "rdv-curl", "command": ["/bin/sh", "-c", 'test -n "$TF_CONFIG" && echo "$TF_CONFIG"'],
            "cluster": {"worker": 6}, "resources": {"nodes": 3, "tasks_per_node": 2, "time_limit": "00:05:00"},
            "checkpoint": {"signal_grace_s": 10}, "restart": {"max_restarts": 0}}
    status, body = service.post("/experiments", spec)
    assert status == 201, body
    done = service.wait_state("rdv-curl", ("succeeded", "failed"), timeout=120)
    assert done["state"] == "succeeded", done["reason"]
    for proc in range(6):
        a = json.load(open(os.path.join(d, f"assignment-{proc}.json")))["assignment"]
        tf = json.loads(a["tf_config"])
        assert tf["task"] == {"type": "worker", "index": proc}
        assert len(tf["cluster"]["worker"]) == 6
    assert all(t["state"] == "succeeded" for t in done["tasks"])
