"""The local cluster's hosts when they are apart (deploy/local-slurm/start.sh
--hosts-apart: each host a network namespace of its own; its README,
"Hosts apart"), for the tests and the benches.

A cluster is given by its SLURM_CONF, as everywhere in the tests; its
directory's etc/network says where each host is. On a cluster on one host
(no etc/network) every function here answers as for this machine: the
address is 127.0.0.1, and a command "on a host" runs here.
"""
import ctypes
import os
import socket
import subprocess

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ON_HOST = os.path.join(REPO, "deploy", "local-slurm", "on-host.sh")
NODES = ("node1", "node2", "node3")
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUTS = 0x04000000


def cluster_dir(conf):
    return os.path.dirname(os.path.dirname(conf))


def network(conf):
    """The cluster's etc/network as a dict (HA_INDEX, HA_DOMAIN, HA_SVC_NETNS,
    ...), or None for a cluster on one host."""
    path = os.path.join(cluster_dir(conf), "etc", "network")
    if not os.path.exists(path):
        return None
    return dict(line.strip().split("=", 1) for line in open(path) if "=" in line)


def apart(conf):
    return network(conf) is not None


def netns(conf, host):
    """The network namespace `host` runs in (ctld, svc, login, node1..3, sw)."""
    net = network(conf)
    return net["HA_SVC_NETNS"] if host == "svc" else f"tfs{net['HA_INDEX']}-{host}"


def address(conf, host, ib=False):
    """`host`'s address on the cluster network (198.18.N.0/24), or with ib on
    the compute nodes' second one (198.19.N.0/24); 127.0.0.1 on one host."""
    net = network(conf)
    if net is None:
        return "127.0.0.1"
    last = {"ctld": 2, "svc": 3, "login": 4}.get(host) or 10 + int(host[len("node"):])
    return f"198.{19 if ib else 18}.{net['HA_INDEX']}.{last}"


def fqdn(conf, host):
    """The name `host` calls itself and every host resolves (/etc/hosts)."""
    net = network(conf)
    return f"{host}.{net['HA_DOMAIN']}" if net else socket.gethostname()


def on_host(conf, host, argv):
    """argv to run `argv` on `host` (in its namespaces, on the shared file
    system); `argv` itself on one host."""
    return [ON_HOST, cluster_dir(conf), host] + list(argv) if apart(conf) else list(argv)


def run_on(conf, host, argv, **kwargs):
    """subprocess.run of `argv` on `host`."""
    return subprocess.run(on_host(conf, host, argv), **kwargs)


def extra_address(conf, host, last_octet):
    """Gives `host` a second address on the cluster network, 198.18.N.<last
    octet> (as a host with two addresses on one link); returns it and a
    function that takes it away again."""
    net = network(conf)
    addr = f"198.18.{net['HA_INDEX']}.{last_octet}"
    ifname = net["HA_SVC_IF"] if host == "svc" else "eth0"
    ip = ["ip", "-n", netns(conf, host), "addr"]
    subprocess.run(ip + ["add", f"{addr}/24", "dev", ifname], check=True)
    return addr, lambda: subprocess.run(ip + ["del", f"{addr}/24", "dev", ifname], check=False)


def ss(conf, host, args):
    """`ss ARGS`'s output on `host` (here on one host): sockets are a
    host's own."""
    argv = ["ss"] + list(args)
    if apart(conf):
        argv = ["nsenter", f"--net=/run/netns/{netns(conf, host)}", "--"] + argv
    return subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=True).stdout


def _ns_inode(path):
    return os.stat(path).st_ino


def in_netns(name):
    """True when this process's thread runs in network namespace `name`."""
    try:
        return _ns_inode(f"/run/netns/{name}") == _ns_inode("/proc/thread-self/ns/net")
    except FileNotFoundError:
        return False


def enter_service_host(conf):
    """Moves this process (its calling thread, and every process it starts
    from now on) onto the cluster's service host: its network namespace and
    a UTS namespace named after it. Nothing on one host. The test harness
    does this once, before any tfslurmd starts: tfslurmd then runs where a
    site runs it, reaches slurmctld over the network, serves REST on that
    host's loopback and agents on its cluster address."""
    net = network(conf)
    if net is None:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if not in_netns(net["HA_SVC_NETNS"]):
        fd = os.open(f"/run/netns/{net['HA_SVC_NETNS']}", os.O_RDONLY)
        try:
            if libc.setns(fd, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns into {net['HA_SVC_NETNS']}")
        finally:
            os.close(fd)
    want = fqdn(conf, "svc")
    if socket.gethostname() != want:
        if libc.unshare(_CLONE_NEWUTS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUTS)")
        socket.sethostname(want)
