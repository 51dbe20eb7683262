"""Network faults on the hosts-apart cluster (deploy/local-slurm/start.sh
--hosts-apart), for the tests and the benches: a host cut off from some
others or from everything, and a lossy, slow link.

Each fault is a table of nftables rules in the faulty host's own network
namespace ("tfslurm_fault"), so that removing the table heals it and
nothing outside that host changes. Packets are dropped silently, both ways,
as a broken switch port or cable does: connections are not reset, they
time out.

A slow link is what `tc qdisc add dev eth0 root netem delay D loss L%`
does on the host's interface (its outgoing packets delayed by D, L% of them
dropped). Kernels without sch_netem (this machine's: CONFIG_NET_SCH_NETEM
is not set) get the same from netfilter: a random L% is dropped, and the
rest wait in an NFQUEUE (iptables: this kernel has no nft queue
expression either) until a small process (python3 this_file delay ...,
raw netlink, no library) accepts each one D after it came. netem is used
when the kernel has it.

    with cut(conf, "node2", ["svc"]):        # node2 cannot reach the service host
    with cut(conf, "node2"):                  # node2 reaches nothing
    with slow_link(conf, "node2", delay_ms=100, loss_percent=5):
"""
import contextlib
import os
import select
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hosts  # noqa: E402

TABLE = "tfslurm_fault"


def _nft(conf, host, script):
    subprocess.run(["nsenter", f"--net=/run/netns/{hosts.netns(conf, host)}", "--", "nft", "-f", "-"],
                   input=script, text=True, check=True)


def _interface(conf, host):
    """The host's interface on this cluster's network (a joined service host
    has one per cluster)."""
    return hosts.network(conf)["HA_SVC_IF"] if host == "svc" else "eth0"


def heal(conf, host):
    """Removes every fault of `host` (nothing when it has none)."""
    subprocess.run(["nsenter", f"--net=/run/netns/{hosts.netns(conf, host)}", "--", "nft", "delete", "table",
                    "inet", TABLE], stderr=subprocess.DEVNULL, check=False)
    _stop_delay(conf, host)


def cut_start(conf, host, peers=None):
    """Cuts `host` off from `peers` (host names: svc, ctld, login, node1..3)
    on the cluster network, or, with peers None, from everything on both of
    its networks (its loopback stays)."""
    heal(conf, host)
    if peers is None:
        match = 'iifname != "lo"', 'oifname != "lo"'
    else:
        addrs = ", ".join(hosts.address(conf, p) for p in peers)
        match = f"ip saddr {{ {addrs} }}", f"ip daddr {{ {addrs} }}"
    _nft(conf, host, f"""table inet {TABLE} {{
  chain in {{ type filter hook input priority -10; {match[0]} drop; }}
  chain out {{ type filter hook output priority -10; {match[1]} drop; }}
}}
""")


@contextlib.contextmanager
def cut(conf, host, peers=None):
    cut_start(conf, host, peers)
    try:
        yield
    finally:
        heal(conf, host)


def _has_netem(conf, host):
    probe = subprocess.run(["nsenter", f"--net=/run/netns/{hosts.netns(conf, host)}", "--", "tc", "qdisc", "add",
                            "dev", "lo", "root", "netem", "delay", "0ms"], stderr=subprocess.DEVNULL)
    if probe.returncode == 0:
        subprocess.run(["nsenter", f"--net=/run/netns/{hosts.netns(conf, host)}", "--", "tc", "qdisc", "del", "dev",
                        "lo", "root"], check=False)
    return probe.returncode == 0


def _delay_pidfile(conf, host):
    return os.path.join(hosts.cluster_dir(conf), "run", f"delay-{host}.pid")


def _stop_delay(conf, host):
    ipt = ["nsenter", f"--net=/run/netns/{hosts.netns(conf, host)}", "--", "iptables", "-t", "mangle"]
    if subprocess.run(ipt + ["-S", TABLE], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
        subprocess.run(ipt + ["-D", "OUTPUT", "-o", _interface(conf, host), "-j", TABLE], check=False)
        subprocess.run(ipt + ["-F", TABLE], check=False)
        subprocess.run(ipt + ["-X", TABLE], check=False)
    subprocess.run(["nsenter", f"--net=/run/netns/{hosts.netns(conf, host)}", "--", "tc", "qdisc", "del", "dev",
                    _interface(conf, host), "root"], stderr=subprocess.DEVNULL, check=False)
    path = _delay_pidfile(conf, host)
    if os.path.exists(path):
        try:
            os.kill(int(open(path).read()), 15)
        except (ProcessLookupError, ValueError):
            pass
        os.unlink(path)


def slow_link_start(conf, host, delay_ms=100, loss_percent=5, queue=7):
    """`host`'s outgoing packets on its cluster interface delayed by
    delay_ms, loss_percent of them dropped (netem's delay and loss)."""
    heal(conf, host)
    ifname = _interface(conf, host)
    ns = f"--net=/run/netns/{hosts.netns(conf, host)}"
    if _has_netem(conf, host):
        subprocess.run(["nsenter", ns, "--", "tc", "qdisc", "add", "dev", ifname, "root", "netem", "delay",
                        f"{delay_ms}ms", "loss", f"{loss_percent}%"], check=True)
        return
    # The delayer binds the queue before any packet is sent to it ("bypass":
    # with no process on the queue, packets would pass undelayed).
    proc = subprocess.Popen(["nsenter", ns, "--", sys.executable, os.path.abspath(__file__), "delay", str(queue),
                             str(delay_ms)], stdout=subprocess.PIPE, text=True)
    if proc.stdout.readline().strip() != "bound":
        raise RuntimeError("the NFQUEUE delayer did not start")
    open(_delay_pidfile(conf, host), "w").write(str(proc.pid))
    # iptables (its nf_tables flavour, through xtables' NFQUEUE target and
    # statistic match: this kernel has no nft "queue" expression,
    # CONFIG_NFT_QUEUE), in a chain of our own so that heal removes it whole.
    ipt = ["nsenter", ns, "--", "iptables", "-t", "mangle"]
    subprocess.run(ipt + ["-N", TABLE], check=True)
    subprocess.run(ipt + ["-A", TABLE, "-m", "statistic", "--mode", "random", "--probability",
                          str(loss_percent / 100.0), "-j", "DROP"], check=True)
    subprocess.run(ipt + ["-A", TABLE, "-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"], check=True)
    subprocess.run(ipt + ["-A", "OUTPUT", "-o", ifname, "-j", TABLE], check=True)


@contextlib.contextmanager
def slow_link(conf, host, delay_ms=100, loss_percent=5):
    slow_link_start(conf, host, delay_ms, loss_percent)
    try:
        yield
    finally:
        heal(conf, host)


# ---- the NFQUEUE delayer (python3 netfault.py delay QUEUE DELAY_MS) ----
# nfnetlink_queue over raw netlink (linux/netfilter/nfnetlink_queue.h).
_NFNL_SUBSYS_QUEUE = 3
_MSG_PACKET, _MSG_CONFIG, _MSG_VERDICT_BATCH = 0, 2, 3
_CFG_CMD, _CFG_PARAMS, _CFG_QUEUE_MAXLEN = 1, 2, 3
_PACKET_HDR = 1
_VERDICT_HDR = 2
_NF_ACCEPT = 1
_NLM_F_REQUEST, _NLM_F_ACK = 1, 4
_NLMSG_ERROR = 2


def _attr(kind, payload):
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * ((4 - length % 4) % 4)


def _message(kind, queue, attrs, flags=_NLM_F_REQUEST, seq=0):
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + b"".join(attrs)
    return struct.pack("=IHHII", 16 + len(body), (_NFNL_SUBSYS_QUEUE << 8) | kind, flags, seq, 0) + body


def _config(sock, queue, attrs, seq):
    sock.send(_message(_MSG_CONFIG, queue, attrs, _NLM_F_REQUEST | _NLM_F_ACK, seq))
    reply = sock.recv(65536)
    kind, = struct.unpack_from("=H", reply, 4)
    if kind == _NLMSG_ERROR:
        err, = struct.unpack_from("=i", reply, 16)
        if err:
            raise OSError(-err, "nfnetlink_queue config")


def _packet_ids(data):
    off = 0
    while off + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, off)
        if length < 16:
            return
        if kind == (_NFNL_SUBSYS_QUEUE << 8) | _MSG_PACKET:
            a = off + 20  # nlmsghdr (16) + nfgenmsg (4)
            while a + 4 <= off + length:
                alen, akind = struct.unpack_from("=HH", data, a)
                if alen < 4:
                    break
                if akind & 0x7fff == _PACKET_HDR:
                    yield struct.unpack_from("!I", data, a + 4)[0]
                a += (alen + 3) & ~3
        off += (length + 3) & ~3


def delay_main(queue, delay_ms):
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setsockopt(270, 5, 1)  # SOL_NETLINK, NETLINK_NO_ENOBUFS
    sock.bind((0, 0))
    _config(sock, queue, [_attr(_CFG_CMD, struct.pack("=BxH", 1, socket.htons(socket.AF_INET)))], 1)  # BIND
    _config(sock, queue, [_attr(_CFG_PARAMS, struct.pack("!IB", 0, 1)),  # copy_range 0, NFQNL_COPY_META
                          _attr(_CFG_QUEUE_MAXLEN, struct.pack("!I", 65536))], 2)
    print("bound", flush=True)
    pending = []  # (due, id), in arrival order: one delay for all, so due times only grow
    delay = delay_ms / 1000.0
    while True:
        timeout = max(0.0, pending[0][0] - time.monotonic()) if pending else None
        ready, _, _ = select.select([sock], [], [], timeout)
        if ready:
            now = time.monotonic()
            pending.extend((now + delay, pid) for pid in _packet_ids(sock.recv(1 << 20)))
        now = time.monotonic()
        due = 0
        while due < len(pending) and pending[due][0] <= now:
            due += 1
        if due:
            # Accepts every queued packet up to this id (ids grow in arrival order).
            sock.send(_message(_MSG_VERDICT_BATCH, queue,
                               [_attr(_VERDICT_HDR, struct.pack("!II", _NF_ACCEPT, pending[due - 1][1]))]))
            del pending[:due]


if __name__ == "__main__" and sys.argv[1:2] == ["delay"]:
    delay_main(int(sys.argv[2]), int(sys.argv[3]))
