"""A record of the traffic between the hosts of the hosts-apart cluster
(deploy/local-slurm/start.sh --hosts-apart), with Debian's tcpdump, for
tests that must show who talks to whom and how (issue 43; TLS and
containers reuse it).

tcpdump listens on the switch's two bridges, `eth` (the cluster network,
198.18.N.0/24) and `ib` (the compute nodes' second one, 198.19.N.0/24), in
the switch's own network namespace: it sees every frame between two hosts
and nothing that stays inside one (a host's loopback never reaches a
bridge).

    with Capture(conf, tmp_path) as cap:
        ... run something ...
    flows = cap.flows()            # {(src, dst, dst_port, proto), ...} of IPv4 TCP/UDP packets
    cap.pcap("eth")                # the file, for tcpdump -r or Wireshark
"""
import os
import re
import signal
import subprocess
import time

from helpers import hosts

BRIDGES = ("eth", "ib")
_LINE = re.compile(r"^IP (\d+\.\d+\.\d+\.\d+)\.(\d+) > (\d+\.\d+\.\d+\.\d+)\.(\d+): (tcp|UDP|Flags)")


class Capture:
    def __init__(self, conf, directory, snaplen=128):
        self.conf = conf
        self.directory = str(directory)
        self.snaplen = snaplen
        self.procs = {}

    def pcap(self, bridge):
        return os.path.join(self.directory, f"{bridge}.pcap")

    def start(self):
        ns = f"--net=/run/netns/{hosts.netns(self.conf, 'sw')}"
        for bridge in BRIDGES:
            # -U: each packet written as it comes; --immediate-mode: each
            # handed over as it comes (else libpcap keeps packets in the
            # kernel's ring until a block fills or times out, and the ones
            # still there at SIGINT are lost). So a stop loses nothing.
            self.procs[bridge] = subprocess.Popen(
                ["nsenter", ns, "--", "tcpdump", "-i", bridge, "-n", "-U", "--immediate-mode", "-s",
                 str(self.snaplen), "-w",
                 self.pcap(bridge)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for bridge in BRIDGES:
            # tcpdump says "listening on ..." once it captures.
            line = self.procs[bridge].stderr.readline().decode()
            if "listening on" not in line:
                raise RuntimeError(f"tcpdump on {bridge} did not start: {line}")
        return self

    def stop(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in self.procs.values():
            proc.wait(timeout=30)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def packets(self, bridge="eth"):
        """tcpdump's one-line summary of every IPv4 packet on `bridge`."""
        out = subprocess.run(["tcpdump", "-r", self.pcap(bridge), "-n", "-q", "-t", "ip"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, check=True)
        return out.stdout.splitlines()

    def flows(self, bridge="eth"):
        """{(source address, destination address, destination port,
        "tcp"|"udp")} of the IPv4 packets on `bridge`; a reply counts as a
        flow of its own (its destination port is the client's)."""
        found = set()
        for line in self.packets(bridge):
            m = _LINE.match(line)
            if m:
                found.add((m.group(1), m.group(3), int(m.group(4)), "udp" if m.group(5) == "UDP" else "tcp"))
        return found

    def connections(self, bridge="eth"):
        """{(client address, server address, server port)} of every TCP
        connection opened on `bridge` (its SYN)."""
        out = subprocess.run(["tcpdump", "-r", self.pcap(bridge), "-n", "-q", "-t",
                              "tcp[tcpflags] & tcp-syn != 0 and tcp[tcpflags] & tcp-ack == 0"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True)
        found = set()
        for line in out.stdout.splitlines():
            m = _LINE.match(line)
            if m:
                found.add((m.group(1), m.group(3), int(m.group(4))))
        return found

    def addresses(self, bridge="eth"):
        """Every IPv4 address seen on `bridge`, as source or destination."""
        return {a for f in self.flows(bridge) for a in f[:2]}
