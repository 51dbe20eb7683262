#!/usr/bin/python3
"""Seeds a tfslurmd database with one ended PyTorch experiment of N ranks
(issue 49: 16,384), as its rows would be after a rank was killed and the
others reaped: the dashboard's task table at that size, without a cluster
that could run it. The database must exist with tfslurmd's schema (any
`tfslurmd token create --db DB` makes it); run while tfslurmd is stopped.

    seed_big_experiment.py DB ID [N]

Writes only columns the schema has, with its defaults for the others, so a
later migration that adds a column with a default does not break it.
"""
import json
import sqlite3
import sys
import time


def insert(db, table, row):
    columns = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
    row = {k: v for k, v in row.items() if k in columns}
    names = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    db.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", list(row.values()))


def main():
    path, exp_id = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 16384
    per_node = 8
    nodes = n // per_node
    now = int(time.time() * 1000)
    started = now - 3600 * 1000
    spec = {
        "id": exp_id,
        "framework": "pytorch",
        "command": ["python3", "train.py"],
        "resources": {"nodes": nodes, "tasks_per_node": per_node, "time_limit": "04:00:00"},
        "restart": {"in_allocation": True, "max_restarts": 3, "on": ["retryable_exit"]},
    }
    killed = n // 2 + 3
    db = sqlite3.connect(path)
    with db:
        insert(db, "experiments", {
            "id": exp_id, "owner": "alice", "spec": json.dumps(spec), "state": "failed",
            "reason": f"rank {killed} was killed by signal 9; no restart left",
            "current_attempt": 1, "restarts": 0, "model_dir": f"/scratch/{exp_id}",
            "mem_per_task_mb": 16000, "mem_explanation": "seeded", "created_at": started,
            "updated_at": now,
        })
        insert(db, "attempts", {
            "experiment_id": exp_id, "number": 1, "secret_sha256": "0" * 64,
            "job_name": f"tfx-{exp_id}-a1", "slurm_job_id": 424242, "state": "ended",
            "slurm_state": "CANCELLED", "end_reason": "retryable_exit",
            "reason": f"rank {killed} was killed by signal 9",
            "nodes": f"gpu[0000-{nodes - 1:04d}]", "sbatch_script": "#!/bin/bash\n",
            "submitted_at": started, "started_at": started + 5000, "ended_at": now,
        })
        rows = []
        for p in range(n):
            node = f"gpu{p // per_node:04d}"
            failed = p == killed
            rows.append({
                "experiment_id": exp_id, "attempt": 1, "task_index": p, "role": "rank",
                "role_index": p, "node": node, "address": f"{node}:{29500 + p % per_node}",
                "state": "failed" if failed else "reaped", "signal": 9 if failed else 15,
                "local_rank": p % per_node, "registered_at": started + 6000,
                "last_heartbeat": now - 1000, "ended_at": now,
                "detail": "killed by signal 9 (out of memory?)" if failed else "",
            })
        columns = {r[1] for r in db.execute("PRAGMA table_info(tasks)")}
        names = [k for k in rows[0] if k in columns]
        db.executemany(
            f"INSERT INTO tasks ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})",
            [[r[k] for k in names] for r in rows])
        for at, what, why in [
            (started, "submitted", f"attempt 1, {n} ranks"),
            (started + 6000, "assigned", f"all {n} tasks registered"),
            (now - 2000, "exited", f"rank {killed} was killed by signal 9"),
            (now - 1000, "reaping", f"Shutdown sent to {n - 1} ranks"),
        ]:
            insert(db, "events", {"experiment_id": exp_id, "attempt": 1, "at": at, "what": what,
                                  "why": why})
    db.close()


if __name__ == "__main__":
    main()
