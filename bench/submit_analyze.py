#!/usr/bin/env python3
"""tfslurmd's own time per submission, from two logs of the same run:

  --requests FILE  bench_http_rate --log: "SENT_NS DONE_NS STATUS CONN" per POST
  --rpcs FILE      bench_slurm_timing: "FUNCTION START_NS END_NS TID" per libslurm call

Both use CLOCK_MONOTONIC. For each POST, the time spent inside the libslurm
calls a submission makes (slurm_submit_batch_job, and slurm_load_partitions /
slurm_load_node when the partition cache is cold) that started and ended
within the POST is subtracted from its latency; the rest is tfslurmd's own
time (HTTP, JSON, validation, SQLite, waiting for its own locks) plus the
loopback round trip. Prints key=value figures in ms; "polled_*" are the POSTs
that overlapped one of tfslurmd's slurm_load_jobs calls (its poll),
"quiet_*" the others.
"""
import argparse
import bisect


def percentile(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    rank = min(len(v), max(1, -(-len(v) * p // 100)))
    return v[int(rank) - 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", required=True)
    ap.add_argument("--rpcs", required=True)
    args = ap.parse_args()

    posts = []
    for line in open(args.requests):
        sent, done, status, _ = line.split()
        posts.append((int(sent), int(done), int(status)))
    calls, polls = [], []
    for line in open(args.rpcs):
        fn, start, end, _tid = line.split()
        if fn in ("slurm_submit_batch_job", "slurm_load_partitions", "slurm_load_node"):
            calls.append((int(start), int(end), fn))
        elif fn == "slurm_load_jobs":
            polls.append((int(start), int(end)))
    calls.sort()
    starts = [c[0] for c in calls]

    own, inside, total, own_polled, own_quiet = [], [], [], [], []
    unmatched = 0
    for sent, done, status in posts:
        if status < 200 or status >= 300:
            continue
        i = bisect.bisect_left(starts, sent)
        slurm_ns = 0
        submits = 0
        while i < len(calls) and calls[i][0] < done:
            s, e, fn = calls[i]
            if e <= done:
                slurm_ns += e - s
                submits += fn == "slurm_submit_batch_job"
            i += 1
        if submits != 1:
            unmatched += 1
            continue
        total.append((done - sent) / 1e6)
        inside.append(slurm_ns / 1e6)
        own.append((done - sent - slurm_ns) / 1e6)
        overlaps = any(s < done and e > sent for s, e in polls)
        (own_polled if overlaps else own_quiet).append(own[-1])
    print(f"posts={len(total)} unmatched={unmatched} "
          f"total_p50_ms={percentile(total, 50):.3f} total_p99_ms={percentile(total, 99):.3f} "
          f"libslurm_p50_ms={percentile(inside, 50):.3f} libslurm_p99_ms={percentile(inside, 99):.3f} "
          f"own_p50_ms={percentile(own, 50):.3f} own_p99_ms={percentile(own, 99):.3f} "
          f"own_max_ms={max(own) if own else float('nan'):.3f} "
          f"polled_posts={len(own_polled)} polled_own_p50_ms={percentile(own_polled, 50):.3f} "
          f"polled_own_max_ms={max(own_polled) if own_polled else float('nan'):.3f} "
          f"quiet_posts={len(own_quiet)} quiet_own_p50_ms={percentile(own_quiet, 50):.3f} "
          f"quiet_own_p99_ms={percentile(own_quiet, 99):.3f}")


if __name__ == "__main__":
    main()
