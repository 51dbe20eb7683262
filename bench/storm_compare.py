#!/usr/bin/env python3
"""bench/storm_compare.py N WARMUP TFSLURMD.csv FLOOR.csv: the rendezvous storm
of N agents against tfslurmd and against the bare gRPC floor, side by side,
from bench_rendezvous_storm's per-run rows of rounds that alternated between
the two (bench/rendezvous.sh), warm-ups (run < WARMUP in each round) left
out. Prints one Markdown table: the whole storm (first stream opened -> last
Assignment) p50 / p99 / max, the server's CPU per storm, its peak RSS and
threads, errors, and the ratio tfslurmd / floor of the p50s; then, at 16,384
agents, issue 49's targets (whole storm <= 2 s, RSS <= 512 MB, threads <= 32,
no error) against tfslurmd and against the floor. Percentiles are
nearest-rank, as the storm's own. Exits 1 when a file has no rows."""
import csv
import sys

STORM_TARGET_MS, RSS_TARGET_MB, THREADS_TARGET = 2000.0, 512.0, 32


def rows(path, warmup):
    with open(path) as f:
        lines = [line for line in f if line.strip()]
    header = next((line for line in lines if line.startswith("n,")), None)
    if header is None:
        return []
    body = [line for line in lines if not line.startswith("n,")]
    return [r for r in csv.DictReader([header] + body) if int(r["run"]) >= warmup]


def percentile(values, p):
    v = sorted(values)
    return v[max(0, -(-len(v) * p // 100) - 1)]


def errors(r):
    return int(r["refused"]) + int(r["broken"]) + int(r["missing"])


def summary(runs):
    storms = [float(r["last_assign_ms"]) for r in runs]
    return {
        "storm": (percentile(storms, 50), percentile(storms, 99), max(storms)),
        "cpu": percentile([float(r["server_cpu_ms"]) for r in runs], 50),
        "rss": max(float(r["hwm_mb"]) for r in runs),
        "threads": max(int(r["max_threads"]) for r in runs),
        "errors": sum(errors(r) for r in runs),
        "runs": len(runs),
    }


def ratio(a, b):
    return f"{a / b:.2f}x" if b > 0 else "-"  # the CPU clock's 10 ms ticks: a small storm may read 0


def verdict(s):
    checks = [("whole storm p50", s["storm"][0] <= STORM_TARGET_MS, f"{s['storm'][0]:.1f} ms"),
              ("RSS", s["rss"] <= RSS_TARGET_MB, f"{s['rss']:.0f} MB"),
              ("threads", s["threads"] <= THREADS_TARGET, str(s["threads"])),
              ("errors", s["errors"] == 0, str(s["errors"]))]
    return ", ".join(f"{name} {value} {'met' if ok else 'NOT met'}" for name, ok, value in checks)


def main():
    n, warmup, paths = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:5]
    tfslurmd, floor = [rows(p, warmup) for p in paths]
    for path, runs in zip(paths, (tfslurmd, floor)):
        if not runs:
            print(f"no runs of {n} agents in {path}", file=sys.stderr)
            return 1
    a, b = summary(tfslurmd), summary(floor)
    print(f"| {n} agents, alternating rounds | runs | whole storm p50 / p99 / max (ms) | server CPU per "
          "storm (ms, p50) | server RSS peak (MB) | server threads (max) | errors |")
    print("|---|---|---|---|---|---|---|")
    for name, s in (("tfslurmd", a), ("bare gRPC floor", b)):
        p50, p99, top = s["storm"]
        print(f"| {name} | {s['runs']} | {p50:.1f} / {p99:.1f} / {top:.1f} | {s['cpu']:.0f} | {s['rss']:.0f} | "
              f"{s['threads']} | {s['errors']} |")
    print(f"| tfslurmd / floor (p50) | | {ratio(a['storm'][0], b['storm'][0])} | {ratio(a['cpu'], b['cpu'])} | | | |")
    print()
    if n >= 16384:
        print(f"Issue 49's targets at {n} agents: tfslurmd: {verdict(a)}; the floor: {verdict(b)}.")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
