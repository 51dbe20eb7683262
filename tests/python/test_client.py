"""The Client's logic against a scripted HTTP server in this process: the
requests it makes, how it reads answers and errors, waiting, following logs,
retrying a resume while the job finishes. tests/integration/test_python_client.py
runs it against a real tfslurmd and Slurm."""
import http.server
import io
import json
import threading
import urllib.parse

import pytest

import tfslurm
from tfslurm import errors

T0 = "2026-11-21T23:22:02.123Z"


def experiment(id="e1", state="running", events=(), attempt=1, checkpoint=None, **more):
    doc = {"id": id, "owner": "alice", "state": state, "reason": f"{state} now", "attempt": attempt,
           "restarts": 0, "model_dir": "/out/" + id, "mem_per_task_mb": 2000, "mem_explanation": "auto",
           "checkpoint": checkpoint, "created_at": T0, "updated_at": T0, "next_attempt_at": None,
           "slurm_job_id": 7, "nodes": "node1", "slurm_state": "RUNNING", "excluded_nodes": [],
           "spec": {"id": id, "command": ["python3", "train.py"], "framework": "tensorflow",
                    "resources": {"nodes": 1, "mem_per_task_mb": "auto"}, "restart": {"on": ["timeout"]},
                    "future_field": {"a": 1}},
           "spec_revision": 1, "spec_revisions": [{"revision": 1, "created_at": T0, "changes": ""}],
           "attempts": [{"number": 1, "slurm_job_id": 7, "job_name": "tfx-e1-a1", "state": "running",
                         "slurm_state": "RUNNING", "end_reason": "", "reason": "", "nodes": "node1",
                         "start_step": None, "exit_code": 0, "in_place": False, "spec_revision": 1,
                         "submitted_at": T0, "started_at": T0, "ended_at": None}],
           "tasks": [{"proc_id": 0, "role": "worker", "index": 0, "node": "node1", "local_rank": 0,
                      "address": "node1:1", "component": 0, "state": "running", "exit_code": None,
                      "signal": None, "detail": "", "restarts": 0, "registered_at": T0, "ended_at": None,
                      "heartbeat_age_s": 0.5}],
           "tasks_total": 1, "spares": [], "task_counts": {"worker": {"total": 1, "registered": 1, "running": 1, "done": 0,
                                                    "failed": 0}},
           "events": [{"id": i + 1, "at": T0, "attempt": 1, "what": w, "why": y} for i, (w, y) in
                      enumerate(events)],
           "a_newer_service_field": True}
    doc.update(more)
    return doc


def metrics(id="e1", points=((10, 0.5, 1), (20, 0.25, 1))):
    return {"experiment_id": id, "limits": {"points_per_tag": 1000, "tags": 100},
            "tags": [{"tag": "loss", "points": len(points), "reported": len(points),
                      "last": {"step": points[-1][0], "value": points[-1][1], "wall_time": 1.0e9,
                               "attempt": points[-1][2]}}],
            "series": [{"tag": "loss", "step": [p[0] for p in points], "value": [p[1] for p in points],
                        "wall_time": [1.0e9 + p[0] for p in points], "attempt": [p[2] for p in points]}],
            "steps_per_second": None, "tensorboard": {"logdir": "/m", "command": "tensorboard --logdir /m"}}


class Fake:
    """The server's script: handlers by (method, path), each answering (status, body[, headers])."""

    def __init__(self):
        self.routes = {}
        self.requests = []

    def on(self, method, path, *answers):
        self.routes[(method, path)] = list(answers)

    def answer(self, method, path):
        answers = self.routes.get((method, path))
        if not answers:
            return 404, {"error": {"code": "not_found", "message": f"no route for {method} {path}",
                                   "fields": [], "retryable": False}}
        return answers.pop(0) if len(answers) > 1 else answers[0]


@pytest.fixture
def fake():
    script = Fake()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def handle_one(self, method):
            parsed = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            script.requests.append((method, self.path, dict(self.headers), body))
            answer = script.answer(method, parsed.path)
            status, payload = answer[0], answer[1]
            headers = answer[2] if len(answer) > 2 else {}
            if callable(payload):
                payload = payload(parsed)
            if isinstance(payload, list):  # chunks of a streamed body
                self.send_response(status)
                self.send_header("Transfer-Encoding", "chunked")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                for chunk in payload:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
                return
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.handle_one("GET")

        def do_POST(self):
            self.handle_one("POST")

        def do_DELETE(self):
            self.handle_one("DELETE")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    script.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield script
    server.shutdown()
    server.server_close()


def client(fake, token="tfs_t"):
    return tfslurm.Client(fake.url, token, config_path="")


def test_submit_sends_the_spec_and_reads_the_experiment(fake, tmp_path):
    fake.on("POST", "/experiments", (201, experiment("typed")))
    c = client(fake)
    spec = tfslurm.ExperimentSpec(command=["python3", "train.py"], resources=tfslurm.Resources(nodes=1))
    e = c.submit(spec, id="typed")
    method, path, headers, body = fake.requests[-1]
    assert (method, path) == ("POST", "/experiments")
    assert json.loads(body) == {"command": ["python3", "train.py"], "resources": {"nodes": 1}, "id": "typed"}
    assert headers["Authorization"] == "Bearer tfs_t"
    assert e.id == "typed" and e.state == "running" and e.tasks[0].name == "worker:0"
    assert e.spec.restart.on == ["timeout"] and e.spec.resources.mem_per_task_mb == "auto"
    assert e.attempts[0].submitted_at.year == 2026 and e.attempts[0].submitted_at.tzinfo is not None
    assert e.task_counts["worker"].running == 1
    assert repr(e) == "Experiment(id='typed', state='running', attempt=1, checkpoint_step=None, " \
                      "reason='running now')"
    # From a YAML file, with the id given.
    (tmp_path / "s.yaml").write_text("command: [python3, train.py]\nresources: {time_limit: 00:10:00}\n")
    c.submit(str(tmp_path / "s.yaml"), id="yaml-1")
    assert json.loads(fake.requests[-1][3]) == {"command": ["python3", "train.py"],
                                                "resources": {"time_limit": "00:10:00"}, "id": "yaml-1"}


def test_a_refused_spec_raises_with_every_field(fake):
    fake.on("POST", "/experiments", (400, {"error": {
        "code": "invalid_argument", "message": "the experiment spec has 1 invalid field", "retryable": False,
        "fields": [{"field": "resources.nodes", "reason": "must be from 1 to 10000, got 0"}]}}))
    with pytest.raises(tfslurm.InvalidArgument) as raised:
        client(fake).submit({"command": ["x"], "resources": {"nodes": 0}})
    f = raised.value.fields[0]
    assert (f.field, f.value, f.allowed) == ("resources.nodes", "0", "from 1 to 10000")


def test_ids_are_encoded_into_paths(fake):
    fake.on("GET", "/experiments/a%2Fb%3Fc", (200, experiment("a/b?c")))
    assert client(fake).get("a/b?c").id == "a/b?c"


def test_get_asks_for_a_page_of_tasks(fake):
    fake.on("GET", "/experiments/e1", (200, experiment(tasks_total=16384)))
    e = client(fake).get("e1")
    assert fake.requests[-1][1] == "/experiments/e1" and e.tasks_total == 16384
    fake.on("GET", "/experiments/e1?task_state=failed&tasks_offset=100&tasks_limit=50", (200, experiment()))
    client(fake).get("e1", task_state="failed", tasks_offset=100, tasks_limit=50)
    assert fake.requests[-1][1] == "/experiments/e1?task_state=failed&tasks_offset=100&tasks_limit=50"


def test_list_passes_states_and_reads_the_page(fake):
    summary = {k: v for k, v in experiment().items() if k in (
        "id", "owner", "state", "reason", "attempt", "restarts", "model_dir", "mem_per_task_mb",
        "mem_explanation", "checkpoint", "created_at", "updated_at", "next_attempt_at", "slurm_job_id", "nodes")}
    fake.on("GET", "/experiments", (200, {"experiments": [summary], "total": 9, "limit": 1, "offset": 0}))
    page = client(fake).list(["running", "queued"], limit=1)
    assert fake.requests[-1][1] == "/experiments?state=running%2Cqueued&limit=1&offset=0"
    assert page.total == 9 and [e.id for e in page] == ["e1"] and page.experiments[0].task_counts is None


def test_an_answer_of_the_wrong_shape_names_the_field(fake):
    bad = experiment()
    bad["attempts"][0]["number"] = "one"
    fake.on("GET", "/experiments/e1", (200, bad))
    with pytest.raises(tfslurm.ProtocolError, match=r"Experiment.attempts\[0\].number: expected an integer"):
        client(fake).get("e1")


def test_unreachable_names_the_url_and_where_it_came_from():
    c = tfslurm.Client("http://127.0.0.1:9", config_path="")
    with pytest.raises(tfslurm.ServiceUnreachable, match=r"cannot reach tfslurmd at http://127.0.0.1:9 "
                                                         r"\(from url=\): could not connect"):
        c.get("x")


def test_a_bad_token_says_where_it_came_from(fake, monkeypatch):
    fake.on("GET", "/experiments/e1", (401, {"error": {"code": "unauthenticated", "message": "unknown token",
                                                       "fields": [], "retryable": False}}))
    monkeypatch.setenv("TFSLURM_TOKEN", "tfs_bad")
    with pytest.raises(tfslurm.Unauthenticated, match=r"unknown token \(the token came from TFSLURM_TOKEN\)"):
        tfslurm.Client(fake.url, config_path="").get("e1")


def test_without_a_token_a_munge_credential_is_asked_for(fake, monkeypatch):
    from tfslurm import _munge
    seen = []
    monkeypatch.setattr(_munge, "encode", lambda data, socket="": seen.append((data, socket)) or "CRED")
    fake.on("GET", "/experiments/e1", (200, experiment()))
    tfslurm.Client(fake.url, "", munge_socket="/run/m", config_path="").get("e1")
    assert fake.requests[-1][2]["Authorization"] == "MUNGE CRED"
    assert seen == [(b"tfslurm/1 GET /experiments/e1", "/run/m")]


def test_a_munge_failure_is_said_on_the_401(fake, monkeypatch):
    from tfslurm import _munge

    def fail(data, socket=""):
        raise _munge.MungeError("munged at /run/m made no credential: Socket communication error")
    monkeypatch.setattr(_munge, "encode", fail)
    fake.on("GET", "/experiments/e1", (401, {"error": {"code": "unauthenticated", "fields": [],
                                                       "message": "this request needs a token or a MUNGE "
                                                                  "credential", "retryable": False}}))
    with pytest.raises(tfslurm.Unauthenticated, match=r"no token is set, and munged at /run/m made no "
                                                      r"credential: Socket communication error"):
        tfslurm.Client(fake.url, "", config_path="").get("e1")
    assert "Authorization" not in fake.requests[-1][2]


def test_resume_sends_the_changes_and_retries_while_the_job_finishes(fake):
    finishing = {"error": {"code": "unavailable", "message": "its Slurm job is still finishing", "fields": [],
                           "retryable": True}}
    fake.on("POST", "/experiments/e1/resume", (503, finishing), (503, finishing), (202, experiment(attempt=2)))
    e = client(fake).resume("e1", time_limit="00:20:00", command=["python3", "train.py", "--steps", "400"],
                            set={"restart.max_restarts": 5}, env={"LR": None})
    assert e.attempt == 2
    resumes = [json.loads(r[3]) for r in fake.requests if r[1] == "/experiments/e1/resume"]
    assert len(resumes) == 3
    assert resumes[-1] == {"changes": {"restart": {"max_restarts": 5}, "command": ["python3", "train.py", "--steps",
                                                                                  "400"],
                                       "resources": {"time_limit": "00:20:00"}, "env": {"LR": None}}}
    fake.on("POST", "/experiments/e2/resume", (503, finishing))
    with pytest.raises(tfslurm.Unavailable):
        client(fake).resume("e2", retry_for=0)


def test_delete_with_files(fake):
    fake.on("POST", "/experiments/e1/delete", (200, {"id": "e1", "deleted": True, "files_removed_from": "/o/e1",
                                                     "entries_removed": 20, "model_dir_kept": ""}))
    d = client(fake).delete("e1", files=True)
    assert fake.requests[-1][1] == "/experiments/e1/delete?files=true"
    assert fake.requests[-1][3] == b"{}" and d.entries_removed == 20


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch):
    import tfslurm.client as client_module
    monkeypatch.setattr(client_module, "POLL_INTERVAL_S", 0.01)


def test_wait_follows_events_to_the_end(fake):
    events = [("submitted", "Slurm job 7"), ("state", "queued -> running"), ("checkpoint", "step 10"),
              ("state", "running -> succeeded: every worker exited 0")]
    fake.on("GET", "/experiments/e1", (200, experiment(events=events[:2])), (200, experiment(events=events[:3])),
            (200, experiment(state="succeeded", events=events, checkpoint={"step": 20, "path": "/m/c-20"})))
    fake.on("GET", "/experiments/e1/metrics", (200, metrics()))
    out = io.StringIO()
    seen = []
    e = client(fake).wait("e1", out=out, tag="loss", on_event=lambda ev: seen.append(ev.what))
    assert e.succeeded and seen == ["submitted", "state", "checkpoint", "state"]
    lines = out.getvalue().splitlines()
    assert lines == ["2026-11-21T23:22:02Z  attempt 1  submitted: Slurm job 7",
                     "2026-11-21T23:22:02Z  attempt 1  state: queued -> running",
                     "2026-11-21T23:22:02Z  attempt 1  checkpoint: step 10",
                     "2026-11-21T23:22:02Z  attempt 1  state: running -> succeeded: every worker exited 0"]


def test_wait_on_a_terminal_redraws_a_status_line(fake):
    fake.on("GET", "/experiments/e1", (200, experiment(state="failed", events=[("state", "x\x1b[2Jy")])))
    fake.on("GET", "/experiments/e1/metrics", (200, metrics()))

    class Tty(io.StringIO):
        def isatty(self):
            return True
    out = Tty()
    with pytest.raises(tfslurm.ExperimentFailed, match="e1 failed: failed now"):
        client(fake).wait("e1", out=out, tag="loss", check=True)
    text = out.getvalue()
    assert "state: x\\x1b[2Jy\n" in text, "what the service sent is escaped"
    assert "e1  failed  attempt 1  loss 0.25 at step 20" in text and text.endswith("\n")


def test_wait_times_out_leaving_the_experiment(fake):
    fake.on("GET", "/experiments/e1", (200, experiment()))
    with pytest.raises(tfslurm.WaitTimeout, match="e1 has not ended after 0.05 s; it goes on"):
        client(fake).wait("e1", timeout=0.05, progress=False)


def test_logs_and_follow(fake):
    fake.on("GET", "/experiments/e1/logs", (200, b"hello\n"))
    c = client(fake)
    assert c.logs("e1", "worker:0", tail=5) == "hello\n"
    assert fake.requests[-1][1] == "/experiments/e1/logs?task=worker%3A0&tail=5"
    # Follow: two responses (the service ends each after its window), a UTF-8
    # character split between chunks, then the attempt has ended.
    fake.on("GET", "/experiments/e1/logs",
            (200, [b"one\n", b"caf\xc3"], {"X-Tfslurm-Log-Offset": "0"}),
            (200, [b"\xa9\n"], {"X-Tfslurm-Log-Offset": "8"}),
            (200, [], {"X-Tfslurm-Log-Offset": "10"}))
    ended = experiment(state="succeeded")
    ended["attempts"][0]["state"] = "ended"
    fake.on("GET", "/experiments/e1", (200, ended))
    assert "".join(c.follow_logs("e1", "worker:0")) == "one\ncafé\n"
    follows = [r[1] for r in fake.requests if r[1].startswith("/experiments/e1/logs") and "follow" in r[1]]
    assert follows == ["/experiments/e1/logs?task=worker%3A0&offset=0&follow=true",
                       "/experiments/e1/logs?task=worker%3A0&offset=8&follow=true",
                       "/experiments/e1/logs?task=worker%3A0&offset=10&follow=true"]


def test_metrics_as_lists(fake):
    fake.on("GET", "/experiments/e1/metrics", (200, metrics(points=((10, 0.5, 1), (20, None, 1), (20, 0.3, 2)))))
    m = client(fake).metrics("e1", ["loss"])
    assert fake.requests[-1][1] == "/experiments/e1/metrics?tag=loss"
    assert m.tag_names == ["loss"] and [p.value for p in m.points("loss")] == [0.5, None, 0.3]
    assert m.last("loss").step == 20 and m.series_of("loss").attempt == [1, 1, 2]
    with pytest.raises(KeyError, match="no tag 'acc' in e1's metrics; its tags: loss"):
        m.series_of("acc")


def test_sweeps(fake):
    trial = {"index": 1, "experiment_id": "lr-1", "params": {"arg.--lr": 0.1}, "state": "ended",
             "experiment_state": "succeeded", "reason": "", "end_reason": "succeeded", "objective": 0.01,
             "objective_step": 60, "last_step": 60, "rungs_passed": 2, "node_seconds": 30.5, "note": "",
             "started_at": T0, "ended_at": T0}
    sweep = {"id": "lr", "owner": "alice", "state": "completed", "reason": "best lr-1", "trials_total": 1,
             "created_at": T0, "updated_at": T0, "spec": {}, "objective": {"tag": "loss", "goal": "min"},
             "node_seconds": 30.5, "counts": {"ended": 1}, "best_trial": trial, "trials": [trial]}
    fake.on("POST", "/sweeps", (201, sweep))
    fake.on("GET", "/sweeps/lr", (200, sweep))
    fake.on("GET", "/experiments/lr-1", (200, experiment("lr-1", state="succeeded")))
    c = client(fake)
    s = c.submit_sweep({"id": "lr", "experiment": tfslurm.ExperimentSpec(command=["x"])})
    assert json.loads(fake.requests[-1][3]) == {"id": "lr", "experiment": {"command": ["x"]}}
    assert s.finished and s.best_trial.params == {"arg.--lr": 0.1}
    assert c.wait_sweep("lr", progress=False).best_experiment().id == "lr-1"


def test_dataframes_need_pandas_and_say_so(fake, monkeypatch):
    import sys
    fake.on("GET", "/experiments/e1/metrics", (200, metrics()))
    m = client(fake).metrics("e1")
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"a DataFrame needs pandas: pip install pandas"):
        m.to_dataframe()


def test_dataframes(fake):
    pd = pytest.importorskip("pandas")
    fake.on("GET", "/experiments/a/metrics", (200, metrics("a", ((10, 0.5, 1), (20, 0.4, 1), (20, 0.3, 2)))))
    fake.on("GET", "/experiments/b/metrics", (200, metrics("b", ((10, 0.6, 1), (30, 0.1, 1)))))
    c = client(fake)
    frame = c.metrics("a").to_dataframe()
    assert list(frame.columns) == ["experiment_id", "tag", "attempt", "step", "value", "wall_time"]
    assert len(frame) == 3 and str(frame["wall_time"].dt.tz) == "UTC"
    side = c.compare(["a", "b"], "loss")
    assert list(side.columns) == ["a", "b"] and list(side.index) == [10, 20, 30]
    assert side.loc[20, "a"] == 0.3, "a step a restart redid keeps the latest attempt's value"
    assert pd.isna(side.loc[30, "a"]) and side.loc[30, "b"] == 0.1


def test_an_https_service_is_verified_against_the_ca_file_given(tmp_path, monkeypatch):
    # TLS as a later tfslurmd serves it: the client verifies the service's
    # certificate against cacert= (a site's CA), or the system's CAs.
    import shutil
    import ssl
    import subprocess
    if not shutil.which("openssl"):
        pytest.fail("the openssl command is missing (Debian's openssl package)")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    version = {"tfslurm": {"version": "0.1.0", "commit": "x"}, "slurm": {"libslurm": "22.05.8", "slurmctld": None}}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            data = json.dumps(version).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        url = f"https://127.0.0.1:{server.server_address[1]}"
        assert tfslurm.Client(url, "t", cacert=str(cert), config_path="").version().tfslurm.version == "0.1.0"
        with pytest.raises(tfslurm.ServiceUnreachable,
                           match=r"cannot verify tfslurmd at https://127\.0\.0\.1:\d+: self.signed certificate\. "
                                 r"Its certificate was checked against this machine's trust store; give the "
                                 r"service's CA as cacert=, TFSLURM_CACERT"):
            tfslurm.Client(url, "t", config_path="").version()
        other = tmp_path / "other.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", str(tmp_path / "other.key"), "-out", str(other), "-days", "1", "-subj", "/CN=x"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with pytest.raises(tfslurm.ServiceUnreachable, match=r"checked against the CA file .*other\.pem \(from "
                                                              r"TFSLURM_CACERT\)"):
            monkeypatch.setenv("TFSLURM_CACERT", str(other))
            tfslurm.Client(url, "t", config_path="").version()
    finally:
        server.shutdown()
        server.server_close()


def test_waiting_for_a_resumed_experiment_shows_its_new_attempt(fake):
    doc = experiment(state="succeeded", attempt=2)
    doc["events"] = [{"id": 1, "at": T0, "attempt": 1, "what": "state", "why": "old attempt"},
                     {"id": 2, "at": T0, "attempt": 2, "what": "state", "why": "resumed"}]
    fake.on("GET", "/experiments/e1", (200, doc))
    out = io.StringIO()
    client(fake).wait("e1", out=out)
    assert out.getvalue() == "2026-11-21T23:22:02Z  attempt 2  state: resumed\n"
    out = io.StringIO()
    client(fake).wait("e1", out=out, after_event=0)
    assert len(out.getvalue().splitlines()) == 2
