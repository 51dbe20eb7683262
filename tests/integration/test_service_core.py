"""Issue 2: experiments become correctly sized jobs on a real Slurm cluster,
and their state is tracked through to the end."""
import json
import os
import subprocess

from conftest import REPO, scontrol_job, slurm_env, squeue_ids, wait_for


def spec(exp_id, command, **overrides):
    s = {
        "id": exp_id,
        "command": command,
        "cluster": {"ps": 2, "worker": 4},
        "resources": {"partition": "debug", "nodes": 3, "tasks_per_node": 2, "time_limit": "00:10:00"},
        "restart": {"max_restarts": 0},
        "checkpoint": {"signal_grace_s": 30},
    }
    s.update(overrides)
    return s


# ps tasks serve forever like server.join(); workers print and exit 0.
PS_FOREVER = ["/bin/sh", "-c",
              'echo "task $TFSLURM_ROLE:$TFSLURM_INDEX on $(hostname) TF_CONFIG=$TF_CONFIG"; '
              'if [ "$TFSLURM_ROLE" = ps ]; then exec sleep 600; fi']


def test_three_nodes_two_tasks_run_with_computed_memory_and_succeed(service, slurm_cluster):
    status, body = service.post("/experiments", spec("core-ok", PS_FOREVER))
    assert status == 201, body
    assert body["state"] == "queued"
    assert body["mem_per_task_mb"] == 2000  # 8000 MB / 4 CPUs x 1 CPU per task
    job_id = body["slurm_job_id"]
    assert isinstance(job_id, int) and job_id > 0

    # Memory as Slurm recorded it, read back while the job is known.
    job = scontrol_job(slurm_cluster, job_id)
    assert job.get("MinMemoryCPU") == "2000M", job
    assert job.get("NumNodes", "").startswith("3"), job
    assert job.get("JobName") == "tfx-core-ok-a1", job

    service.wait_state("core-ok", "succeeded", timeout=120)
    # succeeded is committed as the workers' exits decide it, in the same step
    # that sends the ps their Shutdown; the ps turn reaped only when their
    # agents report back. Wait until no task is left running, then check.
    done = wait_for(lambda: (lambda e: e if all(t["state"] not in ("registered", "running") for t in e["tasks"])
                             else None)(service.experiment("core-ok")), 60, "the ps to be reaped")
    assert {t["node"] for t in done["tasks"]} == {"node1", "node2", "node3"}
    assert [t["state"] for t in done["tasks"] if t["role"] == "ps"] == ["reaped", "reaped"], done["tasks"]
    assert all(t["state"] == "succeeded" for t in done["tasks"] if t["role"] == "worker")
    final = wait_for(lambda: (lambda j: j if j.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED") else None)(
        scontrol_job(slurm_cluster, job_id)), 60, "the job to end in Slurm")
    assert final["JobState"] == "COMPLETED", final
    whats = [e["what"] for e in done["events"]]
    assert "submitted" in whats and "assigned" in whats and "reaping" in whats


def slurm_memory(conf, job_id):
    """(MB per CPU, CPUs per task, MB allocated to the whole job) as slurmctld recorded the job."""
    job = scontrol_job(conf, job_id)
    # scontrol names the job's allocated TRES "TRES" in 22.05 and "AllocTRES" from 23.02
    # (beside "ReqTRES": _sprint_job_info in src/api/job_info.c at slurm-23-02-7-1).
    alloc = job.get("AllocTRES", job.get("TRES", ""))
    tres = dict(kv.split("=", 1) for kv in alloc.split(",") if "=" in kv)
    assert job.get("MinMemoryCPU", "").endswith("M") and tres.get("mem", "").endswith("M"), job
    return int(job["MinMemoryCPU"][:-1]), int(job["CPUs/Task"]), int(tres["mem"][:-1])


def test_memory_that_differs_from_the_cluster_default_reaches_slurm(service, slurm_cluster):
    """The local cluster's DefMemPerCPU (2000) equals 8000 MB / 4 CPUs, so
    MinMemoryCPU=2000M on a job with auto memory reads back the same whether or
    not tfslurmd sent a memory request. An explicit mem_per_task_mb of 3000
    over 2 CPUs (1500 MB per CPU) is what no default gives: it proves the
    request reaches Slurm. Auto with 2 CPUs per task checks that the CPUs and
    the per-task total (4000 MB) are what Slurm holds."""
    cases = [
        # id, resources, MB per task, MB per CPU as Slurm must record it
        ("core-mem-auto", {"cpus_per_task": 2}, 4000, 2000),
        ("core-mem-given", {"cpus_per_task": 2, "mem_per_task_mb": 3000}, 3000, 1500),
    ]
    for exp_id, resources, per_task, per_cpu in cases:
        s = spec(exp_id, ["true"], cluster={"worker": 2})
        s["resources"].update({"nodes": 1, "tasks_per_node": 2}, **resources)
        status, body = service.post("/experiments", s)
        assert status == 201, body
        assert body["mem_per_task_mb"] == per_task, body
        done = service.wait_state(exp_id, ("succeeded", "failed"), timeout=120)
        assert done["state"] == "succeeded", done["reason"]
        # Read once the job has run: before allocation, TRES holds an estimate.
        # 1 node x 2 tasks x 2 CPUs: Slurm allocated per_cpu MB for each of 4 CPUs.
        assert slurm_memory(slurm_cluster, body["slurm_job_id"]) == (per_cpu, 2, per_cpu * 4)


def test_auto_memory_takes_the_partitions_then_the_clusters_def_mem_per_cpu(service, slurm_cluster):
    """DefMemPerCPU at the top of slurm.conf (2000 here) never shows in the
    partition record; auto must still use it, as slurmctld does for a job
    that asks for no memory. A partition's own DefMemPerCPU comes first: it is
    set on `urgent` for this test only (scontrol update, undone after), and a
    job there must carry it, a value no other rule gives on this cluster."""
    status, dry = service.post("/experiments?dry_run=true", spec("core-mem-cluster", ["true"]))
    assert status == 200, dry
    assert dry["mem_per_cpu_mb"] == 2000, dry
    assert "cluster-wide DefMemPerCPU=2000 MB (partition debug sets none)" in dry["mem_explanation"], dry

    def set_urgent(setting):
        subprocess.run(["scontrol", "update", "PartitionName=urgent", setting], env=slurm_env(slurm_cluster),
                       check=True)

    set_urgent("DefMemPerCPU=1000")
    try:
        s = spec("core-mem-partition", ["true"], cluster={"worker": 2})
        s["resources"].update(partition="urgent", nodes=1, tasks_per_node=2, cpus_per_task=2)
        status, body = service.post("/experiments", s)
        assert status == 201, body
        assert body["mem_per_task_mb"] == 2000, body
        assert "partition urgent DefMemPerCPU=1000 MB" in body["mem_explanation"], body
    finally:
        set_urgent("DefMemPerNode=0")  # back to no partition default (DefMemPerNode=UNLIMITED)
    done = service.wait_state("core-mem-partition", ("succeeded", "failed"), timeout=120)
    assert done["state"] == "succeeded", done["reason"]
    assert slurm_memory(slurm_cluster, body["slurm_job_id"]) == (1000, 2, 4000)


def test_command_exiting_1_fails_and_job_leaves_slurm(service, slurm_cluster):
    status, body = service.post("/experiments", spec("core-fail", ["/bin/sh", "-c", "exit 1"],
                                                       cluster={"worker": 6}))
    assert status == 201, body
    failed = service.wait_state("core-fail", "failed", timeout=120)
    assert "exited with code 1" in failed["reason"], failed["reason"]
    wait_for(lambda: body["slurm_job_id"] not in squeue_ids(slurm_cluster), 60, "the job to leave the queue")


def test_delete_while_running_cancels_the_slurm_job(service, slurm_cluster):
    status, body = service.post("/experiments", spec("core-cancel", ["sleep", "600"], cluster={"worker": 6}))
    assert status == 201, body
    service.wait_state("core-cancel", "running", timeout=120)
    status, cancelled = service.request("DELETE", "/experiments/core-cancel")
    assert status == 200, cancelled
    assert cancelled["state"] == "cancelled"
    wait_for(lambda: body["slurm_job_id"] not in squeue_ids(slurm_cluster), 60, "the cancelled job to leave the queue")
    job = scontrol_job(slurm_cluster, body["slurm_job_id"])
    assert job.get("JobState", "CANCELLED") == "CANCELLED", job
    status, again = service.request("DELETE", "/experiments/core-cancel")
    assert status == 409 and "already ended" in again["error"]["message"]


def test_spec_too_big_for_the_partition_is_refused_with_numbers(service, slurm_cluster):
    before = squeue_ids(slurm_cluster)
    s = spec("core-big", ["true"])
    s["resources"]["mem_per_task_mb"] = 5000
    s["resources"]["cpus_per_task"] = 3
    status, body = service.post("/experiments", s)
    assert status == 400, body
    fields = {f["field"]: f["reason"] for f in body["error"]["fields"]}
    assert "6 CPUs per node" in fields["resources.tasks_per_node"], fields
    assert "most: 4" in fields["resources.tasks_per_node"], fields
    assert "10002 MB per node" in fields["resources.mem_per_task_mb"], fields
    assert squeue_ids(slurm_cluster) == before
    assert service.get("/experiments/core-big")[0] == 404


def test_invalid_specs_get_field_errors_and_nothing_is_stored(service):
    status, body = service.post("/experiments", {"id": "Bad!", "command": "x", "cluster": {"ps": -1},
                                                 "resources": {"nodes": 0}, "colour": "red"})
    assert status == 400, body
    fields = {f["field"] for f in body["error"]["fields"]}
    assert {"id", "command", "cluster.ps", "resources.nodes", "colour"} <= fields, fields
    status, body = service.request("POST", "/experiments", b'{"id": ', {"Content-Type": "application/json"})
    assert status == 400 and "not valid JSON" in body["error"]["message"]
    assert service.get("/experiments")[1]["total"] == 0


def test_duplicate_id_is_409_with_resume_hint(service):
    s = spec("core-dup", ["sleep", "600"], cluster={"worker": 6})
    assert service.post("/experiments", s)[0] == 201
    status, body = service.post("/experiments", s)
    assert status == 409, body
    assert "/experiments/core-dup/resume" in body["error"]["message"]
    service.request("DELETE", "/experiments/core-dup")


def test_errors_are_json_everywhere(service):
    status, body = service.get("/no/such/route")
    assert status == 404 and body["error"]["code"] == "not_found"
    status, body = service.get("/experiments?limit=zero")
    assert status == 400 and body["error"]["fields"][0]["field"] == "limit"
    status, body = service.get("/experiments?state=sleeping")
    assert status == 400 and "sleeping" in body["error"]["message"]
    status, body = service.get("/healthz")
    assert status == 200 and body == {"status": "ok"}


def test_list_is_newest_first_and_pages_with_limit_and_offset(service):
    # Created in this order; neither ids ascending nor descending, so the
    # order checked is the creation time's, not the id's tie-break.
    created = ["core-page-c", "core-page-a", "core-page-d", "core-page-b"]
    for exp_id in created:
        status, body = service.post("/experiments", spec(exp_id, ["true"], cluster={"worker": 1},
                                                         resources={"partition": "debug", "nodes": 1,
                                                                    "tasks_per_node": 1,
                                                                    "time_limit": "00:10:00"}))
        assert status == 201, body
    for exp_id in created:
        assert service.wait_state(exp_id, ("succeeded", "failed"), timeout=120)["state"] == "succeeded"
    newest_first = list(reversed(created))

    def page(query):
        status, body = service.get("/experiments?" + query)
        assert status == 200, body
        return body

    whole = page("limit=10")
    assert [e["id"] for e in whole["experiments"]] == newest_first
    assert whole["total"] == 4
    first, second, past = page("limit=2"), page("limit=2&offset=2"), page("limit=2&offset=4")
    assert [e["id"] for e in first["experiments"]] == newest_first[:2]
    assert (first["limit"], first["offset"], first["total"]) == (2, 0, 4)
    assert [e["id"] for e in second["experiments"]] == newest_first[2:]
    assert (second["offset"], second["total"]) == (2, 4)
    assert past["experiments"] == [] and past["total"] == 4
    # Paging applies after the state filter.
    filtered = page("state=succeeded&limit=3&offset=1")
    assert [e["id"] for e in filtered["experiments"]] == newest_first[1:]
    assert filtered["total"] == 4


def test_port_0_picks_a_free_port_and_logs_it(service):
    """The fixture starts tfslurmd with --listen 127.0.0.1:0; the port it bound
    is in the log, and it is the one that answers."""
    port = int(service.url.rsplit(":", 1)[1])
    assert port > 0
    line = f"REST API listening on {service.scheme}://127.0.0.1:{port}"
    wait_for(lambda: line in open(service.log_path).read(), 10, "the bound port in tfslurmd's log")
    assert service.get("/healthz") == (200, {"status": "ok"})


def test_experiments_survive_a_service_restart(service_factory):
    first = service_factory()
    for i in range(2):
        assert first.post("/experiments", spec(f"core-keep-{i}", ["sleep", "600"], cluster={"worker": 6}))[0] == 201
    first.stop()
    second = service_factory(workdir=first.workdir)
    listed = second.get("/experiments")[1]
    assert {e["id"] for e in listed["experiments"]} == {"core-keep-0", "core-keep-1"}
    for i in range(2):
        assert second.experiment(f"core-keep-{i}")["state"] in ("queued", "starting", "running")
        assert second.request("DELETE", f"/experiments/core-keep-{i}")[0] == 200


def test_hostile_arguments_and_env_reach_the_program_byte_for_byte(service):
    hostile = ["it's", '"double"', "$(touch PWNED)", "`touch PWNED`", "a\nb", "; touch PWNED #", "$HOME",
               "\\", "ünïcødé ✓", "tab\there", ""]
    helper = os.path.join(REPO, "tests/integration/helpers/dump_args.py")
    s = spec("core-hostile", ["/usr/bin/python3", helper] + hostile, cluster={"worker": 6},
             env={f"HOSTILE_{i}": v for i, v in enumerate(hostile)})
    status, body = service.post("/experiments", s)
    assert status == 201, body
    done = service.wait_state("core-hostile", ("succeeded", "failed"), timeout=120)
    assert done["state"] == "succeeded", done["reason"]
    model_dir = done["model_dir"]
    for i in range(6):
        got = json.load(open(os.path.join(model_dir, f"argv-worker-{i}.json")))
        assert got["argv"] == hostile
        assert got["env"] == {f"HOSTILE_{j}": v for j, v in enumerate(hostile)}
    assert not any("PWNED" in f for f in os.listdir(model_dir))
    assert not os.path.exists(os.path.join(done["model_dir"], "logs", "attempt-1", "PWNED"))
    status, script = service.request("GET", "/experiments/core-hostile/sbatch", raw=True)
    assert status == 200 and script.startswith("#!/bin/bash")
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_hello_example_submits_with_curl(service):
    """The README's curl line, as written."""
    out = subprocess.run(["curl", "-sS", "-X", "POST", service.url + "/experiments", "-H",
                          "Content-Type: application/json", "-d", "@" + os.path.join(REPO, "examples/hello.json")],
                         stdout=subprocess.PIPE, text=True, check=True)
    body = json.loads(out.stdout)
    assert body["id"] == "hello" and body["slurm_job_id"] > 0, body
    done = service.wait_state("hello", ("succeeded", "failed"), timeout=120)
    assert done["state"] == "succeeded", done["reason"]
