"""The sweep benchmark (bench/sweep.sh): a 16-trial grid of linear_ps run to
the end, against the same grid under ASHA, on the local cluster. Prints a
Markdown table: each run's best objective, node-seconds and wall time.

The objective is linear_ps's held_out_loss (the model's mean squared error on
its fixed held-out set), not its minibatch loss, whose spread at batch 16 is
about a third of its value: with it, "within 2% of the grid's best" would
compare the luck of two minibatches."""
import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(REPO, "examples/linear_ps/train.py")
LEARNING_RATES = [0.0003, 0.001, 0.003, 0.01, 0.02, 0.05, 0.1, 0.2]
BATCH_SIZES = [16, 64]
GRID_SIZE = len(LEARNING_RATES) * len(BATCH_SIZES)


def call(api, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(api + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def spec(sweep_id, steps, step_sleep, schedule, lrs, stopping, search=None):
    body = {
        "id": sweep_id,
        "experiment": {
            "command": ["python3", TRAIN, f"--steps={steps}", "--log-every=10",
                        f"--checkpoint-every={steps}", f"--step-sleep={step_sleep}",
                        f"--lr-schedule={schedule}"],
            "workdir": os.path.join(REPO, "examples/linear_ps"),
            "cluster": {"ps": 1, "worker": 1},
            "resources": {"partition": "debug", "nodes": 1, "tasks_per_node": 2, "time_limit": "00:20:00"},
            "restart": {"max_restarts": 0},
            "checkpoint": {"signal_grace_s": 30},
        },
        # A grid of 8 learning rates x 2 batch sizes, in the order listed
        # (the last parameter by name, arg.--lr, turns fastest).
        "parameters": {"arg.--lr": {"values": lrs}, "arg.--batch-size": {"values": BATCH_SIZES}},
        "max_concurrent": 3,
        "objective": {"tag": "held_out_loss", "goal": "min"},
        "early_stopping": stopping,
    }
    if search is not None:
        body["search"] = search
    return body


def run(api, sweep_id, body, timeout_s):
    started = time.monotonic()
    status, created = call(api, "POST", "/sweeps", body)
    if status != 201:
        raise SystemExit(f"POST /sweeps {sweep_id}: {status} {created}")
    while True:
        status, s = call(api, "GET", f"/sweeps/{sweep_id}")
        if s["state"] != "running":
            break
        if time.monotonic() - started > timeout_s:
            raise SystemExit(f"sweep {sweep_id} still running after {timeout_s} s: {s['reason']}")
        time.sleep(1)
    wall = time.monotonic() - started
    best = s["best_trial"]
    return {"id": sweep_id, "wall": wall, "node_seconds": s["node_seconds"], "best": best,
            "stopped": s["counts"]["stopped_early"], "trials": len(s["trials"]), "state": s["state"],
            "reason": s["reason"], "problems": problems(s, early_stopping=body["early_stopping"]["rule"] != "none")}


def problems(s, early_stopping):
    """What makes a sweep's figures wrong: it did not complete, a trial
    failed or never ran, a trial that ran to the end has no objective, or
    the grid (no early stopping) stopped one early."""
    found = []
    if s["state"] != "completed":
        found.append(f"sweep {s['state']}: {s['reason']}")
    if len(s["trials"]) != GRID_SIZE:
        found.append(f"{len(s['trials'])} trials, not {GRID_SIZE}")
    for t in s["trials"]:
        stopped = t["end_reason"] == "stopped_early"
        if stopped and not early_stopping:
            found.append(f"trial {t['index']} stopped early without early stopping")
        elif not stopped and t["experiment_state"] != "succeeded":
            found.append(f"trial {t['index']} {t['experiment_state']}: {t['reason']}")
        elif not stopped and t["objective"] is None:
            found.append(f"trial {t['index']} ended without an objective")
    if s["best_trial"] is None:
        found.append("no best trial")
    return found


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--api", required=True)
    p.add_argument("--steps", type=int, default=800)
    p.add_argument("--step-sleep", type=float, default=0.05,
                   help="seconds each step takes (linear_ps's --step-sleep): the model's compute")
    p.add_argument("--lr-schedule", choices=("constant", "cosine"), default="cosine")
    p.add_argument("--rungs", default="20,80,320")
    p.add_argument("--reduction-factor", type=int, default=4)
    p.add_argument("--shuffle-seeds", default="0,1",
                   help="one ASHA run of the grid in its shuffled order (the default with early "
                        "stopping) per seed")
    p.add_argument("--timeout-s", type=int, default=1800)
    a = p.parse_args()
    lrs = LEARNING_RATES
    asha = {"rule": "asha", "rungs": [int(x) for x in a.rungs.split(",")],
            "reduction_factor": a.reduction_factor}
    listed = {"type": "grid", "order": "listed"}
    runs = [
        ("grid", "the grid, run to the end",
         spec("grid", a.steps, a.step_sleep, a.lr_schedule, lrs, {"rule": "none"})),
        ("asha-desc", "ASHA, learning rates listed high to low (order: listed)",
         spec("asha-desc", a.steps, a.step_sleep, a.lr_schedule, lrs[::-1], asha, listed)),
        ("asha-asc", "ASHA, learning rates listed low to high (order: listed)",
         spec("asha-asc", a.steps, a.step_sleep, a.lr_schedule, lrs, asha, listed)),
    ]
    for seed in [int(x) for x in a.shuffle_seeds.split(",") if x]:
        runs.append((f"asha-shuffled-{seed}", f"ASHA, the grid shuffled (the default), seed {seed}",
                     spec(f"asha-shuffled-{seed}", a.steps, a.step_sleep, a.lr_schedule, lrs, asha,
                          {"type": "grid", "order": "shuffled", "seed": seed})))
    results = []
    for sweep_id, what, body in runs:
        print(f"bench: sweep {sweep_id} ({what})", file=sys.stderr)
        r = run(a.api, sweep_id, body, a.timeout_s)
        r["what"] = what
        results.append(r)
        print(f"bench: {sweep_id}: {r['reason']}; {r['node_seconds']:.0f} node-s, {r['wall']:.0f} s",
              file=sys.stderr)
        for problem in r["problems"]:
            print(f"bench: error: {sweep_id}: {problem}", file=sys.stderr)
    grid = results[0]
    if grid["best"] is None:
        raise SystemExit("the grid has no best trial: nothing to compare with")
    print("| run | trials | stopped early | best trial | best held_out_loss | vs grid's best | node-seconds "
          "| vs grid | wall time | target: within 2% at 1/3 the node-seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        b = r["best"]
        if b is None:
            print(f"| {r['what']} | {r['trials']} | {r['stopped']} | - | - | - | {r['node_seconds']:.0f} | - "
                  f"| {r['wall']:.0f} s | - |")
            continue
        rel = b["objective"] / grid["best"]["objective"] - 1
        ns = r["node_seconds"] / grid["node_seconds"]
        params = ", ".join(f"{k}={v}" for k, v in b["params"].items())
        met = "-" if r is grid else ("met" if rel <= 0.02 and ns <= 1 / 3 else "**missed**")
        print(f"| {r['what']} | {r['trials']} | {r['stopped']} | {b['experiment_id']} ({params}) | "
              f"{b['objective']:.5g} | {rel * 100:+.1f}% | {r['node_seconds']:.0f} | {ns:.2f}x | {r['wall']:.0f} s "
              f"| {met} |")
    failed = [f"{r['id']}: {p}" for r in results for p in r["problems"]]
    if failed:
        print("\nErrors: " + "; ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
