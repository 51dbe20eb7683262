"""A node of the local Slurm cluster (deploy/local-slurm) failing as a real
node does, and coming back: for the integration tests (tests/integration,
through conftest) and the benches (bench/in_place.py).

The three slurmd of the local cluster share one host, so killing a node's
slurmd leaves its job steps running; fail_node kills the node's slurmstepd
processes and everything they started too, as a power loss would, and sets
the node DOWN as slurmctld does once SlurmdTimeout passes.
"""
import os
import signal
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _env(conf):
    return dict(os.environ, SLURM_CONF=conf)


def node_state(conf, node):
    """The node's state as sinfo names it (idle, allocated, down*, ...)."""
    out = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], env=_env(conf),
                         stdout=subprocess.PIPE, text=True)
    return (out.stdout.split() or [""])[0]  # a line per partition it is in


def _stepds_of(cluster_dir, node):
    """The node's slurmstepd processes: each keeps its node's slurmd log open
    (common.sh's stepd_pids tells clusters apart the same way)."""
    log = os.path.join(cluster_dir, "log", f"slurmd-{node}.log")
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if open(f"/proc/{entry}/comm").read().strip() != "slurmstepd":
                continue
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}") == log:
                    found.append(int(entry))
                    break
            except OSError:
                pass
    return found


def _descendants(pids):
    out, frontier = [], list(pids)
    while frontier:
        ps = subprocess.run(["ps", "-o", "pid=", "--ppid", ",".join(map(str, frontier))],
                            stdout=subprocess.PIPE, text=True).stdout.split()
        frontier = [int(p) for p in ps]
        out += frontier
    return out


def fail_node(conf, node):
    """Kills -9 the node's slurmd, its slurmstepds and every process they
    started (agents, programs) at once, then sets it DOWN. Returns the time
    of the kill (Unix seconds)."""
    cluster_dir = os.path.dirname(os.path.dirname(conf))
    slurmd = int(open(os.path.join(cluster_dir, "run", f"slurmd-{node}.pid")).read().split()[0])
    stepds = _stepds_of(cluster_dir, node)
    victims = [slurmd] + stepds + _descendants(stepds)
    killed_at = time.time()
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=tfslurm: node failure"],
                   env=_env(conf), check=True)
    return killed_at


def restore_node(conf, node, timeout=120):
    """Brings back a node fail_node killed: its slurmd again (start.sh starts
    what is not running), then RESUME; waits until Slurm has it up."""
    cluster_dir = os.path.dirname(os.path.dirname(conf))
    subprocess.run([os.path.join(HERE, "start.sh"), cluster_dir],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], env=_env(conf),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while node_state(conf, node) not in ("idle", "mixed", "allocated"):
        if time.time() > deadline:
            raise RuntimeError(f"{node} did not come back within {timeout} s")
        time.sleep(0.2)
