"""Issue 7: tokens and ownership, agents bound to their attempt's secret,
and limits that keep bad input and slow clients from hurting the service."""
import json
import os
import resource
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import BIN, wait_for


def token(service, user, admin=False):
    args = [os.path.join(BIN, "tfslurmd"), "--db", service.db, "token", "create", "--user", user]
    out = subprocess.run(args + (["--admin"] if admin else []), stdout=subprocess.PIPE, text=True, check=True)
    return out.stdout.strip()


def as_user(service, tok):
    def call(method, path, body=None):
        headers = {"Authorization": f"Bearer {tok}"} if tok else {}
        # The script and the logs are text, everything else JSON.
        raw = path.endswith(("/sbatch", "/logs"))
        status, reply = service.request(method, path, body, headers, raw=raw)
        if raw and status >= 400:
            reply = json.loads(reply)
        return status, reply
    return call


SLEEPER = {"command": ["sleep", "600"], "cluster": {"worker": 1},
           "resources": {"nodes": 1, "tasks_per_node": 1, "time_limit": "00:05:00"},
           "checkpoint": {"signal_grace_s": 10}, "restart": {"max_restarts": 0}}


@pytest.fixture
def secured(service_factory):
    service = service_factory(auth=True)
    users = {"alice": token(service, "alice"), "bob": token(service, "bob"),
             "root": token(service, "root", admin=True)}
    return service, {name: as_user(service, t) for name, t in users.items()}


def test_authorization_matrix(secured):
    service, u = secured
    alice, bob, admin, nobody = u["alice"], u["bob"], u["root"], as_user(service, None)
    status, body = alice("POST", "/experiments", dict(SLEEPER, id="sec-alice"))
    assert status == 201 and body["owner"] == "alice", body

    # No token, or a bad one: 401 everywhere but /healthz.
    for method, path in [("GET", "/experiments"), ("GET", "/experiments/sec-alice"),
                         ("GET", "/experiments/sec-alice/sbatch"), ("GET", "/experiments/sec-alice/logs"),
                         ("DELETE", "/experiments/sec-alice"), ("POST", "/experiments/sec-alice/resume"),
                         ("POST", "/experiments/sec-alice/delete"), ("POST", "/experiments")]:
        status, body = nobody(method, path, {} if method == "POST" else None)
        assert status == 401, (method, path, body)
        assert body["error"]["code"] == "unauthenticated"
    assert as_user(service, "tfs_forged")("GET", "/experiments")[0] == 401
    assert nobody("GET", "/healthz")[0] == 200

    # Bob: cannot see, read, cancel, resume or read the logs of alice's
    # experiment, and is told exactly what a missing id would tell him.
    assert bob("GET", "/experiments")[1]["experiments"] == []
    for method, path in [("GET", "/experiments/sec-alice"), ("GET", "/experiments/sec-alice/sbatch"),
                         ("GET", "/experiments/sec-alice/logs"), ("GET", "/experiments/sec-alice/metrics"),
                         ("DELETE", "/experiments/sec-alice"), ("POST", "/experiments/sec-alice/resume"),
                         ("POST", "/experiments/sec-alice/delete"),
                         ("POST", "/experiments/sec-alice/delete?files=true")]:
        status, body = bob(method, path, {} if method == "POST" else None)
        missing_status, missing = bob(method, path.replace("sec-alice", "sec-nobody"),
                                      {} if method == "POST" else None)
        assert status == 404, (method, path, body)
        assert json.dumps(body).replace("sec-alice", "ID") == json.dumps(missing).replace("sec-nobody", "ID"), \
            (method, path, body, missing)
        assert missing_status == 404

    # Admin sees all and may cancel.
    assert [e["id"] for e in admin("GET", "/experiments")[1]["experiments"]] == ["sec-alice"]
    assert admin("GET", "/experiments/sec-alice")[0] == 200
    assert alice("GET", "/experiments/sec-alice/sbatch")[0] == 200
    assert admin("DELETE", "/experiments/sec-alice")[0] == 200
    # Ended, it is still not bob's to delete.
    wait_for(lambda: alice("GET", "/experiments/sec-alice")[1]["state"] == "cancelled", 60, "the cancel")
    assert bob("POST", "/experiments/sec-alice/delete?files=true", {})[0] == 404
    assert alice("GET", "/experiments/sec-alice")[0] == 200


def test_no_auth_is_refused_off_loopback(tmp_path):
    out = subprocess.run([os.path.join(BIN, "tfslurmd"), "--listen", "0.0.0.0:0", "--no-auth", "--db",
                          str(tmp_path / "db")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=20)
    assert out.returncode == 2 and "only allowed on a loopback address" in out.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the refusal is for a tfslurmd run as root")
def test_root_without_site_is_refused_unless_allowed(tmp_path):
    """Issue 31: as root without --site every token holder's program ran as uid 0, with no warning."""
    args = [os.path.join(BIN, "tfslurmd"), "--listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0",
            "--db", str(tmp_path / "db"), "--output-root", str(tmp_path / "out")]
    out = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=20)
    assert out.returncode == 2, out.stdout
    assert "running as root without --site" in out.stdout and "--allow-root" in out.stdout, out.stdout
    assert "docs/site-deployment.md" in out.stdout, out.stdout
    assert not (tmp_path / "out").exists() and not (tmp_path / "db").exists(), "refused before touching anything"


def test_an_attempt_1_secret_cannot_act_on_attempt_2(service_factory, tmp_path):
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(secrets, 0o777)
    wrapper = tmp_path / "agent"
    wrapper.write_text("#!/bin/sh\n# Keeps each attempt's secret for the test, then runs the real agent.\n"
                       f'printf %s "$TFSLURM_SECRET" > {secrets}/job-"$SLURM_JOB_ID"\n'
                       f'exec {os.path.join(BIN, "tfslurm-agent")} "$@"\n')
    os.chmod(wrapper, 0o755)
    service = service_factory(["--agent-path", str(wrapper)])
    spec = dict(SLEEPER, id="sec-secret", command=["true"])
    assert service.post("/experiments", spec)[0] == 201
    service.wait_state("sec-secret", "succeeded", timeout=120)
    first_secret_files = list(secrets.iterdir())
    assert len(first_secret_files) == 1
    old_secret = first_secret_files[0].read_text()
    assert len(old_secret) == 64
    wait_for(lambda: service.post("/experiments/sec-secret/resume", {})[0] == 202, 30, "resume")
    msg = {"task": {"experiment_id": "sec-secret", "attempt": 2, "secret": old_secret, "proc_id": 0},
           "register": {"node_name": "node1", "address": "x", "port": 1}}
    status, reply = service.request("POST", "/agent/v1/message?wait_s=1", msg)
    assert status == 200 and reply["refused"]["permanent"], reply
    assert "wrong attempt secret" in reply["refused"]["reason"]
    # A report with it: 401, with a WWW-Authenticate challenge as every 401.
    beat = json.dumps({"task": msg["task"], "heartbeat": {}}).encode()
    req = urllib.request.Request(service.url + "/agent/v1/message", data=beat, method="POST",
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=30)
    assert refused.value.code == 401, refused.value.read()
    assert refused.value.headers.get("WWW-Authenticate") == "Bearer"
    assert "wrong attempt secret" in json.loads(refused.value.read())["error"]["message"]
    msg["task"]["attempt"] = 1
    status, reply = service.request("POST", "/agent/v1/message?wait_s=1", msg)
    assert "not current" in reply["refused"]["reason"], reply
    status, reply = service.request("POST", "/agent/v1/message",
                                    {"task": msg["task"], "exited": {"exit_code": 0}})
    assert status == 409, reply


def peak_rss_kb(pid):
    """The process's peak resident memory (VmHWM), in kB."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def test_a_100_mb_body_is_refused_without_being_kept(service):
    # httplib reads an oversized body through and drops it (the connection
    # stays usable), then answers 413. What matters is that it is never held:
    # tfslurmd's peak memory, not a time limit (a loaded machine makes any
    # limit a flake; the time is printed).
    host, port = service.url.replace("http://", "").split(":")
    body = b"[" * (100 * 1024 * 1024)
    peak_before = peak_rss_kb(service.proc.pid)
    start = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"POST /experiments HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body))
        try:
            s.sendall(body)
        except OSError:
            pass  # the server may answer and close before taking it all
        reply = b""
        while b"resource_exhausted" not in reply:
            chunk = s.recv(65536)
            if not chunk:
                break
            reply += chunk
        reply = reply.decode(errors="replace")
    elapsed = time.monotonic() - start
    grown_kb = peak_rss_kb(service.proc.pid) - peak_before
    assert reply.startswith("HTTP/1.1 413"), reply[:200]
    assert '"resource_exhausted"' in reply
    assert grown_kb < 20 * 1024, f"tfslurmd's peak memory grew by {grown_kb} kB while refusing a 100 MB body"
    assert service.get("/healthz")[0] == 200
    print(f"100 MB body refused in {elapsed:.2f} s; tfslurmd's peak memory grew by {grown_kb} kB")


@pytest.mark.parametrize("body,needle", ids=["syntax", "types", "deep-arrays", "deep-objects", "not-object"], argvalues=[
    (b"{not json", "not valid JSON"),
    (b'{"command": 5, "cluster": "many"}', "invalid field"),
    (b"[" * 100000 + b"]" * 100000, "nests deeper than 64"),
    (b'{"a":' * 5000 + b"1" + b"}" * 5000, "nests deeper than 64"),
    (b'"just a string"', "must be a JSON object"),
])
def test_malformed_bodies_get_400(service, body, needle):
    status, reply = service.request("POST", "/experiments", body, {"Content-Type": "application/json"})
    assert status == 400, reply
    assert needle in json.dumps(reply), reply


def test_thousand_slow_connections_do_not_starve_a_normal_get(service):
    """A normal GET is answered while 1,000 requests that never finish hold
    their connections. A server with fewer threads than that would not
    answer it at all while they last, so they are kept alive (a byte every
    2 s, under the server's 10 s read timeout) for as long as the GETs take,
    and the GETs have a generous 30 s each: no time limit on a shared
    machine, only whether they are answered (latency: bench/api_latency.sh)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    host, port = service.url.replace("http://", "").split(":")

    def timed_get():
        start = time.monotonic()
        with urllib.request.urlopen(service.url + "/experiments", timeout=30) as r:
            assert r.status == 200
        return time.monotonic() - start

    slow, trickle_errors = [], []
    stop = threading.Event()

    def trickle():  # as a slow-loris does
        while not stop.wait(2):
            for s in slow:
                try:
                    s.sendall(b"a")
                except OSError as e:
                    trickle_errors.append(e)

    keeper = threading.Thread(target=trickle, daemon=True)
    try:
        for _ in range(1000):
            s = socket.create_connection((host, int(port)), timeout=10)
            s.sendall(b"GET /experiments HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # never finished
            slow.append(s)
        keeper.start()
        during = sorted(timed_get() for _ in range(10))
        stop.set()
        keeper.join()
        # Every slow request still held its connection when the GETs were
        # answered: the server had neither answered nor closed any.
        given_up = []
        for s in slow:
            s.setblocking(False)
            try:
                given_up.append(s.recv(1, socket.MSG_PEEK))
            except BlockingIOError:
                pass
        assert not given_up and not trickle_errors, (len(given_up), trickle_errors[:3])
    finally:
        stop.set()
        for s in slow:
            s.close()
    print(f"GET /experiments while 1,000 slow requests were held: {['%.3f' % d for d in during]} s")


def test_another_users_experiment_is_answered_as_a_missing_one(secured):
    """Issue 31: a 403 told bob that alice's id exists; a 409 told him its state."""
    service, u = secured
    alice, bob = u["alice"], u["bob"]
    assert alice("POST", "/experiments", dict(SLEEPER, id="leak-alice"))[0] == 201
    status, body = bob("GET", "/experiments/leak-alice")
    assert (status, body["error"]) == (404, {"code": "not_found", "message": "no experiment with id 'leak-alice'",
                                             "fields": [], "retryable": False}), body
    # Her id, posted by bob: taken, and nothing more.
    status, body = bob("POST", "/experiments", dict(SLEEPER, id="leak-alice"))
    assert status == 409 and body["error"]["code"] == "already_exists", body
    assert body["error"]["message"] == "experiment id 'leak-alice' is taken; choose another id", body
    assert "state" not in json.dumps(body) and "resume" not in json.dumps(body), body
    # Her own repost still hears its state and how to resume it.
    status, body = alice("POST", "/experiments", dict(SLEEPER, id="leak-alice"))
    assert status == 409 and "(state " in body["error"]["message"] and "resume" in body["error"]["message"], body
    assert alice("DELETE", "/experiments/leak-alice")[0] == 200


def test_sweeps_are_their_owners_and_another_users_is_answered_as_a_missing_one(secured):
    """Issue 33: a sweep and its trials are its owner's."""
    service, u = secured
    alice, bob, admin, nobody = u["alice"], u["bob"], u["root"], as_user(service, None)
    sweep = {"id": "sec-sweep", "experiment": SLEEPER, "parameters": {"env.X": {"values": [1, 2]}},
             "objective": {"tag": "loss", "goal": "min"}}
    status, body = alice("POST", "/sweeps", sweep)
    assert status == 201 and body["owner"] == "alice", body
    assert alice("GET", "/experiments/sec-sweep-1")[1]["owner"] == "alice", "a trial is its sweep's owner's"
    for method, path in [("GET", "/sweeps"), ("GET", "/sweeps/sec-sweep"), ("POST", "/sweeps/sec-sweep/cancel"),
                         ("POST", "/sweeps"), ("POST", "/sweeps/sec-sweep/delete")]:
        status, body = nobody(method, path, {} if method == "POST" else None)
        assert status == 401 and body["error"]["code"] == "unauthenticated", (method, path, body)
    assert bob("GET", "/sweeps")[1]["sweeps"] == []
    for method, path in [("GET", "/sweeps/sec-sweep"), ("POST", "/sweeps/sec-sweep/cancel"),
                         ("POST", "/sweeps/sec-sweep/delete")]:
        status, body = bob(method, path, {} if method == "POST" else None)
        missing_status, missing = bob(method, path.replace("sec-sweep", "sec-nobody"),
                                      {} if method == "POST" else None)
        assert (status, missing_status) == (404, 404), (method, path, body)
        assert json.dumps(body).replace("sec-sweep", "ID") == json.dumps(missing).replace("sec-nobody", "ID")
    assert bob("GET", "/experiments/sec-sweep-1")[0] == 404
    assert [s["id"] for s in admin("GET", "/sweeps")[1]["sweeps"]] == ["sec-sweep"]
    status, body = admin("POST", "/sweeps/sec-sweep/cancel", {})
    assert status == 200 and body["state"] == "cancelled", body


def test_invalid_utf8_in_a_query_parameter_is_a_400_naming_it(secured):
    """Issue 31: ?tag=%ff was a 500 from the scalar store's JSON writer, and not logged."""
    service, u = secured
    alice = u["alice"]
    assert alice("POST", "/experiments", dict(SLEEPER, id="utf8-alice"))[0] == 201
    for path, name in [("/experiments/utf8-alice/metrics?tag=%ff", "tag"),
                       ("/experiments/utf8-alice/metrics?tag=ok&tag=a%c3", "tag"),
                       ("/experiments/utf8-alice/logs?task=%ff", "task"),
                       ("/experiments?state=%c0%9b", "state"),
                       ("/experiments/utf8-alice?x%ff=1", "x\\xFF")]:
        status, body = alice("GET", path)
        assert status == 400, (path, body)
        assert body["error"]["code"] == "invalid_argument", (path, body)
        assert [f["field"] for f in body["error"]["fields"]] == [name], (path, body)
        assert "must be valid UTF-8" in body["error"]["fields"][0]["reason"], (path, body)
    assert alice("GET", "/experiments/utf8-alice/metrics?tag=%c3%a9")[0] == 200, "é is UTF-8"
    assert alice("DELETE", "/experiments/utf8-alice")[0] == 200


@pytest.mark.parametrize("field", ["model_dir", "workdir"])
@pytest.mark.parametrize("value", ["/tmp/x\x1b]0;TITLE\x07", "/tmp/\u009b2J", "/tmp/a\u202eb", "/tmp/a\nb"])
def test_spec_paths_refuse_control_and_bidi_characters(service, field, value):
    status, body = service.post("/experiments?dry_run=true", dict(SLEEPER, **{field: value}))
    assert status == 400, body
    fields = body["error"]["fields"]
    assert [f["field"] for f in fields] == [field], body
    assert "without control characters (C0, DEL, C1) or bidi controls" in fields[0]["reason"], body


def test_model_dir_in_another_users_experiment_is_refused(secured):
    """Issue 31: bob pointed model_dir at alice's MODEL_DIR and was shown her checkpoint."""
    service, u = secured
    alice, bob = u["alice"], u["bob"]
    root = service.output_root
    assert alice("POST", "/experiments", dict(SLEEPER, id="md-alice", command=["true"]))[0] == 201
    for model_dir in (f"{root}/md-alice", f"{root}/md-alice/sub", f"{root}/md-bob/../md-alice",
                      f"{root}//md-alice/./x/..", f"{root}/md-nobody/x", root, "/"):
        status, body = bob("POST", "/experiments", dict(SLEEPER, id="md-bob", model_dir=model_dir))
        assert status == 400, (model_dir, body)
        fields = body["error"]["fields"]
        assert [f["field"] for f in fields] == ["model_dir"], (model_dir, body)
        assert f"under the experiment's own directory {root}/md-bob" in fields[0]["reason"], (model_dir, body)
    # The refusal for alice's id and for an id nobody has are the same words.
    _, theirs = bob("POST", "/experiments", dict(SLEEPER, id="md-bob", model_dir=f"{root}/md-alice/x"))
    _, nobodys = bob("POST", "/experiments", dict(SLEEPER, id="md-bob", model_dir=f"{root}/md-zzzzz/x"))
    assert theirs["error"]["message"].replace("md-alice", "ID") == nobodys["error"]["message"].replace("md-zzzzz", "ID")
    assert not os.path.exists(os.path.join(root, "md-bob")), "a refused submission makes nothing"
    # Normalized, and her own is fine for alice: continuing from her own checkpoint.
    status, body = alice("POST", "/experiments",
                         dict(SLEEPER, id="md-alice-2", model_dir=f"{root}//md-alice-2/../md-alice/./"))
    assert status == 201 and body["model_dir"] == f"{root}/md-alice", body
    assert alice("DELETE", "/experiments/md-alice-2")[0] == 200
    # tfslurmd runs as root here without --site: nothing outside the output root.
    if os.geteuid() == 0:
        status, body = bob("POST", "/experiments", dict(SLEEPER, id="md-etc", model_dir="/etc/tfslurm-md-etc"))
        assert status == 400 and "would create it as root" in body["error"]["fields"][0]["reason"], body
        assert not os.path.exists("/etc/tfslurm-md-etc")
