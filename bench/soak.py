#!/usr/bin/env python3
"""Chaos soak (issue 17): M experiments of the reference workload
(examples/linear_ps, 2 ps + 4 workers on 3 nodes) on a running local Slurm
cluster, with faults injected at random times from a seed, then checks that
nothing was lost.

Faults (each kind can be turned off with --faults):
  daemon      kill -9 of tfslurmd, restarted after a random delay
  agent       kill -9 of a random agent
  program     kill -9 of a random training program
  stop        SIGSTOP of a random agent for longer than the heartbeat
              timeout, then SIGCONT
  node        a node failure: its slurmd killed, the node set DOWN (Slurm
              ends its jobs NODE_FAIL), then slurmd restarted and the node
              resumed
  disk        the output root (a small tmpfs) filled up for a while
  slow        the agents' connections to tfslurmd delayed (a proxy between
              them adds latency to every chunk) for a while
  refuse      the agents' new connections to tfslurmd closed at once by the
              proxy for a while
On a cluster with its hosts apart (deploy/local-slurm/start.sh
--hosts-apart; the soak then runs on its service host), also
(tests/integration/helpers/netfault.py):
  partition   a node cut off from the service host only, for less or more
              than the reconnect window (12 s)
  isolate     a node cut off from everything, for less or more than Slurm's
              SlurmdTimeout (30 s there)
  link        a node's link slow and lossy (100-300 ms, 2-10% lost) for a while

The agents reach tfslurmd through that proxy: tfslurmd listens for agents
on 127.0.0.1:P and advertises the proxy's host, which listens on the same
port P: 127.0.0.3 on one host, the service host's cluster address when the
hosts are apart.

At the end it prints, and exits 1 unless all hold:
  every experiment ended, with a reason; none lost; exactly one Slurm job per
  attempt (from slurmctld, which keeps ended jobs for MinJobAge=3600 on the
  local cluster); no task left running on any node; PRAGMA integrity_check ok.

Run as root (it mounts a tmpfs and kills Slurm daemons). bench/soak.sh starts
the cluster and calls this; tests/integration/test_soak.py runs a small one.

  soak.py --slurm-conf FILE --bin DIR [--experiments 20] [--daemon-kills 20]
          [--seed 1] [--steps 200] [--step-sleep 0.05] [--fault-interval 5] [--disk-faults 2]
          [--faults daemon,agent,...] [--deadline 1800] [--workdir DIR]
"""
import argparse
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error

from http_json import http

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from helpers import hosts, netfault  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TRAIN = os.path.join(REPO, "examples/linear_ps/train.py")
ALL_FAULTS = ("daemon", "agent", "program", "stop", "node", "disk", "slow", "refuse", "partition", "isolate",
              "link")
NETWORK_FAULTS = ("partition", "isolate", "link")  # hosts apart only
TERMINAL = ("succeeded", "failed", "cancelled")
PROXY_HOST = "127.0.0.3"  # on one host; the service host's cluster address when apart (Soak.run)
RECONNECT_WINDOW_S = 12  # tfslurmd's --reconnect-window-s (default)
SLURMD_TIMEOUT_S = 30  # slurm.conf's, when the hosts are apart
HEARTBEAT_MS = 1000
LOST_AFTER_S = 4 * HEARTBEAT_MS / 1000  # lost_after_missed_heartbeats (4) x heartbeat


def log(message):
    print(f"soak {time.strftime('%H:%M:%S')}: {message}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proxy:
    """TCP forwarder PROXY_HOST:port -> 127.0.0.1:port with injectable delay
    and refusal."""

    def __init__(self, port):
        self.port = port
        self.delay_s = 0.0
        self.refusing = False
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((PROXY_HOST, port))  # PROXY_HOST as Soak.run set it
        self.listener.listen(512)
        self.closed = False
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def _accept_loop(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                client.close()  # RST: as close to "refused" as an accepted connection gets
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()  # tfslurmd is down: the agent sees the connection drop
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if self.delay_s:
                    time.sleep(self.delay_s)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.closed = True
        self.listener.close()


class Daemon:
    """tfslurmd on fixed ports, so that it can be killed and started again."""

    def __init__(self, args, workdir, output_root):
        self.args = args
        self.workdir = workdir
        self.db = os.path.join(workdir, "tfslurm.db")
        self.output_root = output_root
        self.http_port = free_port()
        self.agent_port = free_port()
        self.url = f"http://127.0.0.1:{self.http_port}"
        self.proc = None
        self.log = open(os.path.join(workdir, "tfslurmd.log"), "ab")

    def start(self):
        ready = os.path.join(self.workdir, "ready.json")
        if os.path.exists(ready):
            os.unlink(ready)
        env = dict(os.environ, SLURM_CONF=self.args.slurm_conf)
        deadline = time.monotonic() + 60
        while True:
            self.proc = subprocess.Popen(
                [os.path.join(self.args.bin, "tfslurmd"), "--no-auth", "--listen", f"127.0.0.1:{self.http_port}",
                 "--agent-listen", f"127.0.0.1:{self.agent_port}", "--advertise", PROXY_HOST, "--db", self.db,
                 "--output-root", self.output_root, "--ready-file", ready, "--poll-interval-ms", "500",
                 "--heartbeat-ms", str(HEARTBEAT_MS), "--shutdown-grace-ms", "3000"]
                + (["--barrier-timeout-s", str(self.args.barrier_timeout_s)]
                   if self.args.barrier_timeout_s else [])
                + (["--allow-root"] if os.geteuid() == 0 else []),
                env=env, stdout=self.log, stderr=subprocess.STDOUT)
            while time.monotonic() < deadline and self.proc.poll() is None:
                if os.path.exists(ready) and os.path.getsize(ready) > 0:
                    return
                time.sleep(0.05)
            if self.proc.poll() is None or time.monotonic() >= deadline:
                raise RuntimeError("tfslurmd did not become ready; see " + self.log.name)
            # A port still held a moment after kill -9 (TIME_WAIT is allowed;
            # a listener still closing is not): try again.
            time.sleep(0.5)

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill9()

    def call(self, method, path, body=None, timeout=120):
        """An HTTP call to tfslurmd, retried while it is down or restarting."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return http(method, self.url + path, body, timeout=10)
            except (urllib.error.URLError, ConnectionError, socket.timeout, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)


def processes_with(env_entries, cmd_part=None):
    """Pids whose environment holds every entry of env_entries."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace").split("\0")
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").replace("\0", " ")
        except OSError:
            continue
        if all(any(e.startswith(want) for e in env) for want in env_entries) and (not cmd_part or cmd_part in cmd):
            found.append((int(pid), cmd))
    return found


def soak_processes(ids, kind):
    """(pid, experiment id) of this soak's agents ("agent") or programs ("program")."""
    out = []
    for pid, cmd in processes_with(["SLURM_JOB_ID="]):
        if kind == "agent" and "tfslurm-agent" in cmd:
            m = re.search(r"--experiment (\S+)", cmd)
        elif kind == "program" and TRAIN in cmd:
            try:
                env = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace").split("\0")
            except OSError:
                continue
            m = next((re.match(r"EXPERIMENT_ID=(\S+)", e) for e in env if e.startswith("EXPERIMENT_ID=")), None)
        else:
            continue
        if m and m.group(1) in ids:
            out.append((pid, m.group(1)))
    return out


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.slurm_env = dict(os.environ, SLURM_CONF=args.slurm_conf)
        self.cluster_dir = os.path.dirname(os.path.dirname(os.path.abspath(args.slurm_conf)))
        self.workdir = args.workdir or tempfile.mkdtemp(prefix="tfs-soak-", dir="/tmp")
        os.chmod(self.workdir, 0o755)
        self.output_root = os.path.join(self.workdir, "out")
        os.makedirs(self.output_root, exist_ok=True)
        self.tmpfs = False
        self.injected = {kind: 0 for kind in ALL_FAULTS}
        self.ids = [f"soak-{args.seed}-{i:03d}" for i in range(args.experiments)]

    # ------------------------------------------------------------ setup
    def nodes_in_other_mount_namespaces(self):
        """The nodes whose slurmd has a mount namespace of its own (a cluster
        started --containers gives each node its own node-local disk that
        way: deploy/local-slurm/start.sh). A tmpfs mounted here after they
        started never reaches them when / is a private mount (no
        propagation), so their tasks could not open their output files."""
        own = os.readlink("/proc/self/ns/mnt")
        nodes = []
        for node in ("node1", "node2", "node3"):
            try:
                if os.readlink(f"/proc/{self.slurmd_pid(node)}/ns/mnt") != own:
                    nodes.append(node)
            except (OSError, ValueError):
                continue
        return nodes

    def slurmd_pid(self, node):
        """node's slurmd, from the pid file start.sh wrote (OSError, ValueError when none)."""
        return int(open(os.path.join(self.cluster_dir, "run", f"slurmd-{node}.pid")).read().split()[0])

    def mount_tmpfs(self):
        if "disk" not in self.args.faults:
            return
        apart = self.nodes_in_other_mount_namespaces()
        if apart:
            log(f"{', '.join(apart)} in mount namespaces of their own: a tmpfs on the output root would "
                "not reach them: no 'disk' faults")
            self.args.faults.discard("disk")
            return
        rc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "tfs-soak", self.output_root],
                            stderr=subprocess.PIPE, text=True)
        if rc.returncode != 0:
            log(f"cannot mount a tmpfs on the output root ({rc.stderr.strip()}): no 'disk' faults")
            self.args.faults.discard("disk")
        else:
            self.tmpfs = True

    def spec(self, exp_id):
        return {
            "id": exp_id,
            "command": ["python3", TRAIN, "--steps", str(self.args.steps), "--checkpoint-every", "20",
                        "--step-sleep", str(self.args.step_sleep)],
            "workdir": os.path.dirname(TRAIN),
            "cluster": {"ps": 2, "worker": 4},
            "resources": {"partition": "debug", "nodes": 3, "tasks_per_node": 2, "time_limit": "00:15:00"},
            "restart": {"max_restarts": 8, "on": ["preempted", "timeout", "node_fail", "retryable_exit"],
                        "backoff_s": 1},
        }

    # ----------------------------------------------------------- faults
    def fault_daemon(self):
        self.daemon.kill9()
        down = self.rng.uniform(0.2, 4.0)
        log(f"fault daemon: tfslurmd killed -9, restarting in {down:.1f} s")
        time.sleep(down)
        self.daemon.start()

    def fault_kill(self, kind):
        found = soak_processes(set(self.ids), kind)
        if not found:
            return False
        pid, exp_id = self.rng.choice(sorted(found))
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        log(f"fault {kind}: kill -9 of pid {pid} ({exp_id})")
        return True

    def fault_stop(self):
        found = soak_processes(set(self.ids), "agent")
        if not found:
            return False
        pid, exp_id = self.rng.choice(sorted(found))
        pause = LOST_AFTER_S + self.rng.uniform(1.0, 4.0)
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            return False
        log(f"fault stop: agent pid {pid} ({exp_id}) stopped for {pause:.1f} s")
        time.sleep(pause)
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        return True

    def fault_node(self):
        node = self.rng.choice(["node1", "node2", "node3"])
        try:
            os.kill(self.slurmd_pid(node), signal.SIGKILL)
        except (OSError, ValueError):
            return False
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=soak node failure"],
                       env=self.slurm_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        down = self.rng.uniform(2.0, 6.0)
        log(f"fault node: {node}'s slurmd killed -9 and the node set DOWN for {down:.1f} s")
        time.sleep(down)
        subprocess.run([os.path.join(REPO, "deploy/local-slurm/start.sh"), self.cluster_dir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], env=self.slurm_env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # That resume can come before slurmctld has seen the new slurmd, or be
        # refused; then Slurm's verdict is waited for as after an isolation.
        self.return_to_service(node)
        return True

    def fault_disk(self):
        filler = os.path.join(self.output_root, ".soak-filler")
        full_for = self.rng.uniform(2.0, 6.0)
        with open(filler, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * (1 << 20))
            except OSError:
                pass
        log(f"fault disk: the output root is full for {full_for:.1f} s")
        time.sleep(full_for)
        os.unlink(filler)
        return True

    def fault_network(self, kind):
        node = self.rng.choice(list(hosts.NODES))
        conf = self.args.slurm_conf
        if kind == "partition":
            span = self.rng.choice([self.rng.uniform(2.0, RECONNECT_WINDOW_S - 4),
                                    self.rng.uniform(RECONNECT_WINDOW_S + 3, RECONNECT_WINDOW_S + 15)])
            netfault.cut_start(conf, node, ["svc"])
            log(f"fault partition: {node} cut off from the service host for {span:.1f} s")
        elif kind == "isolate":
            span = self.rng.choice([self.rng.uniform(2.0, 8.0),
                                    self.rng.uniform(SLURMD_TIMEOUT_S + 5, SLURMD_TIMEOUT_S + 20)])
            netfault.cut_start(conf, node)
            log(f"fault isolate: {node} cut off from every host for {span:.1f} s")
        else:
            span = self.rng.uniform(5.0, 15.0)
            delay, loss = self.rng.randint(100, 300), self.rng.randint(2, 10)
            netfault.slow_link_start(conf, node, delay, loss)
            log(f"fault link: {node}'s link {delay} ms slow, {loss}% lost, for {span:.1f} s")
        try:
            time.sleep(span)
        finally:
            netfault.heal(conf, node)
        if kind == "isolate":
            self.return_to_service(node)
        return True

    def return_to_service(self, node, timeout=60):
        """Back on the network, a node cut off past SlurmdTimeout is
        resumed, as an admin would. Left alone it could stay DOWN for
        minutes: in one CI run slurmctld set node2 DOWN ("not responding")
        a second after it came back, and heard from it again only 171 s
        later ("Node node2 now responding"), since it does not ping a node
        that is down and silent. A resume while the node is still IDLE* (not
        yet marked) is refused ("Invalid node state transition ... from=IDLE*
        to=RESUME"), so this waits for Slurm's verdict: responding, or DOWN
        and then resumed, which has slurmctld ping it again."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], env=self.slurm_env,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.split()
            state = state[0] if state else ""
            if state and not state.endswith("*") and not state.startswith(("down", "drain", "fail")):
                return True
            if state.startswith("down"):
                subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], env=self.slurm_env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
        log(f"{node} did not return to service within {timeout} s")
        return False

    def fault_proxy(self, kind):
        span = self.rng.uniform(2.0, 6.0)
        if kind == "slow":
            self.proxy.delay_s = self.rng.uniform(0.05, 0.5)
            log(f"fault slow: agents' traffic delayed {self.proxy.delay_s * 1000:.0f} ms per chunk for {span:.1f} s")
        else:
            self.proxy.refusing = True
            log(f"fault refuse: agents' new connections reset for {span:.1f} s")
        time.sleep(span)
        self.proxy.delay_s = 0.0
        self.proxy.refusing = False
        return True

    def next_kind(self):
        """Every third fault is a daemon kill (until --daemon-kills were
        made); the others go round the other kinds in an order drawn from the
        seed, so that every kind comes up. A full disk is made at most
        --disk-faults times, and only once every other kind has come up and
        the daemon kills are made: it ends every experiment that writes then
        (the workload, like TensorFlow, fails on ENOSPC, a permanent exit),
        and the soak needs experiments running to test the rest. (Drawn
        earlier, it ended all three experiments of the CI soak before the
        last daemon kill in one run out of several, depending on whether the
        programs wrote while the disk was full.) Until every kind has come up
        once, only the kinds not yet injected are drawn: a kind that found
        nothing to inject into (no program running while the experiments
        wait for their next attempt) is drawn again, and the node failures
        already made are not, since each takes an attempt from every
        experiment on the node. (Drawn from every kind, a loaded machine's
        slow restarts made the injections fail and the cycles repeat, and the
        node failures ran all three experiments of the CI soak out of
        max_restarts before the full disk came.)"""
        self.faults_made = getattr(self, "faults_made", 0) + 1
        not_yet = sorted(k for k in self.args.faults if k not in ("daemon", "disk") and not self.injected[k])
        rest_done = not not_yet and (
            "daemon" not in self.args.faults or self.injected["daemon"] >= self.args.daemon_kills)
        others = not_yet or sorted(k for k in self.args.faults if k != "daemon" and (
            k != "disk" or (rest_done and self.injected["disk"] < self.args.disk_faults)))
        if "daemon" in self.args.faults and self.injected["daemon"] < self.args.daemon_kills and (
                self.faults_made % 3 == 1 or not others):
            return "daemon"
        if not others:
            return None
        while True:
            if not getattr(self, "cycle", None):
                self.cycle = others[:]
                self.rng.shuffle(self.cycle)
            kind = self.cycle.pop()
            if kind in others:  # not a kind that has reached its cap since
                return kind

    def inject_one(self):
        kind = self.next_kind()
        if kind is None:
            return
        done = {
            "daemon": lambda: self.fault_daemon() or True,
            "agent": lambda: self.fault_kill("agent"),
            "program": lambda: self.fault_kill("program"),
            "stop": self.fault_stop,
            "node": self.fault_node,
            "disk": self.fault_disk,
            "slow": lambda: self.fault_proxy("slow"),
            "refuse": lambda: self.fault_proxy("refuse"),
            "partition": lambda: self.fault_network("partition"),
            "isolate": lambda: self.fault_network("isolate"),
            "link": lambda: self.fault_network("link"),
        }[kind]()
        if done:
            self.injected[kind] += 1
        else:
            log(f"fault {kind}: nothing to inject it into right now")

    # ------------------------------------------------------------- run
    def states(self):
        status, body = self.daemon.call("GET", "/experiments?limit=1000")
        if status != 200:
            return {}
        items = body.get("experiments", body) if isinstance(body, dict) else body
        return {e["id"]: e for e in items}

    def run(self):
        started = time.monotonic()
        self.mount_tmpfs()
        global PROXY_HOST
        if hosts.apart(self.args.slurm_conf):
            PROXY_HOST = hosts.address(self.args.slurm_conf, "svc")
            hosts.enter_service_host(self.args.slurm_conf)
        else:
            self.args.faults -= set(NETWORK_FAULTS)
        self.daemon = Daemon(self.args, self.workdir, self.output_root)
        self.proxy = Proxy(self.daemon.agent_port)
        self.daemon.start()
        for exp_id in self.ids:
            self.submit(exp_id)
        log(f"{len(self.ids)} experiments submitted; faults: {','.join(sorted(self.args.faults))}; "
            f"seed {self.args.seed}; workdir {self.workdir}")
        deadline = started + self.args.deadline
        while time.monotonic() < deadline:
            ended = [i for i, e in self.states().items() if e["state"] in TERMINAL and i in self.ids]
            if self.args.cancel_when_every_fault_made and self.every_fault_made():
                self.cancel_open()
                break
            if self.args.keep_open and not self.every_fault_made() and (
                    len(self.ids) - len(ended) < self.args.experiments) and (
                    len(self.ids) < 3 * self.args.experiments):
                self.submit(f"soak-{self.args.seed}-{len(self.ids):03d}")
                continue
            if len(ended) == len(self.ids):
                break
            time.sleep(self.rng.uniform(0.5, 1.5) * self.args.fault_interval)
            self.inject_one()
        log("faults over; waiting for every experiment to end")
        while time.monotonic() < deadline:
            states = self.states()
            if all(states.get(i, {}).get("state") in TERMINAL for i in self.ids):
                break
            time.sleep(1)
        self.elapsed = time.monotonic() - started
        return self.check()

    def submit(self, exp_id):
        status, body = self.daemon.call("POST", "/experiments", self.spec(exp_id))
        # 409: a retried POST whose first try was stored before tfslurmd was killed.
        if status != 201 and not (status == 409 and exp_id in self.states()):
            raise RuntimeError(f"submitting {exp_id}: {status} {body}")
        if exp_id not in self.ids:
            self.ids.append(exp_id)
            log(f"{exp_id} submitted in place of an experiment that ended before every kind of fault "
                "was made")

    def every_fault_made(self):
        return all(self.injected[k] > 0 for k in self.args.faults) and (
            "daemon" not in self.args.faults or self.injected["daemon"] >= self.args.daemon_kills)

    def cancel_open(self):
        """Every kind of fault was made: the experiments still open are
        cancelled, which must end them (their jobs, tasks and rows) as any
        other end, rather than left to train on past the deadline under
        more faults (a small soak's experiments that a full disk did not
        end ran on, restarting, until its deadline)."""
        for exp_id, e in sorted(self.states().items()):
            if exp_id in self.ids and e["state"] not in TERMINAL:
                status, body = self.daemon.call("DELETE", f"/experiments/{exp_id}")
                log(f"every kind of fault made: {exp_id} ({e['state']}) cancelled: {status}")

    # ----------------------------------------------------------- checks
    def check(self):
        final = {}
        for exp_id in self.ids:
            status, body = self.daemon.call("GET", f"/experiments/{exp_id}")
            if status == 200:
                final[exp_id] = body
        # Let the last jobs leave Slurm and their processes end.
        wait_until(lambda: not self.running_jobs(), 120)
        wait_until(lambda: not self.leftover_processes(), 60)
        self.daemon.stop()
        self.proxy.close()

        lost = [i for i in self.ids if i not in final]
        not_ended = [i for i, e in final.items() if e["state"] not in TERMINAL]
        no_reason = [i for i, e in final.items() if not e.get("reason")]
        duplicates, orphans, missing = self.jobs_per_attempt(final)
        leftovers = self.leftover_processes()
        running = self.running_jobs()
        integrity = sqlite3.connect(f"file:{self.daemon.db}?mode=ro", uri=True).execute(
            "PRAGMA integrity_check").fetchone()[0]
        by_state = {}
        for e in final.values():
            by_state[e["state"]] = by_state.get(e["state"], 0) + 1
        attempts = sum(len(e["attempts"]) for e in final.values())

        rows = [
            ("experiments", len(self.ids)),
            ("ended", f"{len(final) - len(not_ended)} ({', '.join(f'{k} {v}' for k, v in sorted(by_state.items()))})"),
            ("attempts", attempts),
            ("faults injected", ", ".join(f"{k} {v}" for k, v in self.injected.items() if k in self.args.faults)),
            ("lost experiments", len(lost)),
            ("not ended", len(not_ended)),
            ("ended without a reason", len(no_reason)),
            ("attempts with more than one Slurm job", len(duplicates)),
            ("Slurm jobs of no attempt", len(orphans)),
            ("attempts whose job Slurm does not know", len(missing)),
            ("stray tasks (processes) left", len(leftovers)),
            ("jobs still in Slurm", len(running)),
            ("PRAGMA integrity_check", integrity),
            ("wall time", f"{self.elapsed:.0f} s"),
        ]
        print("\n| check | value |\n|---|---|")
        for k, v in rows:
            print(f"| {k} | {v} |")
        print("\nend reasons:")
        for exp_id in self.ids:
            e = final.get(exp_id)
            if e:
                print(f"  {exp_id}: {e['state']} after {len(e['attempts'])} attempt(s): {e['reason']}")
        problems = []
        for name, items in (("lost", lost), ("not ended", not_ended), ("no reason", no_reason),
                            ("duplicate jobs", duplicates), ("orphan jobs", orphans), ("missing jobs", missing),
                            ("stray tasks", leftovers), ("jobs still in Slurm", running)):
            if items:
                problems.append(f"{name}: {items}")
        if integrity != "ok":
            problems.append(f"integrity_check: {integrity}")
        if "daemon" in self.args.faults and self.injected["daemon"] < self.args.daemon_kills:
            problems.append(f"only {self.injected['daemon']} of {self.args.daemon_kills} daemon kills were made "
                            "before every experiment ended: give the experiments more --steps")
        if self.args.require_every_fault:
            missed = sorted(k for k in self.args.faults if not self.injected[k])
            if missed:
                problems.append(f"fault kinds never injected: {', '.join(missed)} (more --steps?)")
        if problems:
            print("soak: FAIL\n  " + "\n  ".join(problems))
            return 1
        print(f"soak: PASS: {len(self.ids)} experiments, {sum(self.injected.values())} faults "
              f"({self.injected['daemon']} daemon kills), lost 0, duplicate jobs 0, stray tasks 0, integrity ok")
        return 0

    def slurm_jobs(self):
        """This soak's jobs known to slurmctld: [(job id, name, state)]."""
        out = subprocess.run(["scontrol", "-o", "show", "job"], env=self.slurm_env, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True).stdout
        jobs = []
        for line in out.splitlines():
            fields = dict(t.split("=", 1) for t in line.split() if "=" in t)
            if fields.get("WorkDir", "").startswith(self.output_root + "/"):
                jobs.append((int(fields["JobId"]), fields.get("JobName", ""), fields.get("JobState", "")))
        return jobs

    def running_jobs(self):
        return [j for j in self.slurm_jobs() if j[2] in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING",
                                                          "SUSPENDED", "REQUEUED")]

    def jobs_per_attempt(self, final):
        by_name = {}
        for job_id, name, _ in self.slurm_jobs():
            by_name.setdefault(name, []).append(job_id)
        duplicates = {n: ids for n, ids in by_name.items() if len(ids) > 1}
        recorded = set()
        missing = []
        for exp_id, e in final.items():
            for a in e["attempts"]:
                job = a.get("slurm_job_id") or 0
                if job:
                    recorded.add(job)
                    name = a.get("job_name") or f"tfx-{exp_id}-a{a['number']}"
                    if job not in by_name.get(name, []):
                        missing.append((exp_id, a["number"], job))
        orphans = [(n, i) for n, ids in by_name.items() for i in ids if i not in recorded]
        return duplicates, orphans, missing

    def leftover_processes(self):
        return soak_processes(set(self.ids), "agent") + soak_processes(set(self.ids), "program")

    def cleanup(self):
        """Leaves the cluster as it found it, after a pass, a failure or a
        SIGTERM: tfslurmd stopped and its jobs cancelled (a tfslurmd left
        running would go on submitting attempts on a cluster other tests
        use), stopped processes continued, the tmpfs unmounted, every node
        back in service."""
        daemon = getattr(self, "daemon", None)
        if daemon is not None and daemon.proc is not None and daemon.proc.poll() is None:
            daemon.proc.kill()
            daemon.proc.wait()
        if daemon is not None and os.path.exists(daemon.db):
            db = sqlite3.connect(f"file:{daemon.db}?mode=ro", uri=True)
            jobs = sorted({str(r[0]) for r in db.execute("SELECT slurm_job_id FROM attempts WHERE slurm_job_id > 0")})
            db.close()
            if jobs:
                subprocess.run(["scancel"] + jobs, env=self.slurm_env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=False)
        for kind in ("agent", "program"):
            for pid, _ in soak_processes(set(self.ids), kind):
                try:
                    os.kill(pid, signal.SIGCONT)
                except OSError:
                    pass
        if self.tmpfs:
            # Keep the jobs' logs (the tmpfs goes with the umount).
            shutil.copytree(self.output_root, os.path.join(self.workdir, "output"), dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns(".soak-filler"), ignore_dangling_symlinks=True)
            subprocess.run(["umount", "-l", self.output_root], check=False)
        for node in ("node1", "node2", "node3"):
            self.return_to_service(node)


def wait_until(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slurm-conf", required=True)
    parser.add_argument("--bin", required=True, help="directory with tfslurmd and tfslurm-agent")
    parser.add_argument("--experiments", type=int, default=20)
    parser.add_argument("--daemon-kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--step-sleep", type=float, default=0.05)
    parser.add_argument("--fault-interval", type=float, default=5.0, help="mean seconds between faults")
    parser.add_argument("--disk-faults", type=int, default=2, help="at most this many full disks")
    parser.add_argument("--faults", default=",".join(ALL_FAULTS), help="kinds to inject, comma-separated")
    parser.add_argument("--deadline", type=float, default=1800, help="seconds before giving up")
    parser.add_argument("--require-every-fault", action="store_true",
                        help="fail unless every kind of --faults was injected at least once")
    parser.add_argument("--keep-open", action="store_true",
                        help="until every kind of fault was made, submit a new experiment for each "
                             "that ends (at most 3 x --experiments in all), so the faults have "
                             "something to hit")
    parser.add_argument("--barrier-timeout-s", type=int,
                        help="tfslurmd's: how long an attempt waits for its tasks to register")
    parser.add_argument("--cancel-when-every-fault-made", action="store_true",
                        help="once every kind of --faults and every daemon kill was made, cancel the "
                             "experiments still open (DELETE) instead of waiting for them to train to "
                             "their end or run out of restarts")
    parser.add_argument("--workdir", help="default: a new /tmp/tfs-soak-* (kept, with tfslurmd.log)")
    args = parser.parse_args()
    args.faults = set(f for f in args.faults.split(",") if f)
    unknown = args.faults - set(ALL_FAULTS)
    if unknown:
        parser.error(f"--faults: unknown kind(s) {', '.join(sorted(unknown))}; allowed: {', '.join(ALL_FAULTS)}")
    if os.geteuid() != 0:
        parser.error("run as root: the soak mounts a tmpfs and kills Slurm daemons")
    soak = Soak(args)
    # A SIGTERM (the test's timeout) ends the soak through its cleanup.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        return soak.run()
    finally:
        soak.cleanup()


if __name__ == "__main__":
    sys.exit(main())
