"""Issue 43: the local cluster as separate network hosts
(deploy/local-slurm/start.sh --hosts-apart; its README, "Hosts apart"):
stop.sh leaves nothing of them behind."""
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import BIN, REPO, cluster_start_args, wait_for
from helpers import hosts

START = os.path.join(REPO, "deploy/local-slurm/start.sh")
STOP = os.path.join(REPO, "deploy/local-slurm/stop.sh")


def _netns_inodes(prefix):
    return {name: os.stat(f"/run/netns/{name}").st_ino for name in os.listdir("/run/netns")
            if name.startswith(prefix)}


def _processes_in(inodes):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino in inodes:
                found.append(int(pid))
        except OSError:
            pass
    return found


def _links_in(netns):
    out = subprocess.run(["ip", "-n", netns, "-o", "link", "show"], stdout=subprocess.PIPE, text=True, check=True)
    return [line.split(":")[1].strip().split("@")[0] for line in out.stdout.splitlines()]


@pytest.mark.parametrize("joined", [False, True], ids=["own-service-host", "joined-service-host"])
def test_stop_removes_every_namespace_link_address_and_name_start_made(slurm_cluster, joined):
    if not hosts.apart(slurm_cluster):
        pytest.skip("TFSLURM_LOOPBACK=1: the session's cluster is on one host")
    d = tempfile.mkdtemp(prefix="tfs-", dir="/tmp")
    os.chmod(d, 0o755)
    args = cluster_start_args() if joined else ["--hosts-apart"]
    try:
        out = subprocess.run([START] + args + [d], stdout=subprocess.PIPE, text=True, check=True)
        conf = out.stdout.strip().split("=", 1)[1]
        net = hosts.network(conf)
        prefix = f"tfs{net['HA_INDEX']}-"
        made = _netns_inodes(prefix)
        want = {prefix + h for h in ("sw", "ctld", "login", "node1", "node2", "node3")}
        if not joined:
            want.add(prefix + "svc")
        assert set(made) == want
        assert _processes_in(set(made.values())), "the cluster's daemons run on its hosts"
        assert f"svc.{net['HA_DOMAIN']}" in open("/etc/hosts").read()
        svc_links = _links_in(hosts.netns(conf, "svc"))
        assert (f"tfs{net['HA_INDEX']}" in svc_links) == joined
        for node in hosts.NODES:
            assert {"eth0", "ib0"} <= set(_links_in(hosts.netns(conf, node)))
    finally:
        subprocess.run([STOP, d], check=True)
    try:
        assert _netns_inodes(prefix) == {}, "stop.sh left network namespaces"
        assert _processes_in(set(made.values())) == [], "processes left on the cluster's hosts"
        assert net["HA_DOMAIN"] not in open("/etc/hosts").read(), "stop.sh left the hosts' names in /etc/hosts"
        assert not os.path.exists(os.path.join(d, "etc", "network"))
        if joined:
            assert f"tfs{net['HA_INDEX']}" not in _links_in(net["HA_SVC_NETNS"]), "the service host's link stayed"
            assert os.path.exists(f"/run/netns/{net['HA_SVC_NETNS']}"), "the joined service host was removed"
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- docs/site-deployment.md's table of who talks to whom ----
DOC = os.path.join(REPO, "docs/site-deployment.md")
ROLES = {"compute nodes": hosts.NODES, "service host": ("svc",), "login hosts": ("login",),
         "slurmctld host": ("ctld",), "slurmdbd host": ("ctld",)}


def site_table():
    """The rows of the ports table: (from hosts, to hosts, port name, (low, high))."""
    text = open(DOC).read().split("<!-- ports table:", 1)[1]
    rows = []
    for line in text.splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ("from", "---"):
            continue
        low, high = re.search(r"\((\d+)(?:-(\d+))?\)", cells[2]).groups()
        rows.append((ROLES[cells[0]], ROLES[cells[1]], cells[2].split()[0].strip("`"), (int(low), int(high or low))))
    return rows


def listeners(conf, host):
    """{(address, port, process)} of the TCP sockets listening on `host`."""
    out = subprocess.run(["nsenter", f"--net=/run/netns/{hosts.netns(conf, host)}", "--", "ss", "-Htlnp"],
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    found = set()
    for line in out.splitlines():
        local = line.split()[3]
        addr, port = local.rsplit(":", 1)
        proc = re.search(r'users:\(\("([^"]+)"', line)
        found.add((addr.strip("[]"), int(port), proc.group(1) if proc else "?"))
    return found


def test_the_sites_ports_table_is_what_the_hosts_listen_on_and_connect_to(service_factory, slurm_cluster, tmp_path):
    """docs/site-deployment.md's table against the cluster: every socket
    listening off loopback on a host, and every connection one host opens to
    another while an experiment runs (its programs over ib0) and tfctl asks
    from the login host, is a row of the table. And the hosts talk over
    their own addresses: the agents reach the service host at its cluster
    address, the programs each other at their ib0 addresses."""
    from test_agent_rendezvous import linear_ps_spec
    from unix_users import admin_token
    from helpers.capture import Capture
    if not hosts.apart(slurm_cluster):
        pytest.skip("TFSLURM_LOOPBACK=1: the session's cluster is on one host")
    service = service_factory(auth=True)
    service.token = admin_token(service)
    ports = {"--agent-listen": service.agent_port, "--listen": int(service.url.rsplit(":", 1)[1]),
             "SlurmctldPort": 6817, "SlurmdPort": 6818, "AccountingStoragePort": 6819}
    rows = site_table()
    assert {r[2] for r in rows} - {"ephemeral"} <= set(ports), rows

    def allowed(src, dst, port):
        for frm, to, name, (low, high) in rows:
            want = (ports[name], ports[name]) if name in ports else (low, high)
            if src in frm and dst in to and want[0] <= port <= want[1]:
                return True
        return False

    names = {hosts.address(slurm_cluster, h, ib): h for h in ("ctld", "svc", "login") + hosts.NODES
             for ib in (False, True) if not (ib and h not in hosts.NODES)}
    spec = linear_ps_spec("ports", steps=300)
    spec["network"] = {"address": "interface:ib0"}
    with Capture(slurm_cluster, tmp_path) as cap:
        status, body = service.post("/experiments", spec)
        assert status == 201, body
        wait_for(lambda: service.experiment("ports")["state"] == "running", 120, "the experiment to run")
        listening = {h: listeners(slurm_cluster, h) for h in ("svc", "ctld") + hosts.NODES}
        tfctl = hosts.run_on(slurm_cluster, "login", [os.path.join(BIN, "tfctl"), "status", "ports"],
                             env=dict(os.environ, TFSLURM_URL=service.cluster_url, TFSLURM_TOKEN=service.token),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert tfctl.returncode == 0, tfctl.stderr
        done = service.wait_state("ports", ("succeeded", "failed"), timeout=180)
    assert done["state"] == "succeeded", done["reason"]
    assert all(t["address"].startswith(hosts.address(slurm_cluster, t["node"], ib=True) + ":") for t in done["tasks"]), \
        done["tasks"]

    # What listens off loopback on each host is in the table, as a port others may reach.
    unlisted = []
    for host, socks in listening.items():
        for addr, port, proc in socks:
            if addr.startswith("127.") or addr == "::1":
                continue
            if not any(allowed(src, host, port) for src in ("svc", "login", "ctld") + hosts.NODES):
                unlisted.append((host, addr, port, proc))
    assert not unlisted, f"listening, and not in docs/site-deployment.md's table: {unlisted}"
    # Every address: 0.0.0.0, or "*" (gRPC binds [::] for 0.0.0.0, dual-stack).
    def on_every_address(host, port, proc):
        return any((wild, port, proc) in listening[host] for wild in ("0.0.0.0", "*", "::"))
    assert on_every_address("svc", service.agent_port, "tfslurmd"), listening["svc"]
    assert on_every_address("ctld", 6817, "slurmctld"), listening["ctld"]
    assert all(on_every_address(n, 6818, "slurmd") for n in hosts.NODES), listening

    # Every connection one host opened to another is in the table.
    seen = {(names[s], names[d], p) for bridge in ("eth", "ib") for s, d, p in cap.connections(bridge)}
    assert not [c for c in seen if not allowed(*c)], \
        f"connections not in docs/site-deployment.md's table: {sorted(c for c in seen if not allowed(*c))}"
    # Over their own addresses: the agents to the service host's, tfctl from
    # the login host, tfslurmd to slurmctld, the programs over ib0.
    svc = hosts.address(slurm_cluster, "svc")
    agent_conns = {s for s, d, p in cap.connections("eth") if d == svc and p == service.agent_port}
    assert agent_conns == {hosts.address(slurm_cluster, n) for n in hosts.NODES}, agent_conns
    assert ("login", "svc", ports["--listen"]) in seen
    assert ("svc", "ctld", 6817) in seen
    # The record, for the reader (issue 43's note quotes it).
    pairs = {}
    for src, dst, port in seen:
        pairs.setdefault((src, dst), set()).add(port)
    print("connections between hosts (tcpdump on the switch's bridges):")
    for (src, dst), port_set in sorted(pairs.items()):
        named = sorted(next((n for n, v in ports.items() if v == p), "ephemeral") for p in port_set)
        print(f"  {src} -> {dst}: {len(port_set)} port(s): {', '.join(sorted(set(named)))}")
    ib = {(s, d) for s, d, p in cap.connections("ib")}
    assert len({s for s, d in ib}) >= 2, f"the programs talk over ib0: {ib}"
    assert not [a for a in cap.addresses("eth") | cap.addresses("ib") if a.startswith("127.")]


def test_tfctl_and_the_dashboard_work_from_the_login_host(service_factory, slurm_cluster, tmp_path):
    """A user on the login host: tfctl with a token, and a real browser
    (headless Chromium) that loads the dashboard, runs it, and gets the
    service's 401 answer to its first call (the token form), all over the
    service host's cluster address."""
    import shutil as _shutil
    from unix_users import admin_token
    if not hosts.apart(slurm_cluster):
        pytest.skip("TFSLURM_LOOPBACK=1: the session's cluster is on one host")
    service = service_factory(auth=True)
    service.token = admin_token(service)
    status, body = service.post("/experiments", {"id": "from-login", "command": ["true"], "cluster": {"worker": 1},
                                                 "resources": {"time_limit": "00:05:00"},
                                                 "restart": {"max_restarts": 0}})
    assert status == 201, body
    env = dict(os.environ, TFSLURM_URL=service.cluster_url, TFSLURM_TOKEN=service.token)
    r = hosts.run_on(slurm_cluster, "login", [os.path.join(BIN, "tfctl"), "list"], env=env,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 0 and "from-login" in r.stdout, (r.stdout, r.stderr)
    # Over TLS (the port faces the cluster network), verified by tfctl for
    # the service host's name (conftest.service_tls).
    assert service.cluster_url.startswith(f"https://svc.{hosts.network(slurm_cluster)['HA_DOMAIN']}:")
    browser = _shutil.which("chromium")
    if not browser:
        pytest.skip("no chromium (deploy/install-deps.sh --browser installs it)")
    # Chromium trusts the service's key (a pin, as a site's CA in the
    # system's store would be); the flag needs a profile directory of its own.
    spki = subprocess.run(f"openssl pkey -in {service.tls.key} -pubout -outform der | openssl dgst -sha256 -binary "
                          "| base64", shell=True, stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    r = hosts.run_on(slurm_cluster, "login", [browser, "--headless", "--no-sandbox", "--disable-gpu",
                                              f"--user-data-dir={tmp_path / 'chromium'}",
                                              f"--ignore-certificate-errors-spki-list={spki}",
                                              "--virtual-time-budget=10000", "--dump-dom", service.cluster_url + "/"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    # The page, its script run (the experiment tables it draws), and the
    # service's 401 to its first call answered with the token form.
    assert "· tfslurm</title>" in r.stdout and 'data-testid="running"' in r.stdout, r.stdout[:1500]
    assert 'data-testid="token-dialog" open' in r.stdout, r.stdout[-1500:]


@pytest.mark.parametrize("relay", ["node", "off"], ids=["relay", "no-relay"])
def test_a_nodes_agents_reach_the_service_over_one_connection_through_its_relay(
        service_factory, slurm_cluster, tmp_path, relay):
    """Issue 49: with --agent-relay node (tfslurmd's default) the two agents
    of each node register through the node's relay, so the service host sees
    one TCP connection opened per node for the whole experiment, not one per
    agent's stream (tcpdump's SYNs on the switch); with --agent-relay off,
    at least one per agent (each of its streams dials anew: registering, and
    standing by for a next attempt in the job). The experiment is the same
    either way."""
    from helpers.capture import Capture
    if not hosts.apart(slurm_cluster):
        pytest.skip("TFSLURM_LOOPBACK=1: the session's cluster is on one host")
    service = service_factory(extra_args=("--agent-relay", relay))
    spec = {"id": f"relay-{relay}", "framework": "pytorch",
            "command": ["/bin/sh", "-c", 'echo "rank $RANK of $WORLD_SIZE"'],
            "resources": {"partition": "debug", "nodes": 2, "tasks_per_node": 2, "time_limit": "00:05:00"},
            "restart": {"max_restarts": 0}}
    with Capture(slurm_cluster, tmp_path) as cap:
        status, body = service.post("/experiments", spec)
        assert status == 201, body
        done = service.wait_state(spec["id"], ("succeeded", "failed"), timeout=120)
    assert done["state"] == "succeeded", done["reason"]
    svc = hosts.address(slurm_cluster, "svc")
    syns = subprocess.run(["tcpdump", "-r", cap.pcap("eth"), "-n", "-q", "-t",
                           f"dst host {svc} and dst port {service.agent_port} and "
                           "tcp[tcpflags] & tcp-syn != 0 and tcp[tcpflags] & tcp-ack == 0"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True).stdout
    opened = {}
    for line in syns.splitlines():
        m = re.match(r"^IP (\d+\.\d+\.\d+\.\d+)\.(\d+) > ", line)
        if m:
            opened.setdefault(m.group(1), set()).add(int(m.group(2)))
    nodes = {hosts.address(slurm_cluster, t["node"]) for t in done["tasks"]}
    assert len(nodes) == 2, done["tasks"]
    assert set(opened) == nodes, syns
    if relay == "node":
        assert all(len(ports) == 1 for ports in opened.values()), syns
    else:
        assert all(len(ports) >= 2 for ports in opened.values()), syns
    logs = [open(os.path.join(done["model_dir"], "logs", "attempt-1", f"task-{t['proc_id']}.out"),
                 errors="replace").read() for t in done["tasks"]]
    through = [" through the node's relay" in log for log in logs]
    assert through == [relay == "node"] * 4, logs
