#!/usr/bin/env python3
"""The rendezvous on a lossy, slow link against a clean one (issue 43):
experiments of 6 tasks over the 3 nodes of the local cluster with its hosts
apart, alternately with node2's link clean and with 5% of its packets lost
and the rest delayed 100 ms (tests/integration/helpers/netfault.py: tc
netem, or iptables' statistic match and an NFQUEUE delay where the kernel
has no netem). Runs on the cluster's service host (bench/lossy_rendezvous.sh
puts it there), with a tfslurmd of its own.

The rendezvous is measured from the agents' own logs (one clock: one
machine): from the first agent's start ("Slurm job N task P ...") to the
last Assignment ("assigned role=..."), so it holds the agents' connections
to tfslurmd over the link, their registrations, the barrier and the
Assignments back. Both of tfslurmd's ports speak TLS, as a site's do
across hosts (a certificate from `tfslurmd tls init` naming this host), so
each connection over the link pays its handshake too. Prints a table (median, p90, max per link) and exits 1
when an experiment does not succeed, or when a task of a lossy run was lost.

  lossy_rendezvous.py --slurm-conf FILE --bin DIR [--runs 5] [--delay-ms 100] [--loss 5]
"""
import argparse
import datetime
import glob
import json
import os
import re
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from helpers import netfault  # noqa: E402

STAMP = re.compile(r"\] (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+) info: (Slurm job \d+ task|assigned role=)")


def http(method, url, tls, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30, context=tls) as r:
        return json.loads(r.read() or b"null")


def rendezvous_s(log_dir):
    """From the first agent's start to the last Assignment, in seconds."""
    starts, assigned = [], []
    for path in glob.glob(os.path.join(log_dir, "task-*.out")):
        for line in open(path, errors="replace"):
            m = STAMP.search(line)
            if m:
                t = datetime.datetime.fromisoformat(m.group(1)).timestamp()
                (starts if m.group(2).startswith("Slurm") else assigned).append(t)
    if len(assigned) != 6 or not starts:
        raise SystemExit(f"lossy_rendezvous: {log_dir}: {len(assigned)} of 6 tasks assigned")
    return max(assigned) - min(starts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--slurm-conf", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--delay-ms", type=int, default=100)
    ap.add_argument("--loss", type=float, default=5)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench-lossy-", dir="/tmp")
    ready = os.path.join(work, "ready.json")
    log = open(os.path.join(work, "tfslurmd.log"), "w")
    env = dict(os.environ, SLURM_CONF=args.slurm_conf)
    tfslurmd = os.path.join(args.bin, "tfslurmd")
    pki = os.path.join(work, "pki")
    # The agents dial this host by its name (tfslurmd's --advertise default).
    subprocess.run([tfslurmd, "tls", "init", "--dir", pki, "--name", socket.gethostname(), "--name",
                    "localhost", "--ip", "127.0.0.1"], check=True, stdout=subprocess.DEVNULL)
    ca = os.path.join(pki, "ca.pem")
    tls = ssl.create_default_context(cafile=ca)  # one for every request: the CA is read once
    daemon = subprocess.Popen([tfslurmd, "--listen", "127.0.0.1:0", "--agent-listen",
                               "0.0.0.0:0", "--no-auth", "--allow-root", "--db", os.path.join(work, "db"),
                               "--output-root", os.path.join(work, "out"), "--ready-file", ready,
                               "--poll-interval-ms", "500", "--heartbeat-ms", "1000",
                               "--tls-cert", os.path.join(pki, "server.pem"),
                               "--tls-key", os.path.join(pki, "server.key"), "--tls-ca", ca],
                              env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while not (os.path.exists(ready) and os.path.getsize(ready)):
            if daemon.poll() is not None or time.time() > deadline:
                raise SystemExit("lossy_rendezvous: tfslurmd did not start (" + log.name + ")")
            time.sleep(0.1)
        api = f"https://127.0.0.1:{json.load(open(ready))['http_port']}"
        times = {"clean": [], "lossy": []}
        failures = []
        for run in range(args.runs * 2):
            kind = ("clean", "lossy")[run % 2]
            if kind == "lossy":
                netfault.slow_link_start(args.slurm_conf, "node2", args.delay_ms, args.loss)
            try:
                exp_id = f"lossy-{run}-{kind}"
                http("POST", api + "/experiments", tls, body={
                    "id": exp_id, "command": ["/bin/sleep", "2"], "cluster": {"worker": 6},
                    "resources": {"nodes": 3, "tasks_per_node": 2, "time_limit": "00:05:00"},
                    "restart": {"max_restarts": 0}})
                deadline = time.time() + 180
                while (e := http("GET", f"{api}/experiments/{exp_id}", tls))["state"] not in ("succeeded", "failed"):
                    if time.time() > deadline:
                        raise SystemExit(f"lossy_rendezvous: {exp_id} still {e['state']} after 180 s")
                    time.sleep(0.5)
            finally:
                if kind == "lossy":
                    netfault.heal(args.slurm_conf, "node2")
            lost = [ev["why"] for ev in e["events"] if ev["what"] == "lost"]
            if e["state"] != "succeeded" or lost:
                failures.append(f"{exp_id}: {e['state']} {e['reason']} {lost}")
            times[kind].append(rendezvous_s(os.path.join(e["model_dir"], "logs", "attempt-1")))
            print(f"lossy_rendezvous: {exp_id}: {times[kind][-1]:.3f} s", flush=True)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
    print(f"\n| link (node2's) | runs | median (s) | p90 (s) | max (s) |\n|---|---|---|---|---|")
    for kind, label in (("clean", "clean"), ("lossy", f"{args.loss:g}% loss, {args.delay_ms} ms delay")):
        xs = sorted(times[kind])
        p90 = xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]
        print(f"| {label} | {len(xs)} | {statistics.median(xs):.3f} | {p90:.3f} | {xs[-1]:.3f} |")
    ratio = statistics.median(times["lossy"]) / statistics.median(times["clean"])
    print(f"\nlossy/clean median: {ratio:.2f}x")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"lossy_rendezvous: PASS: {args.runs * 2} experiments, none lost a task")
    return 0


if __name__ == "__main__":
    sys.exit(main())
