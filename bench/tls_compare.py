#!/usr/bin/env python3
"""bench/tls_compare.py N PLAIN.csv TLS.csv FLOOR_PLAIN.csv FLOOR_TLS.csv: the
rendezvous storm of N agents, plaintext against TLS, from
bench_rendezvous_storm's per-run rows (warm-ups left out), against tfslurmd
and against the bare gRPC floor. Prints a Markdown table for each: the whole
storm (first Register handed over -> last Assignment), the connections (with
TLS: every agent's handshake), both together, the server's CPU per storm;
p50 and max over the runs, and the ratio TLS / plaintext of the p50s. Issue
45's target: at most 1.3x at 4,096; the floor's own ratio is what TLS costs
any gRPC service here, and the last line gives tfslurmd's over it. Exits 1
when a file has no rows or a run lost agents."""
import csv
import sys

TARGET = 1.3


def rows(path):
    with open(path) as f:
        lines = [l for l in f if l.strip() and not l.startswith("n,")]
    header = ("n,run,connect_ms,first_reg_ms,last_reg_ms,last_assign_ms,gap_ms,agent_p50_ms,agent_p99_ms,"
              "refused,broken,missing,max_threads,max_rss_mb,hwm_mb,server_cpu_ms,client_cpu_ms,tf_config_bytes,"
              "connect_server_cpu_ms,connect_client_cpu_ms")
    return list(csv.DictReader([header] + lines))


def p50(values):
    v = sorted(values)
    return v[(len(v) + 1) // 2 - 1]


def table(n, server, plain, tls):
    """Prints one server's table; returns its ratios by figure."""
    figures = [
        ("whole storm (ms)", lambda r: float(r["last_assign_ms"])),
        ("connect (ms)", lambda r: float(r["connect_ms"])),
        ("connect + storm (ms)", lambda r: float(r["connect_ms"]) + float(r["last_assign_ms"])),
        ("server CPU per storm (ms)", lambda r: float(r["server_cpu_ms"])),
        ("server CPU while connecting (ms)", lambda r: float(r["connect_server_cpu_ms"])),
        ("load generator CPU while connecting (ms)", lambda r: float(r["connect_client_cpu_ms"])),
        ("server CPU, connect + storm (ms)",
         lambda r: float(r["connect_server_cpu_ms"]) + float(r["server_cpu_ms"])),
    ]
    print(f"| {n} agents, {server} | plaintext p50 / max | TLS p50 / max | TLS / plaintext (p50) |")
    print("|---|---|---|---|")
    ratios = {}
    for name, f in figures:
        a, b = [f(r) for r in plain], [f(r) for r in tls]
        ratios[name] = p50(b) / p50(a) if p50(a) > 0 else float("inf")
        print(f"| {name} | {p50(a):.1f} / {max(a):.1f} | {p50(b):.1f} / {max(b):.1f} | {ratios[name]:.2f}x |")
    print()
    return ratios


def main():
    n, paths = sys.argv[1], sys.argv[2:6]
    plain, tls, floor_plain, floor_tls = [rows(p) for p in paths]
    for path, runs in zip(paths, (plain, tls, floor_plain, floor_tls)):
        if not runs:
            print(f"no runs of {n} agents in {path}", file=sys.stderr)
            return 1
    everything = plain + tls + floor_plain + floor_tls
    lost = sum(int(r["refused"]) + int(r["broken"]) + int(r["missing"]) for r in everything)
    ratios = table(n, "tfslurmd", plain, tls)
    floor = table(n, "the bare gRPC floor", floor_plain, floor_tls)
    whole, both = "whole storm (ms)", "connect + storm (ms)"
    print(f"Runs: {len(plain)} plaintext and {len(tls)} TLS against tfslurmd, {len(floor_plain)} and "
          f"{len(floor_tls)} against the floor; agents lost: {lost}. Target (at most {TARGET}x): "
          f"whole storm {'met' if ratios[whole] <= TARGET else 'NOT met'} ({ratios[whole]:.2f}x; "
          f"the floor's own {floor[whole]:.2f}x, tfslurmd's over it {ratios[whole] / floor[whole]:.2f}), "
          f"connect + storm {'met' if ratios[both] <= TARGET else 'NOT met'} ({ratios[both]:.2f}x; "
          f"the floor's {floor[both]:.2f}x, tfslurmd's over it {ratios[both] / floor[both]:.2f}).")
    print()
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
