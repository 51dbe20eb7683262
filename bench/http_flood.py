"""The measuring half of bench/http_flood.sh (issue 41, point 1): tfslurmd's
peak RSS and /healthz's answers while strangers send it, all at once,
`--bodies` chunked request bodies of `--body-mb` MB each to POST
/experiments and `--floods` requests with `--flood-fields` header fields of
`--field-bytes` bytes each, none with a token.

Prints one Markdown table, the figures beside their anchor (the issue's
target: peak RSS under 256 MB, /healthz answered throughout; and the probe's
own figures on Debian's cpp-httplib 0.11.4). Exits 1 if the peak RSS reaches
the limit, if /healthz was not answered 200 within --healthz-max-s every
time, or if an attack was not refused (411 for the bodies, 431 for the
floods) before the server stopped reading it."""
import argparse
import socket
import sys
import threading
import time
import urllib.request


def status_kb(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def attack(host, port, head, piece, total, out):
    """Sends head, then piece until total bytes or the server stops taking
    them; out gets (bytes sent, the status line answered)."""
    sent = 0
    s = socket.create_connection((host, port), timeout=60)
    try:
        s.sendall(head)
        while sent < total:
            s.sendall(piece)
            sent += len(piece)
    except OSError:
        pass
    answer = b""
    try:
        s.settimeout(30)
        while b"\r\n" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    except OSError:
        pass
    s.close()
    out.append((sent, answer.split(b"\r\n", 1)[0].decode(errors="replace")))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--api", required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--bodies", type=int, default=4)
    p.add_argument("--body-mb", type=int, default=1024)
    p.add_argument("--floods", type=int, default=4)
    p.add_argument("--flood-fields", type=int, default=40000)
    p.add_argument("--field-bytes", type=int, default=8192)
    p.add_argument("--limit-mb", type=int, default=256)
    p.add_argument("--healthz-max-s", type=float, default=2.0)
    a = p.parse_args()
    host, port = a.api.replace("http://", "").split(":")
    port = int(port)

    rss_start = status_kb(a.pid, "VmRSS")
    peak = [rss_start]
    probes = []
    stop = threading.Event()

    def sample():
        while not stop.wait(0.05):
            peak[0] = max(peak[0], status_kb(a.pid, "VmRSS"))

    def probe():
        while not stop.is_set():
            t = time.monotonic()
            try:
                with urllib.request.urlopen(a.api + "/healthz", timeout=30) as r:
                    code = r.status
            except Exception as e:  # noqa: BLE001 - any failure counts against it
                code = str(e)
            probes.append((code, time.monotonic() - t))
            stop.wait(0.1)

    chunk = b"100000\r\n" + b"a" * 0x100000 + b"\r\n"
    body_head = b"POST /experiments HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    field = b"X-Flood: " + b"f" * (a.field_bytes - 11) + b"\r\n"
    flood_head = b"GET /experiments HTTP/1.1\r\nHost: x\r\n"
    bodies, floods = [], []
    threads = [threading.Thread(target=sample), threading.Thread(target=probe)]
    threads += [threading.Thread(target=attack, args=(host, port, body_head, chunk, a.body_mb << 20, bodies))
                for _ in range(a.bodies)]
    threads += [threading.Thread(target=attack,
                                 args=(host, port, flood_head, field, a.flood_fields * len(field), floods))
                for _ in range(a.floods)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads[2:]:
        t.join()
    attacks_s = time.monotonic() - started
    time.sleep(0.5)  # a few more probes after the last attack
    stop.set()
    for t in threads[:2]:
        t.join()
    peak_kb = max(peak[0], status_kb(a.pid, "VmRSS"))
    hwm_kb = status_kb(a.pid, "VmHWM")

    ok_probes = [d for code, d in probes if code == 200]
    slowest = max((d for _, d in probes), default=0.0)
    failures = []
    if max(peak_kb, hwm_kb) >= a.limit_mb * 1024:
        failures.append(f"peak RSS {max(peak_kb, hwm_kb) / 1024:.0f} MB >= {a.limit_mb} MB")
    if not probes or len(ok_probes) != len(probes) or slowest > a.healthz_max_s:
        failures.append(f"/healthz: {len(ok_probes)} of {len(probes)} answered 200, slowest {slowest:.3f} s")
    for sent, line in bodies:
        if not line.startswith("HTTP/1.1 411") or sent >= a.body_mb << 20:
            failures.append(f"a chunked body: {line!r} after {sent >> 20} MB sent")
    for sent, line in floods:
        if not line.startswith("HTTP/1.1 431") or sent >= a.flood_fields * len(field):
            failures.append(f"a header flood: {line!r} after {sent >> 10} KB sent")

    body_sent = sum(s for s, _ in bodies) >> 20
    flood_sent = sum(s for s, _ in floods) >> 10
    print(f"| | measured | anchor |")
    print(f"|---|---|---|")
    print(f"| attack | {a.bodies} chunked bodies of {a.body_mb} MB to POST /experiments, {a.floods} GETs with "
          f"{a.flood_fields:,} header fields of {a.field_bytes} B, at once, no token | the probe of issue 41: one "
          f"600 MB body; one 40,000-field GET |")
    print(f"| answers | bodies: {', '.join(l for _, l in bodies)}; floods: {', '.join(l for _, l in floods)} | "
          f"0.11.4: 401 after the whole body; 200 |")
    print(f"| bytes sent before the server closed | bodies {body_sent} MB in all; floods {flood_sent} KB in all "
          f"(after the answer the gate reads and drops up to 16 MiB for 2 s, so that a client reads its "
          f"answer; none of it is kept) | the whole 600 MB, kept; the whole 328 MB, kept |")
    print(f"| tfslurmd RSS | {rss_start / 1024:.0f} MB at start, peak {max(peak_kb, hwm_kb) / 1024:.0f} MB "
          f"(sampled every 50 ms, and VmHWM) | under {a.limit_mb} MB (target); 0.11.4: 108 MB -> 1.15 GB, +420 MB |")
    print(f"| GET /healthz every 100 ms meanwhile | {len(ok_probes)} of {len(probes)} answered 200, slowest "
          f"{slowest * 1000:.0f} ms | every one, within {a.healthz_max_s:.0f} s (target) |")
    print(f"| attacks took | {attacks_s:.2f} s | |")
    if failures:
        print("\nFAILED: " + "; ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
