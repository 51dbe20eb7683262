"""Issue 45: TLS on both of tfslurmd's ports, against the real local Slurm
cluster, real tfctl, curl, openssl and Python's ssl.

- `tfslurmd tls init` makes what openssl verifies, keys readable by their
  owner alone;
- plaintext off loopback is refused unless --insecure-plaintext;
- real TensorFlow and PyTorch experiments run over TLS, submitted from the
  login host, while tcpdump records every packet between the hosts (the
  cluster's hosts are apart: conftest.py); no token, MUNGE credential or
  TF_CONFIG and no attempt secret is in the capture (the secret reaches the
  job in a file, not in the environment Slurm's RPCs carry), nor a
  model_dir on tfslurmd's ports (a plaintext request in the same capture
  shows the capture would see them);
- refusals, each with the message it prints: an agent given a CA that does
  not verify the service (someone else answers at its address), tfctl with
  a wrong CA, plaintext clients on the TLS port, an expired certificate;
- SIGHUP rotates the certificate: open connections go on, new ones get the
  new certificate;
- `tfctl login` pins on first use, showing the CA's fingerprint;
- /healthz answers without a token over TLS, /metrics with one (as
  Prometheus scrapes it).
"""
import datetime
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import time

import pytest

from conftest import BIN, CA_VARIABLES, REPO, TlsFiles, scontrol_job, service_names, tls_init, wait_for
from helpers import hosts
from helpers.capture import Capture
from test_pytorch import ddp_spec
from test_tensorflow import job_final_state, tf_spec
from unix_users import ALICE, BOB, TFCTL, credential, munge_socket, require_test_users, token_for

TFSLURMD = os.path.join(BIN, "tfslurmd")


def fingerprint(pem_path):
    out = subprocess.run(["openssl", "x509", "-noout", "-fingerprint", "-sha256", "-in", pem_path],
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    return out.strip().split("=", 1)[1]


def served_fingerprint(port, ca):
    """The SHA-256 fingerprint of the certificate a new TLS connection to port gets."""
    context = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            der = tls.getpeercert(binary_form=True)
    digest = hashlib.sha256(der).hexdigest().upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def run(args, env=None, **kw):
    return subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                          **kw)


def tfctl(env, *args):
    return run([TFCTL, *args], env=dict({"PATH": os.environ["PATH"]}, **env))


def make_certificate(directory, name, ca_name="other CA", not_before=None, not_after=None, ip="127.0.0.1",
                     dns=None):
    """A CA and a leaf for `ip` (and the host name `dns`) made by Python's
    cryptography (an X.509 implementation other than tfslurmd's), valid when
    told; returns (ca.pem, leaf.pem with the CA after it, leaf.key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress
    now = datetime.datetime.now(datetime.timezone.utc)
    not_before = not_before or now - datetime.timedelta(minutes=5)
    not_after = not_after or now + datetime.timedelta(days=1)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name_x = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    ca = (x509.CertificateBuilder().subject_name(ca_name_x).issuer_name(ca_name_x).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=30))
          .not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name_x).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(not_before).not_valid_after(not_after)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]
                                                    + ([x509.DNSName(dns)] if dns else [])), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    paths = [os.path.join(directory, f) for f in ("ca.pem", "server.pem", "server.key")]
    open(paths[0], "wb").write(ca.public_bytes(pem))
    open(paths[1], "wb").write(leaf.public_bytes(pem) + ca.public_bytes(pem))
    open(paths[2], "wb").write(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    os.chmod(paths[2], 0o600)
    return paths


class OpensslServer:
    """`openssl s_server` on port `port` of this host (all its addresses)
    with the given certificate: a TLS peer that is not tfslurmd (someone
    answering at its address)."""

    def __init__(self, port, cert, key):
        self.proc = subprocess.Popen(["openssl", "s_server", "-accept", str(port), "-cert", cert,
                                      "-key", key, "-www", "-quiet"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        wait_for(lambda: self.proc.poll() is not None or _connectable(port), 20, "openssl s_server to listen")
        assert self.proc.poll() is None, "openssl s_server did not start"

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def _connectable(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def port_bytes(capture, ports):
    """Every byte of the packets to or from tfslurmd's `ports` in `capture`
    (helpers/capture.py, whole packets), on both bridges."""
    expr = " or ".join(f"tcp port {p}" for p in ports)
    data = b""
    for bridge in ("eth", "ib"):
        out = subprocess.run(["tcpdump", "-r", capture.pcap(bridge), "-w", "-", expr], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, check=True)
        data += out.stdout
    return data


def whole_capture(capture):
    return b"".join(open(capture.pcap(bridge), "rb").read() for bridge in ("eth", "ib"))


def service_cn(conf):
    """The CN of the certificate conftest.service_tls makes (tls init's first name)."""
    return hosts.fqdn(conf, "svc") if hosts.apart(conf) else "localhost"


def agent_secrets(exp_id):
    """The attempt secret every agent of the experiment read: from the file
    its environment names (TFSLURM_SECRET_FILE)."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"tfslurm-agent") and exp_id.encode() in cmd:
            found |= {open(e.split(b"=", 1)[1], "rb").read() for e in env if e.startswith(b"TFSLURM_SECRET_FILE=")}
    return found


# --------------------------------------------------------------- tls init --

def test_tls_init_makes_what_openssl_verifies_with_keys_only_their_owner_reads(tmp_path):
    d = str(tmp_path / "tls")
    files, out = tls_init(d, names=("login1", "localhost"), addresses=("127.0.0.1", "198.18.0.3"),
                          extra=("--user", "nobody"))
    assert f"made the CA {files.ca}\n  SHA-256 fingerprint {fingerprint(files.ca)}\n" in out, out
    assert "for DNS:login1, DNS:localhost, IP:127.0.0.1, IP:198.18.0.3\n" in out, out
    nobody = int(run(["id", "-u", "nobody"]).stdout)
    for path, mode in ((files.key, 0o600), (os.path.join(d, "ca.key"), 0o600), (files.cert, 0o644),
                       (files.ca, 0o644)):
        st = os.stat(path)
        assert (oct(st.st_mode & 0o777), st.st_uid == nobody or path.endswith(".pem")) == (oct(mode), True), path
    for host in ("-verify_hostname login1", "-verify_ip 198.18.0.3"):
        verified = run(["openssl", "verify", "-CAfile", files.ca, *host.split(), "-untrusted", files.cert,
                        files.cert])
        assert verified.stdout == f"{files.cert}: OK\n", verified.stdout + verified.stderr
    # Run again: the CA stays (agents of running jobs trust it), the server
    # certificate is new.
    before = fingerprint(files.cert)
    _, again = tls_init(d, names=("login1",), addresses=("127.0.0.1",))
    assert f"kept the CA {files.ca}\n  SHA-256 fingerprint {fingerprint(files.ca)}\n" in again, again
    assert fingerprint(files.cert) != before


def test_default_names_are_this_hosts(tmp_path):
    out = run([TFSLURMD, "tls", "init", "--dir", str(tmp_path)])
    assert out.returncode == 0, out.stderr
    names = next(line for line in out.stdout.splitlines() if line.startswith("  for "))
    assert f"DNS:{socket.gethostname()}" in names and "DNS:localhost" in names and "IP:127.0.0.1" in names, names


# -------------------------------------------------------------- plaintext --

def test_plaintext_off_loopback_is_refused_unless_the_admin_accepts_it(service_factory, tmp_path):
    args = [TFSLURMD, "--db", str(tmp_path / "db"), "--output-root", str(tmp_path / "out"), "--allow-root",
            "--listen", "127.0.0.1:0"]
    refused = run(args + ["--agent-listen", "0.0.0.0:0"])
    said = refused.stdout + refused.stderr  # spdlog writes to stdout
    assert refused.returncode == 2, said
    assert ("refusing to serve the agent endpoint on 0.0.0.0 without TLS: anyone who can read that network could "
            "take users' tokens and MUNGE credentials, and attempt secrets with which to act as any task. Give "
            "--tls-cert and --tls-key") in said, said
    svc = service_factory(agent_host="0.0.0.0", tls=False, extra_args=["--insecure-plaintext"])
    log = open(svc.log_path).read()
    assert "--insecure-plaintext: tfslurmd speaks plaintext on 127.0.0.1:" in log, log
    assert "every attempt secret (and reports exits, marks progress and takes over rendezvous as any task)" in log


# --------------------------------------------------- clients and refusals --

def test_clients_verify_the_service_and_plaintext_clients_are_told_it_speaks_https(service_factory, tls_files,
                                                                                   slurm_cluster, tmp_path):
    svc = service_factory(auth=True, tls=tls_files)
    assert svc.url.startswith("https://127.0.0.1:")
    token = token_for(svc, "alice")
    env = {"HOME": str(tmp_path), "TFSLURM_URL": svc.url, "TFSLURM_TOKEN": token}
    ok = tfctl(dict(env, TFSLURM_CACERT=tls_files.ca), "list")
    assert ok.returncode == 0, ok.stderr
    if svc.cluster_url:
        # From the login host, by the service host's name: the certificate
        # names it (conftest.service_tls), and tfctl checks that it does.
        login = hosts.run_on(slurm_cluster, "login", [TFCTL, "list"], env=dict(
            env, PATH=os.environ["PATH"], TFSLURM_URL=svc.cluster_url, TFSLURM_CACERT=tls_files.ca),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        assert login.returncode == 0, login.stderr
        by_address = svc.cluster_url.replace(hosts.fqdn(slurm_cluster, "svc"), hosts.address(slurm_cluster, "svc"))
        login = hosts.run_on(slurm_cluster, "login", [TFCTL, "list"], env=dict(
            env, PATH=os.environ["PATH"], TFSLURM_URL=by_address, TFSLURM_CACERT=tls_files.ca),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        assert login.returncode == 0, login.stderr

    # A CA that did not sign the service's certificate.
    other_ca, _, _ = make_certificate(str(tmp_path), "elsewhere", ca_name="another CA")
    wrong = tfctl(dict(env, TFSLURM_CACERT=other_ca), "list")
    assert wrong.returncode == 1
    assert wrong.stderr.startswith(
        f"tfctl: cannot verify tfslurmd at {svc.url}: self-signed certificate in certificate chain (the "
        f"service's certificate: CN={service_cn(slurm_cluster)}, issued by CN=tfslurm CA on "), wrong.stderr
    assert f". Its certificate was checked against the CA file {other_ca} (from TFSLURM_CACERT); give the " \
           "service's CA with --cacert or TFSLURM_CACERT, or run `tfctl login`" in wrong.stderr, wrong.stderr
    # No CA at all: the system's store does not know tfslurm's own CA.
    system = tfctl(env, "list")
    assert "self-signed certificate in certificate chain" in system.stderr, system.stderr
    assert "checked against this machine's trust store" in system.stderr, system.stderr

    # Plaintext clients on the TLS port get a plaintext answer saying why.
    plain_url = svc.url.replace("https://", "http://")
    curl = run(["curl", "-sS", "-w", "\n%{http_code}", plain_url + "/experiments"])
    assert curl.stdout.endswith("\n400"), curl.stdout + curl.stderr
    assert json.loads(curl.stdout.rsplit("\n", 1)[0])["error"]["message"] == (
        "this port speaks HTTPS: use https:// instead of http:// (tfctl --url, TFSLURM_URL)")
    plain = tfctl(dict(env, TFSLURM_URL=plain_url), "list")
    assert plain.returncode == 1
    assert "this port speaks HTTPS: use https:// instead of http://" in plain.stderr, plain.stderr
    # The Python client, the same way.
    py = run(["/usr/bin/python3", "-c", "import sys, tfslurm; tfslurm.Client(sys.argv[1], 't', config_path='')"
              ".list()", plain_url], env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "client/python/src")))
    assert "this port speaks HTTPS" in py.stderr, py.stderr
    # And the agent's JSON route, as curl would post it.
    agent_json = run(["curl", "-sS", "-X", "POST", "--data", "{}", plain_url + "/agent/v1/message"])
    assert "this port speaks HTTPS" in agent_json.stdout, agent_json.stdout


def test_an_expired_certificate_is_refused_by_tfslurmd_and_by_its_clients(service_factory, tls_files, slurm_cluster,
                                                                          tmp_path):
    now = datetime.datetime.now(datetime.timezone.utc)
    d = str(tmp_path)
    ca, cert, key = make_certificate(d, "old", not_before=now - datetime.timedelta(days=10),
                                     not_after=now - datetime.timedelta(days=1))
    expiry = (now - datetime.timedelta(days=1)).strftime("%Y-%m-%d")
    start = run([TFSLURMD, "--db", os.path.join(d, "db"), "--output-root", os.path.join(d, "out"), "--allow-root",
                 "--listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0", "--no-auth", "--tls-cert", cert,
                 "--tls-key", key, "--tls-ca", ca], env=dict(os.environ, SLURM_CONF=slurm_cluster))
    said = start.stdout + start.stderr
    assert start.returncode == 1, said
    assert f"the TLS certificate {cert} (CN=old) expired on {expiry}" in said, said

    # Rotated to an expired certificate: tfslurmd keeps serving the old one.
    rotated_dir = os.path.join(d, "rotated")
    os.mkdir(rotated_dir)
    for f in ("ca.pem", "ca.key", "server.pem", "server.key"):
        shutil.copy2(os.path.join(tls_files.dir, f), rotated_dir)
    files = TlsFiles(rotated_dir)
    svc = service_factory(tls=files)
    served = served_fingerprint(int(svc.url.rsplit(":", 1)[1]), files.ca)
    shutil.copy(cert, files.cert)
    shutil.copy(key, files.key)
    svc.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "SIGHUP: TLS certificate not reloaded" in open(svc.log_path).read(), 20, "the refused reload")
    assert f"still serving the old one: the TLS certificate {files.cert} (CN=old) expired on {expiry}" in open(
        svc.log_path).read()
    assert served_fingerprint(int(svc.url.rsplit(":", 1)[1]), files.ca) == served

    # A client facing an expired certificate (openssl's own server).
    port = _free_port()
    server = OpensslServer(port, cert, key)
    try:
        out = tfctl({"HOME": d, "TFSLURM_URL": f"https://127.0.0.1:{port}", "TFSLURM_CACERT": ca,
                     "TFSLURM_TOKEN": "x"}, "list")
    finally:
        server.stop()
    assert out.returncode == 1
    assert (f"tfctl: cannot verify tfslurmd at https://127.0.0.1:{port}: certificate has expired (CN=old, on "
            f"{expiry}") in out.stderr, out.stderr


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_sighup_rotates_the_certificate_and_open_connections_go_on(service_factory, tls_files, slurm_cluster,
                                                                  tmp_path):
    d = str(tmp_path / "tls")
    shutil.copytree(tls_files.dir, d)
    files = TlsFiles(d)
    svc = service_factory(tls=files)
    port = int(svc.url.rsplit(":", 1)[1])
    before = served_fingerprint(port, files.ca)
    assert before == fingerprint(files.cert)
    kept = http.client.HTTPSConnection("127.0.0.1", port, context=ssl.create_default_context(cafile=files.ca))
    kept.request("GET", "/healthz")
    assert kept.getresponse().read()

    tls_init(d, *service_names(slurm_cluster))  # a new certificate from the same CA, as an admin rotates
    svc.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "SIGHUP: TLS certificate reloaded" in open(svc.log_path).read(), 20, "the reload")
    assert served_fingerprint(port, files.ca) == fingerprint(files.cert) != before
    kept.request("GET", "/healthz")  # the connection made before the rotation
    response = kept.getresponse()
    assert response.status == 200, response.read()
    assert svc.proc.poll() is None
    # The agent port reloads from its staged copy within a second.
    wait_for(lambda: served_fingerprint(svc.agent_port, files.ca) == fingerprint(files.cert), 10,
             "the agent port to present the new certificate")


def test_tfctl_login_pins_the_ca_on_first_use_showing_its_fingerprint(service_factory, tls_files, tmp_path):
    svc = service_factory(auth=True, tls=tls_files)
    token = token_for(svc, "alice")
    home = str(tmp_path / "home")
    os.mkdir(home)
    env = {"HOME": home}
    refused = tfctl(env, "login", "--url", svc.url, "--token", token)
    assert refused.returncode == 1
    assert f"SHA-256 fingerprint of that CA: {fingerprint(tls_files.ca)}" in refused.stderr, refused.stderr
    assert "not pinning without a terminal to ask on" in refused.stderr, refused.stderr
    wrong = tfctl(env, "login", "--url", svc.url, "--token", token, "--fingerprint", "AB:CD")
    assert "nothing was pinned (someone may be answering in the service's place)" in wrong.stderr, wrong.stderr
    pinned = tfctl(env, "login", "--url", svc.url, "--token", token, "--fingerprint", fingerprint(tls_files.ca))
    assert pinned.returncode == 0, pinned.stderr
    assert f"pinned {fingerprint(tls_files.ca)} for {svc.url}" in pinned.stderr, pinned.stderr
    config = open(os.path.join(home, ".config", "tfslurm", "config")).read()
    assert f"url = {svc.url}\n" in config and f"token = {token}\n" in config, config
    assert oct(os.stat(os.path.join(home, ".config", "tfslurm", "config")).st_mode & 0o777) == "0o600"
    listed = tfctl(env, "list")
    assert listed.returncode == 0, listed.stderr
    # The Python client reads the same config, pinned CA included.
    without_ca = {k: v for k, v in os.environ.items() if k not in CA_VARIABLES}
    py = run(["/usr/bin/python3", "-c", "import tfslurm; print(tfslurm.Client().list())"],
             env=dict(without_ca, HOME=home, PYTHONPATH=os.path.join(REPO, "client/python/src")))
    assert py.returncode == 0, py.stderr


def test_healthz_is_open_and_metrics_need_a_token_over_tls(service_factory, tls_files):
    svc = service_factory(auth=True, tls=tls_files)
    assert svc.request("GET", "/healthz")[0] == 200
    assert svc.request("GET", "/metrics", raw=True)[0] == 401
    # What a Prometheus scrape config with scheme: https, tls_config.ca_file
    # and authorization.credentials_file sends.
    token = token_for(svc, "prometheus")  # its own token, not an admin's (docs/metrics.md)
    status, text = svc.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"}, raw=True)
    assert status == 200 and "tfslurm_" in text, text[:500]


def _threads(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def _closed(sock, timeout=30):
    """What `sock` (plain or TLS) reads until the server closes it: bytes."""
    sock.settimeout(timeout)
    got = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return got
            got += chunk
    except (ConnectionResetError, ssl.SSLError):
        return got


def test_a_stalled_tls_handshake_holds_no_thread_and_the_gate_limits_hold_over_tls(service_factory, tls_files):
    """The REST port's gate does the TLS handshake itself (api/request_gate.h):
    strangers who connect and say nothing, or stop half-way through their
    ClientHello, or handshake and then trickle their request, hold no thread
    (4 serve requests here) and are closed when the header time is up; the
    gate's limits (431, 413, 408) answer inside TLS."""
    svc = service_factory(tls=tls_files, extra_args=["--max-connections", "4", "--header-timeout-s", "4"])
    host, port = svc.address()
    assert svc.get("/healthz")[0] == 200
    before = _threads(svc.proc.pid)
    # A ClientHello's record header and the start of its body, never finished.
    half_hello = bytes.fromhex("160301020001000200") + b"\x03\x03" + b"\x00" * 16
    silent, halfway, trickling = [], [], []
    started = time.monotonic()
    for i in range(100):
        silent.append(socket.create_connection((host, port), timeout=30))
        s = socket.create_connection((host, port), timeout=30)
        s.sendall(half_hello)
        halfway.append(s)
    for i in range(20):
        s = svc.connect()  # handshaken
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        trickling.append(s)
    opened = time.monotonic() - started
    took = []
    for _ in range(10):
        t = time.monotonic()
        assert svc.get("/healthz")[0] == 200
        took.append(time.monotonic() - t)
    during = _threads(svc.proc.pid)
    print(f"220 stalled connections opened in {opened:.2f} s; tfslurmd's threads {before} -> {during}; "
          f"/healthz meanwhile {['%.3f' % d for d in took]} s (load {os.getloadavg()[0]:.1f})")
    assert during - before <= 6, f"threads {before} -> {during}: stalled connections hold threads"
    assert max(took) < 3, took
    # The header time is up (4 s from each accept): the handshakes that never
    # finished are closed without a word (no session to answer in), the
    # handshaken tricklers get their 408 inside TLS.
    assert all(_closed(s) == b"" for s in silent[:10] + halfway[:10])
    answers = [_closed(s) for s in trickling]
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), answers[:3]
    assert b"the request's header fields did not arrive within 4 s" in answers[0], answers[0]
    for s in silent + halfway + trickling:
        s.close()
    # The head and body limits, over TLS, before authentication.
    s = svc.connect()
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(65)) + b"\r\n")
    assert _closed(s).startswith(b"HTTP/1.1 431 ")
    s = svc.connect()
    s.sendall(b"POST /experiments HTTP/1.1\r\nHost: x\r\nContent-Length: 2147483648\r\n\r\n")
    assert _closed(s).startswith(b"HTTP/1.1 413 ")
    assert svc.get("/healthz")[0] == 200


# ---------------------------------------------------------------- agents --

def small_job(exp_id):
    return {"id": exp_id, "command": ["/usr/bin/python3", "-c", "import time; time.sleep(2)"],
            "cluster": {"worker": 2}, "restart": {"max_restarts": 0},
            "resources": {"partition": "debug", "nodes": 1, "tasks_per_node": 2, "time_limit": "00:05:00"}}


def test_an_agent_that_cannot_verify_the_service_refuses_and_the_task_ends_startup_error(service_factory, tls_files,
                                                                                       slurm_cluster, tmp_path):
    env = dict(os.environ, SLURM_CONF=slurm_cluster)
    svc = service_factory(tls=tls_files)
    # The job waits (its partition down) while the address changes hands.
    run(["scontrol", "update", "PartitionName=debug", "State=DOWN"], env=env)
    try:
        status, body = svc.post("/experiments", small_job("mitm"))
        assert status == 201, body
        job = body["slurm_job_id"]
        # tfslurmd goes down; someone else answers at its agent address with
        # a certificate for that address from a CA of their own.
        svc.stop()
        # A certificate for the very host and address the agents dial: only
        # its CA is not the job's.
        _, rogue_cert, rogue_key = make_certificate(
            str(tmp_path), "tfslurmd", ca_name="rogue CA", ip=hosts.address(slurm_cluster, "svc"),
            dns=hosts.fqdn(slurm_cluster, "svc") if hosts.apart(slurm_cluster) else None)
        rogue = OpensslServer(svc.agent_port, rogue_cert, rogue_key)
    finally:
        run(["scontrol", "update", "PartitionName=debug", "State=UP"], env=env)
    try:
        assert job_final_state(slurm_cluster, job) == "FAILED"
    finally:
        rogue.stop()
    svc.start()
    # The agents dial the host tfslurmd advertises: on hosts apart, the
    # service host's name (on the compute nodes, verified there).
    agent_host = hosts.fqdn(slurm_cluster, "svc") if hosts.apart(slurm_cluster) else "127.0.0.1"
    done = svc.wait_state("mitm", "failed", timeout=120)
    assert done["reason"].find(
        f"no agent registered, they could not verify tfslurmd's TLS certificate with the job's TFSLURM_CA "
        f"(tfslurm-agent exit 4): cannot verify the service at {agent_host}:{svc.agent_port}: unable to get local "
        f"issuer certificate (the service's certificate: CN=tfslurmd, issued by CN=rogue CA) (checked against "
        f"TFSLURM_CA); not registering") >= 0, done["reason"]
    assert "startup_error" in done["reason"], done["reason"]
    assert scontrol_job(slurm_cluster, job).get("ExitCode") == "4:0"


# ------------------------------------------------------- on the wire --

def program_values(exp_id, name):
    """The values of variable `name` in the environment of the experiment's
    training programs (found by EXPERIMENT_ID)."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if f"EXPERIMENT_ID={exp_id}".encode() in env:
            found |= {e.split(b"=", 1)[1] for e in env if e.startswith(name.encode() + b"=")}
    return found


def test_real_tensorflow_and_pytorch_over_tls_leave_no_secret_on_the_wire(service_factory, tls_files, slurm_cluster,
                                                                         tmp_path):
    if not hosts.apart(slurm_cluster):
        pytest.skip("TFSLURM_LOOPBACK=1: the session's cluster is on one host, no wire between its hosts")
    tf_python = os.environ.get("TFSLURM_TF_PYTHON", "/opt/tfslurm/venv-tf/bin/python")
    if not os.access(tf_python, os.X_OK):
        pytest.fail(f"no TensorFlow python at {tf_python}: run deploy/install-tf.sh")
    require_test_users()
    socket_path = munge_socket(slurm_cluster)
    svc = service_factory(auth=True, tls=tls_files, extra_args=["--munge-auth", "--munge-socket", socket_path])
    token = token_for(svc, "root", admin=True)
    http_port = svc.address()[1]
    # The control: a plaintext tfslurmd in the same capture.
    plain = service_factory(auth=True, tls=False, extra_args=["--insecure-plaintext"])
    capture = Capture(slurm_cluster, tmp_path, snaplen=0).start()
    try:
        # From the login host, as users do: TensorFlow's by tfctl with a
        # token, PyTorch's by alice with a MUNGE credential (curl).
        tf = tf_spec(tf_python, "tls-tf", "mwms_tf", ["--steps", "40", "--checkpoint-every", "20"], {"worker": 2},
                     nodes=1)
        path = str(tmp_path / "tls-tf.json")
        json.dump(tf, open(path, "w"))
        login_env = dict(os.environ, HOME=str(tmp_path), TFSLURM_URL=svc.cluster_url, TFSLURM_CACERT=tls_files.ca,
                         TFSLURM_TOKEN=token)
        out = hosts.run_on(slurm_cluster, "login", [TFCTL, "submit", path], env=login_env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        torch_path = str(tmp_path / "tls-ddp.json")
        json.dump(ddp_spec("tls-ddp", ["--steps", "40", "--checkpoint-every", "20"], nodes=2, tasks_per_node=1),
                  open(torch_path, "w"))
        cred = credential(socket_path, ALICE, "tfslurm/1 POST /experiments")
        posted = hosts.run_on(slurm_cluster, "login", [
            "curl", "-sS", "--cacert", tls_files.ca, "-w", "\n%{http_code}", "-H", f"Authorization: MUNGE {cred}",
            "-H", "Content-Type: application/json", "--data-binary", f"@{torch_path}",
            svc.cluster_url + "/experiments"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        assert posted.stdout.endswith("\n201"), posted.stdout + posted.stderr
        secrets, tf_configs = set(), set()

        def seen():
            secrets.update(agent_secrets("tls-tf") | agent_secrets("tls-ddp"))
            tf_configs.update(program_values("tls-tf", "TF_CONFIG"))
            return len(secrets) >= 2 and tf_configs

        wait_for(seen, 300, "both experiments' agents and TensorFlow's programs to run", interval=0.05)
        admin = {"Authorization": f"Bearer {token}"}
        done = {}
        for exp_id in ("tls-tf", "tls-ddp"):
            done[exp_id] = wait_for(lambda: (lambda e: e if e["state"] in ("succeeded", "failed") else None)(
                svc.request("GET", f"/experiments/{exp_id}", headers=admin)[1]), 600, f"{exp_id} to end", interval=1)
            assert done[exp_id]["state"] == "succeeded", done[exp_id]["reason"]
            # Through the agents' TLS streams: registrations, assignments,
            # checkpoints, exits.
            assert done[exp_id]["checkpoint"]["step"] == 40, done[exp_id]["checkpoint"]
        control_token = token_for(plain, "root", admin=True)
        control = hosts.run_on(slurm_cluster, "login", ["curl", "-sS", "-H", f"Authorization: Bearer {control_token}",
                                                        plain.cluster_url + "/experiments"],
                               stdout=subprocess.PIPE, text=True, timeout=60)
        assert control.stdout.startswith('{"experiments"'), control.stdout
        # The control's packets reach the capture file a moment after curl
        # has its answer (tcpdump stopped at once would lose them): the
        # capture sees a token sent in the clear.
        wait_for(lambda: control_token.encode() in whole_capture(capture), 30,
                 "the capture to record the plaintext control request")
    finally:
        capture.stop()

    wire = whole_capture(capture)
    # Anywhere between the hosts: what only tfslurm's clients and tfslurmd
    # carry.
    leaks = {"the token": token.encode(), "alice's MUNGE credential": cred.encode()}
    for i, c in enumerate(tf_configs):
        leaks[f"TF_CONFIG {i}"] = c
    # The attempt secrets too: in a file of the job's user, whose path alone
    # the job's environment carries through Slurm's unencrypted RPCs.
    for i, secret in enumerate(secrets):
        leaks[f"attempt secret {i}"] = secret
    found = [what for what, needle in leaks.items() if needle in wire]
    assert not found, f"in the capture between the hosts: {found}"
    # On tfslurmd's ports: the model_dirs and any MUNGE credential (both
    # also appear in Slurm's own RPCs, as session 2's capture showed).
    ours = port_bytes(capture, [http_port, svc.agent_port])
    assert len(ours) > 20_000, len(ours)
    leaks = {"a MUNGE credential": b"MUNGE:"}
    for exp_id, exp in done.items():
        leaks[f"{exp_id}'s model_dir"] = exp["model_dir"].encode()
    found = [what for what, needle in leaks.items() if needle in ours]
    assert not found, f"in the capture of tfslurmd's ports: {found}"
    print(f"captured {len(wire)} bytes between the hosts, {len(ours)} on tfslurmd's ports; no token, MUNGE "
          f"credential of alice's, TF_CONFIG or attempt secret ({len(secrets)}) in either")


# ------------------------------------------------------------- site mode --

def agent_process(exp_id):
    """(argv, environment) of the experiment's first agent."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\0")[:-1]
            env = open(f"/proc/{pid}/environ", "rb").read().decode().split("\0")[:-1]
        except (OSError, UnicodeDecodeError):
            continue
        if cmd and cmd[0].endswith("tfslurm-agent") and exp_id in cmd:
            return cmd, dict(e.split("=", 1) for e in env if "=" in e)
    return None


@pytest.fixture
def between_hosts(slurm_cluster, tmp_path):
    """A whole-packet capture between the hosts (None on one host), started
    now and stopped after the test."""
    if not hosts.apart(slurm_cluster):
        yield None
        return
    capture = Capture(slurm_cluster, tmp_path, snaplen=0).start()
    yield capture
    capture.stop()


def test_site_mode_bob_holding_alices_secret_cannot_register_as_her_task(service_factory, tls_files, slurm_cluster,
                                                                        between_hosts):
    require_test_users()
    socket_path = munge_socket(slurm_cluster)
    svc = service_factory(extra_args=["--site", "--munge-auth", "--munge-socket", socket_path], auth=True,
                          searchable=True, tls=tls_files)
    spec = {"id": "alice-tls", "command": ["/usr/bin/python3", "-c", "import time; time.sleep(300)"],
            "cluster": {"worker": 1}, "restart": {"max_restarts": 0},
            "resources": {"partition": "debug", "nodes": 1, "tasks_per_node": 1, "time_limit": "00:10:00"}}
    cred = credential(socket_path, ALICE, "tfslurm/1 POST /experiments")
    status, body = svc.request("POST", "/experiments", spec, {"Authorization": f"MUNGE {cred}"})
    assert status == 201, body
    admin = {"Authorization": f"Bearer {token_for(svc, 'root', admin=True)}"}
    wait_for(lambda: svc.request("GET", "/experiments/alice-tls", headers=admin)[1]["state"] == "running", 120,
             "alice's experiment to run")
    argv, env = wait_for(lambda: agent_process("alice-tls"), 30, "alice's agent")
    assert env["TFSLURM_PROVE_UID"] == "munge" and env["TFSLURM_CA"].startswith("-----BEGIN CERTIFICATE-----")

    # The secret is in a file only alice (and root) reads.
    secret_file = env["TFSLURM_SECRET_FILE"]
    assert stat.S_IMODE(os.stat(secret_file).st_mode) == 0o600
    assert os.stat(secret_file).st_uid == int(run(["id", "-u", ALICE]).stdout)
    as_bob = run(["setpriv", f"--reuid={BOB}", f"--regid={BOB}", "--init-groups", "--", "cat", secret_file])
    assert as_bob.returncode != 0 and "Permission denied" in as_bob.stderr, as_bob.stdout + as_bob.stderr
    secret = open(secret_file).read()
    # Bob's process, with alice's whole agent environment and her secret
    # leaked to it (TFSLURM_SECRET, which the agent reads when no file is named).
    env = {k: v for k, v in env.items() if k != "TFSLURM_SECRET_FILE"}
    bob = run(["setpriv", f"--reuid={BOB}", f"--regid={BOB}", "--init-groups", "--"] + argv,
              env=dict(env, TFSLURM_SECRET=secret))
    alice_uid, bob_uid = (int(run(["id", "-u", u]).stdout) for u in (ALICE, BOB))
    assert bob.returncode == 3, bob.stdout + bob.stderr
    assert (f"site mode: only uid {alice_uid} may act for 'alice-tls' attempt 1 task 0; this agent runs as uid "
            f"{bob_uid}") in bob.stdout + bob.stderr, bob.stdout + bob.stderr
    log = open(svc.log_path).read()
    assert (f"refused 'alice-tls' attempt 1 task 0: its secret is right, but munged says the sender runs as uid "
            f"{bob_uid}, and the job runs as {ALICE}'s uid {alice_uid}") in log, log[-3000:]
    # Over the JSON route, each message proves its own uid.
    message = {"task": {"experimentId": "alice-tls", "attempt": 1, "secret": secret, "procId": 0},
               "heartbeat": {}}
    status, reply = svc.request("POST", "/agent/v1/message", message)
    assert status == 401 and "MUNGE credential for 'alice-tls' task 0 is missing" in reply["error"]["message"], reply
    message["task"]["uidCredential"] = credential(socket_path, BOB, "tfslurm-agent/1 alice-tls 1 0")
    status, reply = svc.request("POST", "/agent/v1/message", message)
    assert status == 403 and f"this agent runs as uid {bob_uid}" in reply["error"]["message"], reply

    exp = svc.request("GET", "/experiments/alice-tls", headers=admin)[1]
    assert exp["state"] == "running" and exp["tasks"][0]["state"] == "running", exp
    assert svc.request("DELETE", "/experiments/alice-tls", headers=admin)[0] == 200
    if between_hosts:
        between_hosts.stop()
        # Alice's agent on its compute node, to tfslurmd on the service host.
        wire = port_bytes(between_hosts, [svc.agent_port])
        assert len(wire) > 2000 and b"MUNGE:" not in wire, "alice's agent's credential travels inside TLS"
        assert secret.encode() not in wire
