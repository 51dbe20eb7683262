#!/usr/bin/env python3
"""bench/tls_compare.py N PLAIN.csv TLS.csv: the rendezvous storm of N agents,
plaintext against TLS, from bench_rendezvous_storm's per-run rows (warm-ups
left out). Prints a Markdown table: the whole storm (first Register handed
over -> last Assignment), the connections (with TLS: every agent's handshake),
both together, the server's CPU per storm; p50 and max over the runs, and the
ratio TLS / plaintext of the p50s. Issue 45's target: at most 1.3x at 4,096.
Exits 1 when a file has no rows or a run lost agents."""
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


def main():
    n, plain_path, tls_path = sys.argv[1], sys.argv[2], sys.argv[3]
    plain, tls = rows(plain_path), rows(tls_path)
    if not plain or not tls:
        print(f"no runs of {n} agents in {plain_path if not plain else tls_path}", file=sys.stderr)
        return 1
    lost = sum(int(r["refused"]) + int(r["broken"]) + int(r["missing"]) for r in plain + tls)
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
    print(f"| {n} agents | plaintext p50 / max | TLS p50 / max | TLS / plaintext (p50) |")
    print("|---|---|---|---|")
    ratios = {}
    for name, f in figures:
        a, b = [f(r) for r in plain], [f(r) for r in tls]
        ratios[name] = p50(b) / p50(a) if p50(a) > 0 else float("inf")
        print(f"| {name} | {p50(a):.1f} / {max(a):.1f} | {p50(b):.1f} / {max(b):.1f} | {ratios[name]:.2f}x |")
    print()
    print(f"Runs: {len(plain)} plaintext, {len(tls)} TLS; agents lost: {lost}. Target (at most {TARGET}x): "
          f"whole storm {'met' if ratios['whole storm (ms)'] <= TARGET else 'NOT met'} "
          f"({ratios['whole storm (ms)']:.2f}x), connect + storm "
          f"{'met' if ratios['connect + storm (ms)'] <= TARGET else 'NOT met'} "
          f"({ratios['connect + storm (ms)']:.2f}x).")
    print()
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
