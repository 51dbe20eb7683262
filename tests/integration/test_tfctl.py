"""tfctl against a real tfslurmd and the local Slurm cluster: submit, status,
logs, cancel, resume, --wait, errors and output formats, as a user runs them.

Every call runs the built tfctl binary with HOME and XDG_CONFIG_HOME pointing
at an empty directory, so a developer's own ~/.config/tfslurm/config cannot
change the outcome; the service URL comes through TFSLURM_URL unless a test
is about where the URL comes from.
"""
import http.server
import json
import os
import pty
import re
import select
import subprocess
import threading
import time
import urllib.request

import pytest
import yaml

from conftest import BIN, REPO, scontrol_job, wait_for
from helpers.ports import unused_port

TFCTL = os.path.join(BIN, "tfctl")


@pytest.fixture
def home(tmp_path):
    """An empty home directory for tfctl's config file lookup."""
    h = tmp_path / "home"
    h.mkdir()
    return h


def tfctl_env(home, url=None, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("TFSLURM_") or k == "TFSLURM_CACERT"}
    e.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    if url:
        e["TFSLURM_URL"] = url
    e.update(env or {})
    return e


def run_tfctl(home, *args, url=None, env=None, timeout=180):
    return subprocess.run([TFCTL, *args], env=tfctl_env(home, url, env), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


def ok(result):
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def hello_spec(exp_id, then="", workers=2):
    """Every worker says hello with its role and index, then runs `then`."""
    script = "echo hello from $TFSLURM_ROLE $TFSLURM_INDEX" + (f"; {then}" if then else "")
    return {"id": exp_id, "command": ["/bin/sh", "-c", script], "cluster": {"worker": workers},
            "resources": {"partition": "debug", "nodes": workers, "tasks_per_node": 1,
                          "time_limit": "00:10:00"}}


def write_yaml(tmp_path, spec, name="spec.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def status_json(home, service, exp_id):
    return json.loads(ok(run_tfctl(home, "status", exp_id, "-o", "json", url=service.url)))


def wait_all_running(home, service, exp_id):
    """Until Slurm says RUNNING on its nodes and every task runs (the service
    polls Slurm, so tasks may register before it has seen the job start)."""
    def running():
        e = status_json(home, service, exp_id)
        return (e["slurm_state"] == "RUNNING" and e["nodes"]
                and all(t["state"] == "running" for t in e["tasks"]))
    wait_for(running, 120, f"{exp_id}: the job and every task running")


def program_output(log):
    """A task log without the agent's own lines (it logs to the same stderr)."""
    return "".join(line for line in log.splitlines(True) if not line.startswith("[tfslurm-agent "))


def table_after(text, header_start):
    """Rows of the table whose header line starts with `header_start`, as lists of cells."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


def test_submit_status_logs_cancel(service, home, tmp_path):
    spec = write_yaml(tmp_path, hello_spec("tfctl-flow", then="exec sleep 300"))
    out = ok(run_tfctl(home, "submit", spec, url=service.url))
    assert "submitted tfctl-flow: attempt 1, Slurm job" in out

    wait_all_running(home, service, "tfctl-flow")
    table = ok(run_tfctl(home, "status", "tfctl-flow", url=service.url))
    assert re.search(r"^state\s+running", table, re.M), table
    assert re.search(r"^slurm job\s+\d+ RUNNING on node", table, re.M), table

    logs = wait_for(lambda: (lambda r: r.stdout if "hello from worker 1" in r.stdout else None)(
        run_tfctl(home, "logs", "tfctl-flow", "--task", "worker:1", url=service.url)), 60, "worker 1's output")
    assert program_output(logs) == "hello from worker 1\n"
    full = ok(run_tfctl(home, "logs", "tfctl-flow", "--task", "worker:0", url=service.url))
    tail = ok(run_tfctl(home, "logs", "tfctl-flow", "--task", "worker:0", "--tail", "2", url=service.url))
    assert tail == "".join(full.splitlines(True)[-2:])

    out = ok(run_tfctl(home, "cancel", "tfctl-flow", url=service.url))
    assert out.startswith("cancelled tfctl-flow")
    service.wait_state("tfctl-flow", "cancelled")
    events = ok(run_tfctl(home, "events", "tfctl-flow", url=service.url))
    assert "cancelled by " in events
    # -o json: the service's events, the same ones as the table's rows, in order.
    as_json = json.loads(ok(run_tfctl(home, "events", "tfctl-flow", "-o", "json", url=service.url)))
    # (Asked for after the table: Slurm's last word on the job may have come in between.)
    assert isinstance(as_json, list)
    rows = table_after(events, "TIME")
    assert len(as_json) >= len(rows) >= 3, (rows, as_json)
    for row, event in zip(rows, as_json):
        assert row == [event["at"][:19] + "Z", str(event["attempt"]), event["what"], event["why"]]
    assert any(e["what"] == "state" and re.fullmatch(r"\w+ -> cancelled: cancelled by .+", e["why"])
               for e in as_json), as_json
    listed = ok(run_tfctl(home, "list", url=service.url))
    assert table_after(listed, "ID")[0][:2] == ["tfctl-flow", "cancelled"]


def test_status_json_and_yaml_carry_the_facts_of_the_table(service, home, tmp_path):
    ok(run_tfctl(home, "submit", write_yaml(tmp_path, hello_spec("tfctl-json", then="exec sleep 300")),
                 url=service.url))
    wait_all_running(home, service, "tfctl-json")
    as_json = status_json(home, service, "tfctl-json")
    as_table = ok(run_tfctl(home, "status", "tfctl-json", url=service.url))
    as_yaml = yaml.safe_load(ok(run_tfctl(home, "status", "tfctl-json", "-o", "yaml", url=service.url)))

    rows = table_after(as_table, "ROLE")
    assert len(rows) == len(as_json["tasks"]) == 2
    for row, task in zip(rows, as_json["tasks"]):
        exit_text = "-" if task["exit_code"] is None else str(task["exit_code"])
        assert row[:6] == [task["role"], str(task["index"]), task["node"], task["address"], task["state"],
                           exit_text]
        assert row[6].endswith("s ago")
    attempt_rows = table_after(as_table, "ATTEMPT")
    assert attempt_rows[0][:4] == ["1", str(as_json["attempts"][0]["slurm_job_id"]), "running", "RUNNING"]
    assert re.search(rf"^experiment\s+{as_json['id']}$", as_table, re.M)
    assert re.search(rf"^memory\s+{as_json['mem_per_task_mb']} MB per task", as_table, re.M)

    # The YAML is the same document as the JSON (heartbeat ages move on).
    for doc in (as_json, as_yaml):
        for task in doc["tasks"]:
            task.pop("heartbeat_age_s")
        doc.pop("updated_at")
    assert as_yaml == as_json
    ok(run_tfctl(home, "cancel", "tfctl-json", url=service.url))


def test_status_watch_refreshes_until_the_experiment_ends(service, home, tmp_path):
    ok(run_tfctl(home, "submit", write_yaml(tmp_path, hello_spec("tfctl-watch", "exec sleep 300", 1)),
                 url=service.url))
    wait_all_running(home, service, "tfctl-watch")
    watch = [TFCTL, "status", "tfctl-watch", "--watch", "--interval", "0.2"]
    env = tfctl_env(home, service.url)

    # On a terminal: the screen is cleared and the page drawn again in place.
    clear = b"\033[H\033[2J"
    leader, follower = pty.openpty()
    proc = subprocess.Popen(watch, env=env, stdout=follower, stderr=subprocess.DEVNULL)
    os.close(follower)
    screen = b""
    try:
        deadline = time.monotonic() + 20
        while screen.count(clear) < 3 and time.monotonic() < deadline:
            if select.select([leader], [], [], 0.5)[0]:
                screen += os.read(leader, 65536)
    finally:
        proc.kill()
        proc.wait()
        os.close(leader)
    assert screen.count(clear) >= 3, screen
    assert screen.startswith(clear) and b"experiment  tfctl-watch" in screen.split(clear)[-2], screen

    # Into a file: one page after another, no escape codes, and it ends by
    # itself, exit 0, once the experiment has ended.
    pages_file = tmp_path / "watch.out"
    with open(pages_file, "w") as out:
        proc = subprocess.Popen(watch, env=env, stdout=out, stderr=subprocess.PIPE, text=True)
        try:
            pages = lambda: re.findall(r"^experiment  tfctl-watch$", pages_file.read_text(), re.M)
            wait_for(lambda: len(pages()) >= 2, 20, "two pages of status --watch")
            assert proc.poll() is None, "status --watch ended while the experiment runs"
            ok(run_tfctl(home, "cancel", "tfctl-watch", url=service.url))
            assert proc.wait(timeout=60) == 0, proc.stderr.read()
        finally:
            proc.kill()
    text = pages_file.read_text()
    assert "\033" not in text
    assert all(re.search(r"^state       running", page, re.M) for page in text.split("\n\nexperiment")[:2])
    last = text[text.rindex("experiment  tfctl-watch"):]
    assert re.search(r"^state       cancelled", last, re.M), last


def test_submit_wait_returns_0_after_success(service, home):
    out = ok(run_tfctl(home, "submit", "--id", "tfctl-wait", "--workers", "2", "--partition", "debug",
                       "--time", "00:10:00", "--wait", "--",
                       "/bin/sh", "-c", "echo hello from $TFSLURM_ROLE $TFSLURM_INDEX", url=service.url))
    assert out.rstrip().splitlines()[-1].startswith("tfctl-wait succeeded"), out
    assert "attempt 1  submitted: Slurm job" in out  # events were followed as they came
    logs = ok(run_tfctl(home, "logs", "tfctl-wait", "--task", "worker:0", url=service.url))
    assert program_output(logs) == "hello from worker 0\n"


def test_submit_wait_returns_1_when_the_experiment_fails(service, home, tmp_path):
    spec = hello_spec("tfctl-fails", then="exit 3")
    spec["restart"] = {"max_restarts": 0}
    r = run_tfctl(home, "submit", write_yaml(tmp_path, spec), "--wait", url=service.url)
    assert r.returncode == 1, r
    assert r.stdout.rstrip().splitlines()[-1].startswith("tfctl-fails failed"), r.stdout


def test_resume_starts_a_new_attempt_from_the_checkpoint(service, home):
    ok(run_tfctl(home, "submit", "--id", "tfctl-resume", "--workers", "1", "--wait", "--",
                 "/bin/sh", "-c", "echo this is attempt $TFSLURM_ATTEMPT", url=service.url))
    model_dir = status_json(home, service, "tfctl-resume")["model_dir"]
    # TensorFlow's checkpoint state file, as the training would have left it.
    with open(os.path.join(model_dir, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "model.ckpt-1200"\nall_model_checkpoint_paths: "model.ckpt-1200"\n')
    out = ok(run_tfctl(home, "resume", "tfctl-resume", "--wait", url=service.url))
    assert re.search(r"^resumed tfctl-resume: attempt 2, Slurm job \d+, from checkpoint step 1200$", out, re.M), out
    assert out.rstrip().splitlines()[-1].startswith("tfctl-resume succeeded"), out
    view = status_json(home, service, "tfctl-resume")
    assert [a["number"] for a in view["attempts"]] == [1, 2]
    assert view["attempts"][1]["start_step"] == 1200

    # logs --attempt N reads that attempt's files; without it, the latest attempt's.
    def worker_log(*args):
        return program_output(ok(run_tfctl(home, "logs", "tfctl-resume", "--task", "worker:0", *args,
                                           url=service.url)))
    assert worker_log("--attempt", "1") == "this is attempt 1\n"
    assert worker_log("--attempt", "2") == "this is attempt 2\n"
    assert worker_log() == "this is attempt 2\n"
    r = run_tfctl(home, "logs", "tfctl-resume", "--task", "worker:0", "--attempt", "3", url=service.url)
    assert r.returncode == 1 and "attempt" in r.stderr and "3" in r.stderr and r.stdout == "", r


def test_linear_ps_runs_to_success_and_resumes_from_its_checkpoint(service, home, tmp_path):
    # The reference workload, from its spec as the example's README shows it.
    template = open(os.path.join(REPO, "examples", "linear_ps", "experiment.json.in")).read()
    spec = tmp_path / "linear-ps.json"
    spec.write_text(template.replace("@REPO@", REPO))
    out = ok(run_tfctl(home, "submit", str(spec), "--id", "tfctl-linear", "--wait", url=service.url, timeout=300))
    assert out.rstrip().splitlines()[-1].startswith("tfctl-linear succeeded"), out
    checkpoint = status_json(home, service, "tfctl-linear")["checkpoint"]
    step = checkpoint["step"]
    assert step >= 300
    # The status table shows the same checkpoint, and the list its step.
    table = ok(run_tfctl(home, "status", "tfctl-linear", url=service.url))
    assert re.search(rf"^checkpoint  step {step} \({re.escape(checkpoint['path'])}\)$", table, re.M), table
    assert checkpoint["path"].startswith(status_json(home, service, "tfctl-linear")["model_dir"] + "/")
    assert table_after(ok(run_tfctl(home, "list", url=service.url)), "ID")[0][6] == f"step {step}"
    logs = ok(run_tfctl(home, "logs", "tfctl-linear", "--task", "worker:0", url=service.url))
    assert re.search(r"^linear_ps: done step=\d+ loss=", logs, re.M), logs

    out = ok(run_tfctl(home, "resume", "tfctl-linear", "--wait", url=service.url, timeout=300))
    assert "resumed tfctl-linear: attempt 2, Slurm job" in out and f"from checkpoint step {step}" in out, out
    assert out.rstrip().splitlines()[-1].startswith("tfctl-linear succeeded"), out
    logs = ok(run_tfctl(home, "logs", "tfctl-linear", "--task", "worker:1", url=service.url))
    assert f"start_step={step}" in logs, logs


def test_list_puts_running_experiments_first_and_filters_by_state(service, home, tmp_path):
    failing = hello_spec("tfctl-list-done", then="exit 3", workers=1)
    failing["restart"] = {"max_restarts": 0}
    assert run_tfctl(home, "submit", write_yaml(tmp_path, failing, "a.yaml"), "--wait",
                     url=service.url).returncode == 1
    ok(run_tfctl(home, "submit", write_yaml(tmp_path, hello_spec("tfctl-list-run", "exec sleep 300", 1), "b.yaml"),
                 url=service.url))
    service.wait_state("tfctl-list-run", "running")
    # Running comes with the agents' registration, the job's nodes with
    # tfslurmd's next poll of Slurm: a table listed between the two showed
    # NODES "-" and the JSON listed after it "node1".
    wait_for(lambda: service.experiment("tfctl-list-run").get("nodes"), 30, "Slurm's poll to name the job's node",
             interval=0.25)
    # The finished experiment is the older one, but the running one is listed first.
    rows = table_after(ok(run_tfctl(home, "list", url=service.url)), "ID")
    assert [r[:2] for r in rows] == [["tfctl-list-run", "running"], ["tfctl-list-done", "failed"]]
    assert rows[0][3] == "1/1"  # TASKS: running/total
    # -o json: the same experiments in the same order (running first), with
    # the facts of each row.
    listed = json.loads(ok(run_tfctl(home, "list", "-o", "json", url=service.url)))
    assert listed["total"] == 2 and len(listed["experiments"]) == 2
    for row, e in zip(rows, listed["experiments"]):
        counts = (e.get("task_counts") or {}).values()
        tasks = f"{sum(c['running'] for c in counts)}/{sum(c['total'] for c in counts)}" if counts else "-"
        step = (e.get("checkpoint") or {}).get("step")
        assert row[:7] == [e["id"], e["state"], str(e["attempt"]), tasks,
                           "-" if e.get("slurm_job_id") is None else str(e["slurm_job_id"]),
                           e.get("nodes") or "-", "-" if step is None else f"step {step}"], (row, e)

    failed_only = json.loads(ok(run_tfctl(home, "list", "--state", "failed", "-o", "json", url=service.url)))
    assert [e["id"] for e in failed_only["experiments"]] == ["tfctl-list-done"]
    r = run_tfctl(home, "list", "--state", "sleeping", url=service.url)
    assert r.returncode == 1 and "unknown state 'sleeping'" in r.stderr
    ok(run_tfctl(home, "cancel", "tfctl-list-run", url=service.url))


def test_logs_follow_goes_on_past_the_follow_window_and_ends_with_the_attempt(service, home, tmp_path):
    # 35 s of output: longer than the service's 30 s follow window, so tfctl
    # must ask again from its offset, without losing or repeating a line.
    spec = hello_spec("tfctl-follow", then="for i in $(seq 1 35); do echo line $i; sleep 1; done", workers=1)
    ok(run_tfctl(home, "submit", write_yaml(tmp_path, spec), url=service.url))
    out = ok(run_tfctl(home, "logs", "tfctl-follow", "--task", "worker:0", "-f", url=service.url, timeout=180))
    assert program_output(out) == "hello from worker 0\n" + "".join(f"line {i}\n" for i in range(1, 36))
    assert service.experiment("tfctl-follow")["attempts"][0]["state"] == "ended"

    # Reading on from a byte offset, as the follower does, and the last lines.
    req = f"{service.url}/experiments/tfctl-follow/logs?task=worker:0"
    with urllib.request.urlopen(req + "&offset=20") as resp:
        assert resp.headers["X-Tfslurm-Log-Offset"] == "20"
        assert resp.read() == out.encode()[20:]
    last_two = "".join(out.splitlines(True)[-2:])
    with urllib.request.urlopen(req + "&tail=2") as resp:
        assert resp.read().decode() == last_two
        assert resp.headers["X-Tfslurm-Log-Offset"] == str(len(out.encode()) - len(last_two.encode()))


def test_dry_run_prints_the_script_and_memory_and_submits_nothing(service, home, tmp_path):
    r = run_tfctl(home, "submit", write_yaml(tmp_path, hello_spec("tfctl-dry")), "--dry-run", url=service.url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("#!/bin/bash\n")
    assert "#SBATCH --job-name=tfx-tfctl-dry-a1" in r.stdout
    assert re.search(r"^memory: \d+ MB per task, \d+ MB per CPU \(", r.stderr, re.M), r.stderr
    missing = run_tfctl(home, "status", "tfctl-dry", url=service.url)
    assert missing.returncode == 1 and "tfctl-dry" in missing.stderr


def test_a_bad_spec_file_names_each_field(service, home, tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("id: tfctl-bad\ncluster: {worker: -1}\nresources: {nodes: 0}\n")
    r = run_tfctl(home, "submit", str(spec), url=service.url)
    assert r.returncode == 1
    assert "invalid field" in r.stderr
    assert re.search(r"^  cluster\.worker: must be from 0 to 16384, got -1$", r.stderr, re.M), r.stderr
    assert re.search(r"^  command: is required", r.stderr, re.M), r.stderr
    assert re.search(r"^  resources\.nodes: ", r.stderr, re.M), r.stderr

    broken = tmp_path / "broken.yaml"
    broken.write_text("id: x\ncluster: {worker: 2\n")
    r = run_tfctl(home, "submit", str(broken), url=service.url)
    # Where the `{` opens (line 2), not where the parser noticed (line 3).
    assert r.returncode == 1 and f"{broken}:2:10: this `{{` is never closed" in r.stderr, r.stderr


def test_logs_refuse_task_values_that_are_not_role_index(service, home, tmp_path):
    ok(run_tfctl(home, "submit", write_yaml(tmp_path, hello_spec("tfctl-logs", then="exec sleep 300")),
                 url=service.url))
    for bad in ["../../etc/passwd", "worker:../../etc/passwd", "worker:1/../../../x", "/etc/passwd",
                "worker:-1", "worker:01", "worker:1\n", "WORKER:1", "worker:1 ", "worker"]:
        r = run_tfctl(home, "logs", "tfctl-logs", "--task", bad, url=service.url)
        assert r.returncode == 1, (bad, r)
        assert "must be ROLE:INDEX" in r.stderr, (bad, r.stderr)
        assert "root:" not in r.stdout
    r = run_tfctl(home, "logs", "tfctl-logs", "--task", "chief:0", url=service.url)
    assert r.returncode == 1 and "has no task chief:0; attempt 1 has worker:0-1" in r.stderr, r.stderr

    # The same over plain HTTP, including values only a hand-made request can carry.
    for query in ["task=..%2F..%2Fetc%2Fpasswd", "task=worker%3A1%00", "attempt=..%2F1", "attempt=2",
                  "tail=-1", "tail=1&offset=0"]:
        status, body = service.get(f"/experiments/tfctl-logs/logs?{query}")
        assert status == 400 and body["error"]["fields"], (query, status, body)
    status, body = service.get("/experiments/..%2F..%2Fetc/logs")
    assert status == 404, body
    status, body = service.get("/experiments/no-such/logs?task=worker:0")
    assert status == 404 and "no-such" in body["error"]["message"]
    ok(run_tfctl(home, "cancel", "tfctl-logs", url=service.url))


def test_logs_refuse_files_that_lead_outside_the_log_directory(service, home):
    ok(run_tfctl(home, "submit", "--id", "tfctl-link", "--workers", "2", "--wait", "--", "/bin/true",
                 url=service.url))
    secret = os.path.join(service.workdir, "secret.txt")
    with open(secret, "w") as f:
        f.write("SECRET\n")
    attempt_dir = os.path.join(service.output_root, "tfctl-link", "logs", "attempt-1")
    # The attempt has ended, so nothing writes here any more: plant symlinks
    # where the task logs and the batch output were.
    for name in os.listdir(attempt_dir):
        os.unlink(os.path.join(attempt_dir, name))
        os.symlink(secret, os.path.join(attempt_dir, name))
    for args in (["--task", "worker:0"], ["--task", "worker:1"], ["--task", "batch"], []):
        r = run_tfctl(home, "logs", "tfctl-link", *args, url=service.url)
        assert r.returncode == 1 and "SECRET" not in r.stdout, (args, r)
        assert "refused" in r.stderr, r.stderr
    # Regular files again: served.
    for name in os.listdir(attempt_dir):
        os.unlink(os.path.join(attempt_dir, name))
        with open(os.path.join(attempt_dir, name), "w") as f:
            f.write("REAL\n")
    assert ok(run_tfctl(home, "logs", "tfctl-link", "--task", "worker:0", url=service.url)) == "REAL\n"
    # A hard link to a file outside (a root-only one) is refused as well:
    # tfslurmd reads as root, and the directory may be the owner's.
    os.chmod(secret, 0o600)
    worker0 = next(os.path.join(attempt_dir, n) for n in os.listdir(attempt_dir) if n == "task-0.out")
    os.unlink(worker0)
    os.link(secret, worker0)
    r = run_tfctl(home, "logs", "tfctl-link", "--task", "worker:0", url=service.url)
    assert r.returncode == 1 and "SECRET" not in r.stdout and "refused" in r.stderr, r
    # So is an attempt directory that is a link to another directory.
    os.unlink(worker0)
    elsewhere = os.path.join(service.workdir, "elsewhere")
    os.mkdir(elsewhere)
    with open(os.path.join(elsewhere, "task-0.out"), "w") as f:
        f.write("SECRET\n")
    os.rename(attempt_dir, attempt_dir + ".moved")
    os.symlink(elsewhere, attempt_dir)
    r = run_tfctl(home, "logs", "tfctl-link", "--task", "worker:0", url=service.url)
    assert r.returncode == 1 and "SECRET" not in r.stdout and "refused" in r.stderr, r
    os.unlink(attempt_dir)
    os.rename(attempt_dir + ".moved", attempt_dir)
    # A log directory that is itself a link elsewhere is refused.
    logs_dir = os.path.join(service.output_root, "tfctl-link", "logs")
    os.rename(logs_dir, logs_dir + ".moved")
    os.symlink(logs_dir + ".moved", logs_dir)
    r = run_tfctl(home, "logs", "tfctl-link", "--task", "worker:0", url=service.url)
    assert r.returncode == 1 and "refused" in r.stderr, r


def test_with_tokens_logs_are_only_for_the_owner(service_factory, home):
    service = service_factory(auth=True)

    def token(user):
        out = subprocess.run([os.path.join(BIN, "tfslurmd"), "token", "create", "--user", user, "--db", service.db],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
        return out.stdout.strip()

    alice, bob = token("alice"), token("bob")
    ok(run_tfctl(home, "submit", "--id", "tfctl-owned", "--workers", "1", "--wait", "--", "/bin/echo", "mine",
                 url=service.url, env={"TFSLURM_TOKEN": alice}))
    logs = ok(run_tfctl(home, "logs", "tfctl-owned", "--task", "worker:0", "--token", alice, url=service.url))
    assert program_output(logs) == "mine\n"

    r = run_tfctl(home, "logs", "tfctl-owned", "--task", "worker:0", "--token", bob, url=service.url)
    # Bob hears what he would for an id that does not exist (issue 31).
    assert r.returncode == 1 and "no experiment with id 'tfctl-owned'" in r.stderr and "mine" not in r.stdout, r
    r = run_tfctl(home, "logs", "tfctl-owned", "--task", "worker:0", url=service.url)
    assert r.returncode == 1 and "needs a token" in r.stderr and "TFSLURM_TOKEN" in r.stderr, r


def test_unreachable_service_names_the_url(home):
    url = f"http://127.0.0.1:{unused_port()}"
    r = run_tfctl(home, "list", url=url)
    assert r.returncode == 1
    assert f"cannot reach tfslurmd at {url} (from TFSLURM_URL)" in r.stderr, r.stderr
    r = run_tfctl(home, "status", "x", "--url", url)
    assert r.returncode == 1 and f"{url} (from --url)" in r.stderr


def test_url_comes_from_flag_then_environment_then_config_file(service, home):
    config = home / ".config" / "tfslurm" / "config"
    config.parent.mkdir(parents=True)
    config.write_text(f"# written by the test\nurl = {service.url}\n")
    ok(run_tfctl(home, "list"))
    dead = f"http://127.0.0.1:{unused_port()}"
    r = run_tfctl(home, "list", url=dead)
    assert r.returncode == 1 and f"{dead} (from TFSLURM_URL)" in r.stderr
    ok(run_tfctl(home, "list", "--url", service.url, url=dead))
    config.write_text("url: [not, a, url]\n")
    r = run_tfctl(home, "list")
    assert r.returncode == 1 and str(config) in r.stderr


def test_token_is_sent_as_a_bearer_header_only_when_configured(home):
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            body = json.dumps({"experiments": [], "total": 0}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        run_tfctl(home, "list", "--state", "running", url=url)
        run_tfctl(home, "list", "--state", "running", url=url, env={"TFSLURM_TOKEN": "from-env"})
        run_tfctl(home, "list", "--state", "running", "--token", "from-flag", url=url,
                  env={"TFSLURM_TOKEN": "from-env"})
    finally:
        server.shutdown()
    assert seen == [None, "Bearer from-env", "Bearer from-flag"]


@pytest.mark.parametrize("command", ["submit", "status", "list", "events", "logs", "cancel", "resume"])
def test_every_subcommand_has_help_with_an_example(home, command):
    out = ok(run_tfctl(home, command, "--help"))
    assert re.search(r"^Examples?:\n  tfctl " + command, out, re.M), out
    # The connection options work after the subcommand, so its help lists them.
    assert re.search(r"^  --url TEXT +tfslurmd's URL", out, re.M), out
    assert re.search(r"^  --token TEXT +API token", out, re.M), out


def test_usage_errors_exit_2(home):
    assert run_tfctl(home).returncode == 2
    assert run_tfctl(home, "status").returncode == 2
    assert run_tfctl(home, "status", "Not/An/Id").returncode == 2
    assert run_tfctl(home, "frobnicate").returncode == 2
    assert run_tfctl(home, "list", "-o", "xml").returncode == 2
    assert run_tfctl(home, "logs", "x", "--", "echo").returncode == 2


def complete(home, line, url=None):
    """What bash completion offers for `line` (the cursor at its end)."""
    script = os.path.join(REPO, "client", "completion", "tfctl.bash")
    words = line.split(" ")
    prog = (f"source {script}; COMP_WORDS=({' '.join(repr(w) for w in words)}); "
            f"COMP_CWORD={len(words) - 1}; _tfctl; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    env = tfctl_env(home, url)
    env["PATH"] = BIN + os.pathsep + env["PATH"]
    out = subprocess.run(["bash", "-c", prog], stdout=subprocess.PIPE, text=True, check=True, env=env)
    return out.stdout.split()


def test_bash_completion_offers_subcommands_flags_and_tasks(home):
    assert complete(home, "tfctl s") == ["submit", "status", "sweep"]
    assert complete(home, "tfctl sweep s") == ["submit", "status"]
    assert complete(home, "tfctl sweep status -") == ["-o", "--output", "--url", "--token", "--cacert", "--help"]
    assert complete(home, "tfctl m") == ["metrics"]
    assert complete(home, "tfctl metrics x --t") == ["--tag", "--token"]
    assert "--tasks-per-node" in complete(home, "tfctl submit --t")
    assert complete(home, "tfctl logs x --task w") == ["worker:"]
    assert complete(home, "tfctl logs x --task b") == ["batch"]
    assert complete(home, "tfctl list --state r") == ["running", "restarting"]
    assert complete(home, "tfctl status x -o ") == ["table", "json", "yaml"]
    assert complete(home, "tfctl list -o ") == ["table", "json", "yaml", "name"]
    assert complete(home, "tfctl l") == ["list", "logs", "login"]
    assert complete(home, "tfctl login --") == ["--fingerprint", "--yes", "--no-token", "--url", "--token",
                                                "--cacert", "--help"]


def test_list_o_name_prints_ids_and_completion_offers_them(service, home, tmp_path):
    ok(run_tfctl(home, "submit", "--id", "tfctl-names-done", "--workers", "1", "--wait", "--", "/bin/true",
                 url=service.url))
    ok(run_tfctl(home, "submit", write_yaml(tmp_path, hello_spec("tfctl-names-run", "exec sleep 300", 1)),
                 url=service.url))
    service.wait_state("tfctl-names-run", "running")

    # One id a line, in the table's order (running first), and nothing else.
    names = ok(run_tfctl(home, "list", "-o", "name", url=service.url))
    assert names == "tfctl-names-run\ntfctl-names-done\n", names
    table = ok(run_tfctl(home, "list", url=service.url))
    assert [row[0] for row in table_after(table, "ID")] == names.split()
    assert ok(run_tfctl(home, "list", "--state", "succeeded", "-o", "name", url=service.url)) == "tfctl-names-done\n"
    r = run_tfctl(home, "list", "--state", "failed", "-o", "name", url=service.url)
    assert r.returncode == 0 and r.stdout == "", r
    assert run_tfctl(home, "status", "tfctl-names-run", "-o", "name", url=service.url).returncode == 2

    # Completion of experiment ids asks the service, through `list -o name`.
    assert complete(home, "tfctl status tfctl-names-", url=service.url) == ["tfctl-names-run", "tfctl-names-done"]
    assert complete(home, "tfctl logs tfctl-names-d", url=service.url) == ["tfctl-names-done"]
    assert complete(home, "tfctl --url " + service.url + " cancel tfctl-names-r", url=service.url) == \
        ["tfctl-names-run"]
    assert complete(home, "tfctl status ", url=f"http://127.0.0.1:{unused_port()}") == []
    ok(run_tfctl(home, "cancel", "tfctl-names-run", url=service.url))


def read_terminal(leader, proc, timeout):
    """What `proc` wrote to the pty whose other end is `leader`, until it
    closes its end or exits, for at most `timeout` seconds."""
    screen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([leader], [], [], 0.5)[0]:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the other end is closed
                break
            if not chunk:
                break
            screen += chunk
        elif proc.poll() is not None:
            break
    return screen


def run_on_pty(home, service, *args, timeout=120):
    """tfctl with its stdout on a terminal (a pty): what a person would see, as bytes."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([TFCTL, *args], env=tfctl_env(home, service.url), stdout=follower,
                            stderr=subprocess.PIPE)
    os.close(follower)
    try:
        screen = read_terminal(leader, proc, timeout)
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        proc.kill()
        os.close(leader)
    # The pty's line discipline turns each \n into \r\n on the way out.
    return screen.replace(b"\r\n", b"\n")


# What must never reach a terminal raw from text others wrote: C0 controls
# but newline and tab, DEL, C1 controls (U+0080-U+009F, as UTF-8), and the
# bidi controls that reorder what is shown (U+061C, U+200E, U+200F,
# U+202A-U+202E, U+2066-U+2069).
RAW_CONTROLS = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xaa-\xae]|"
                          rb"\xe2\x81[\xa6-\xa9]")


def test_program_output_reaches_the_terminal_escaped(service, home, tmp_path):
    """Issue 31: `tfctl logs` passed a program's OSC, CSI, CR, BS and NUL to
    whoever read them. On a terminal they are shown escaped; --raw and a pipe
    get the bytes; -o json stays exact."""
    hostile = (r"printf 'title\033]0;PWNED\007 clip\033]52;c;QUFBQQ==\007 clear\033[2J "
               r"cr\rbs\010nul\000 c1\302\233 rlo\342\200\256 end\n'")
    spec = hello_spec("tfctl-escapes", f"{hostile}; exec sleep 300", 1)
    ok(run_tfctl(home, "submit", write_yaml(tmp_path, spec), url=service.url))
    wait_for(lambda: "end" in run_tfctl(home, "logs", "tfctl-escapes", "--task", "worker:0",
                                        url=service.url).stdout, 90, "the hostile output")

    escaped = (b"title\\x1b]0;PWNED\\x07 clip\\x1b]52;c;QUFBQQ==\\x07 clear\\x1b[2J "
               b"cr\\rbs\\x08nul\\x00 c1\\u009b rlo\\u202e end\n")
    raw = "title\033]0;PWNED\007 clip\033]52;c;QUFBQQ==\007 clear\033[2J cr\rbs\010nul\000 c1\u009b rlo\u202e end\n"
    screen = run_on_pty(home, service, "logs", "tfctl-escapes", "--task", "worker:0")
    assert escaped in screen, screen
    assert b"\033" not in screen and b"\x9b" not in screen and "\u202e".encode() not in screen, screen
    # --raw on a terminal, and a pipe: the bytes as the program wrote them.
    raw_screen = run_on_pty(home, service, "logs", "tfctl-escapes", "--task", "worker:0", "--raw")
    assert raw.encode() in raw_screen, raw_screen
    piped = subprocess.run([TFCTL, "logs", "tfctl-escapes", "--task", "worker:0"],
                           env=tfctl_env(home, service.url), stdout=subprocess.PIPE, check=True).stdout
    assert raw.encode() in piped, piped

    # -f on a terminal: escaped as it comes, until the attempt ends.
    follower = threading.Thread(target=lambda: (time.sleep(3), ok(run_tfctl(home, "cancel", "tfctl-escapes",
                                                                            url=service.url))))
    follower.start()
    followed = run_on_pty(home, service, "logs", "tfctl-escapes", "--task", "worker:0", "-f")
    follower.join()
    assert escaped in followed and b"\033" not in followed, followed

    # status, events and metrics on a terminal carry no control byte at all,
    # and -o json is exact JSON. (Of this cancelled program none holds its
    # output: a failed task's detail does, in the test below.)
    for args in (["status", "tfctl-escapes"], ["events", "tfctl-escapes"], ["metrics", "tfctl-escapes"]):
        shown = run_on_pty(home, service, *args)
        assert not RAW_CONTROLS.search(shown), (args, shown)
    view = json.loads(run_on_pty(home, service, "status", "tfctl-escapes", "-o", "json"))
    assert view["id"] == "tfctl-escapes" and view["state"] == "cancelled", view


def test_a_failed_tasks_detail_reaches_the_terminal_escaped(service, home, tmp_path):
    """A failed task's detail is the last error line of its program's own
    output (agent/exit_cause.h), and the experiment's reason and events say
    it: so a program chooses what tfctl prints there. Every unsafe character
    in it (C0 and C1 controls, bidi and invisible ones) is one space by the
    time it is stored, a run of them one space (service/core/wording.h,
    ExitDetail: issue 41), so none reaches a terminal in status, events or
    the list, and -o json has the stored text."""
    line = (r"ValueError: title\033]0;PWNED\007 clear\033[2J c1\302\233[31m rlo\342\200\256 "
            r"lri\342\201\246 end")
    program = (r"printf 'Traceback (most recent call last):\n  File \"train.py\", line 1, in <module>\n" +
               line + r"\n' >&2; exit 1")
    spec = hello_spec("tfctl-detail", program, 1)
    spec["restart"] = {"max_restarts": 0}
    ok(run_tfctl(home, "submit", write_yaml(tmp_path, spec), url=service.url))

    def failed():
        e = status_json(home, service, "tfctl-detail")
        return e if e["state"] == "failed" and e["tasks"] and e["tasks"][0]["detail"] else None
    view = wait_for(failed, 120, "the hostile program to fail with its detail")
    # As stored: ESC, BEL, the C1 CSI, RLO and LRI each a space, and a
    # space after one kept once. (A CR would end the line for exit_cause's
    # pattern, and no detail would be taken.)
    stored = "ValueError: title ]0;PWNED clear [2J c1 [31m rlo lri end"
    assert view["tasks"][0]["detail"] == stored, view["tasks"]
    assert stored in view["reason"], view["reason"]

    for args in (["status", "tfctl-detail"], ["events", "tfctl-detail"], ["list"]):
        shown = run_on_pty(home, service, *args)
        assert not RAW_CONTROLS.search(shown), (args, RAW_CONTROLS.findall(shown), shown)
        if args[0] != "list":  # the list's reason column is cut short
            assert stored.encode() in shown, (args, shown)
    # The task's own line in status: its detail in full.
    status = run_on_pty(home, service, "status", "tfctl-detail")
    assert b"worker:0: " + stored.encode() + b"\n" in status, status


def test_resume_with_a_raised_time_limit_and_step_count_trains_on_to_the_new_target(
        service, slurm_cluster, home, tmp_path):
    # linear_ps as its README shows it, with a lower first target.
    template = open(os.path.join(REPO, "examples", "linear_ps", "experiment.json.in")).read()
    spec = json.loads(template.replace("@REPO@", REPO))
    spec["command"][-1] = "100"
    path = tmp_path / "linear-ps.json"
    path.write_text(json.dumps(spec))
    out = ok(run_tfctl(home, "submit", str(path), "--id", "tfctl-raise", "--wait", url=service.url, timeout=300))
    assert out.rstrip().splitlines()[-1].startswith("tfctl-raise succeeded"), out
    first = status_json(home, service, "tfctl-raise")["checkpoint"]["step"]
    assert 100 <= first < 200, first

    # A change of the cluster's shape would not fit the checkpoint: refused,
    # naming the field, and nothing is stored or submitted.
    # (503 while the last job is still finishing.)
    shape = {"changes": {"cluster": {"ps": 1, "worker": 4}, "resources": {"nodes": 3}}}
    status, body = wait_for(lambda: (lambda r: r if r[0] != 503 else None)(
        service.post("/experiments/tfctl-raise/resume", shape)), 60, "the last job to leave Slurm")
    assert status == 400, body
    fields = body["error"]["fields"]
    assert [f["field"] for f in fields] == ["cluster.ps"], body
    assert "cannot change on resume" in fields[0]["reason"], body
    view = service.experiment("tfctl-raise")
    assert len(view["attempts"]) == 1 and view["spec_revision"] == 1 and view["state"] == "succeeded", view
    assert view["spec"]["cluster"]["ps"] == 2

    # A higher --steps (a new command) and a longer time limit.
    new_command = ["python3", f"{REPO}/examples/linear_ps/train.py", "--steps", "200"]
    out = ok(run_tfctl(home, "resume", "tfctl-raise", "--time-limit", "00:20:00", "--set",
                       "restart.max_restarts=5", "--wait", "--", *new_command, url=service.url, timeout=300))
    assert re.search(rf"^resumed tfctl-raise: attempt 2, Slurm job \d+, from checkpoint step {first}, "
                     r"spec revision 2$", out, re.M), out
    assert out.rstrip().splitlines()[-1].startswith("tfctl-raise succeeded"), out
    view = status_json(home, service, "tfctl-raise")
    assert view["checkpoint"]["step"] >= 200, view["checkpoint"]
    assert [(a["number"], a["spec_revision"]) for a in view["attempts"]] == [(1, 1), (2, 2)]
    assert view["spec_revision"] == 2
    assert view["spec"]["command"] == new_command
    assert view["spec"]["resources"]["time_limit"] == "00:20:00"
    assert view["spec"]["restart"]["max_restarts"] == 5
    changes = view["spec_revisions"][1]["changes"]
    assert 'resources.time_limit "00:10:00" -> "00:20:00"' in changes and "command" in changes, changes
    job = view["attempts"][1]["slurm_job_id"]
    limit = scontrol_job(slurm_cluster, job).get("TimeLimit")
    assert limit in (None, "00:20:00"), limit  # None: Slurm has forgotten the job already
    sbatch = urllib.request.urlopen(f"{service.url}/experiments/tfctl-raise/sbatch?attempt=2").read().decode()
    assert "#SBATCH --time=00:20:00" in sbatch, sbatch
    logs = ok(run_tfctl(home, "logs", "tfctl-raise", "--task", "worker:1", url=service.url))
    assert f"start_step={first}" in logs, logs
    done = [int(m) for m in re.findall(r"^linear_ps: done step=(\d+)", logs, re.M)]
    assert done and done[-1] >= 200, logs


def test_delete_frees_the_id_removes_the_files_and_never_follows_a_symlink_out(service, home, tmp_path):
    running = hello_spec("tfctl-del", then="exec sleep 300", workers=1)
    ok(run_tfctl(home, "submit", write_yaml(tmp_path, running), url=service.url))
    service.wait_state("tfctl-del", ("starting", "running"))
    # Open: refused, naming its state, and nothing is removed.
    r = run_tfctl(home, "delete", "tfctl-del", "--files", url=service.url)
    assert r.returncode == 1 and "cancel it first" in r.stderr and r.stdout == "", r
    assert re.search(r"is (starting|running)", r.stderr), r.stderr
    model_dir = status_json(home, service, "tfctl-del")["model_dir"]
    assert os.path.isdir(model_dir)
    ok(run_tfctl(home, "cancel", "tfctl-del", url=service.url))
    service.wait_state("tfctl-del", "cancelled")

    # What a user's program may leave in its directory: links out of the
    # output root, to a directory and to a file, which must survive.
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "keep" / "precious").write_text("mine")
    os.symlink(outside / "keep", os.path.join(model_dir, "to-dir"))
    os.symlink(outside / "keep" / "precious", os.path.join(model_dir, "to-file"))
    with open(os.path.join(model_dir, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "model.ckpt-5"\n')

    deleted = wait_for(lambda: (lambda r: r if r.returncode == 0 or "still finishing" not in r.stderr else None)(
        run_tfctl(home, "delete", "tfctl-del", "--files", url=service.url)), 60, "the job to leave Slurm")
    out = ok(deleted)
    assert re.match(rf"^deleted tfctl-del and its files \({re.escape(model_dir)}, \d+ entries\)$", out), out
    assert not os.path.lexists(model_dir)
    assert (outside / "keep" / "precious").read_text() == "mine", "a symlink's target is left alone"
    parent = os.path.dirname(model_dir)
    assert not [n for n in os.listdir(parent) if "tfctl-del" in n], os.listdir(parent)
    r = run_tfctl(home, "status", "tfctl-del", url=service.url)
    assert r.returncode == 1 and "tfctl-del" in r.stderr, r
    # The id is free again.
    ok(run_tfctl(home, "submit", write_yaml(tmp_path, hello_spec("tfctl-del", workers=1), "again.yaml"), "--wait",
                 url=service.url))
    assert status_json(home, service, "tfctl-del")["attempt"] == 1
    # A mistyped id of one's own: the 404 suggests it.
    r = run_tfctl(home, "status", "tfctl-dle", url=service.url)
    assert r.returncode == 1 and "did you mean 'tfctl-del'?" in r.stderr, r
    r = run_tfctl(home, "logs", "tfctl-dl", url=service.url)
    assert r.returncode == 1 and "did you mean 'tfctl-del'?" in r.stderr, r
    # Without --files the record goes and the files stay.
    deleted = wait_for(lambda: (lambda r: r if r.returncode == 0 or "still finishing" not in r.stderr else None)(
        run_tfctl(home, "delete", "tfctl-del", url=service.url)), 60, "the job to leave Slurm")
    assert ok(deleted) == "deleted tfctl-del\n"
    assert os.path.isdir(model_dir)


def test_delete_right_after_the_end_waits_for_the_slurm_job_to_leave(service_factory, home, tmp_path):
    # Slurm polled every 10 s: when --wait returns (the tasks decided the
    # outcome) the service has not yet seen the job end, and keeps it.
    service = service_factory(extra_args=["--poll-interval-ms", "10000"])
    ok(run_tfctl(home, "submit", write_yaml(tmp_path, hello_spec("tfctl-del-now", workers=1)), "--wait",
                 url=service.url))
    r = run_tfctl(home, "delete", "tfctl-del-now", "--files", url=service.url)
    out = ok(r)
    assert re.search(r"^tfctl: experiment 'tfctl-del-now' has ended but its Slurm job \d+ is still finishing; "
                     r"retry in a few seconds; waiting for it \(up to 60 s\)$", r.stderr, re.M), r.stderr
    assert out.startswith("deleted tfctl-del-now and its files ("), out
    assert run_tfctl(home, "status", "tfctl-del-now", url=service.url).returncode == 1


def run_all_on_pty(home, args, cwd=None, url=None, timeout=60):
    """tfctl with stdout and stderr on one terminal (a pty): (exit code, bytes seen)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([TFCTL.encode(), *args], env=tfctl_env(home, url), stdout=follower,
                            stderr=follower, cwd=cwd)
    os.close(follower)
    try:
        screen = read_terminal(leader, proc, timeout)
        code = proc.wait(timeout=timeout)
    finally:
        proc.kill()
        os.close(leader)
    return code, screen.replace(b"\r\n", b"\n")


def test_text_that_is_not_utf8_is_refused_naming_the_field_not_an_abort(home, tmp_path):
    """Issue 41, point 9: tfctl aborted (SIGABRT, exit 134: nlohmann's
    type_error 316) on a byte that is not UTF-8 in a spec file, in --workdir,
    in an argument after --, or in the name of the directory it runs from.
    Each is now an error naming the field, with the byte shown escaped, and
    no raw byte reaches the terminal."""
    url = f"http://127.0.0.1:{unused_port()}"  # refused before anything is sent
    spec = tmp_path / "latin1.yaml"
    spec.write_bytes(b"id: latin1\ncommand: [python3, caf\xe9.py]\ncluster: {worker: 1}\n")
    os.makedirs(os.fsencode(tmp_path) + b"/dir-\xe9")
    cases = [
        ("a spec file", [b"submit", str(spec).encode()], None, b"command[1]"),
        ("--workdir", [b"submit", b"--workers", b"1", b"--workdir", b"/tmp/caf\xe9", b"--",
                       b"python3", b"x.py"], None, b"workdir"),
        ("an argument after --", [b"submit", b"--workers", b"1", b"--", b"python3", b"caf\xe9.py"], None,
         b"command[1]"),
        ("the directory it runs from", [b"submit", b"--workers", b"1", b"--", b"python3", b"x.py"],
         os.fsencode(tmp_path) + b"/dir-\xe9", b"workdir"),
    ]
    for what, args, cwd, field in cases:
        code, screen = run_all_on_pty(home, args, cwd=cwd, url=url)
        assert code == 1, (what, code, screen)
        assert field + b" is not valid UTF-8 (byte 0xE9" in screen, (what, screen)
        assert b"\\xe9" in screen, (what, screen)
        assert b"\xe9" not in screen, (what, "a raw byte reached the terminal", screen)
