"""Issue 43: the local cluster as separate network hosts
(deploy/local-slurm/start.sh --hosts-apart; its README, "Hosts apart"):
stop.sh leaves nothing of them behind."""
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import REPO, cluster_start_args
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
