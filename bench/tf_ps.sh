#!/usr/bin/env bash
# TensorFlow parameter-server training two ways on the local cluster (issue
# 14). The same real program, examples/mnist_tf/train.py (--data synthetic,
# chief + 2 ps + 2 workers + 1 evaluator = 3 nodes x 2 tasks), run
#   (a) "the seeds' way": a hand-written sbatch script (below, written to a
#       temp dir) whose `srun` runs a small wrapper in every task; the wrapper
#       builds TF_CONFIG from the Slurm allocation as TensorFlow's
#       SlurmClusterResolver does and execs the program. Nothing ends the ps,
#       workers and evaluator, so the job holds its nodes until its time limit
#       (--limit-min, 2 minutes);
#   (b) through tfslurm: the same program POSTed to tfslurmd (--no-auth),
#       which reaps the ps, workers and evaluator when the chief exits 0;
# taking turns (a, b, a, b ...), one run at a time on an idle cluster. Per run:
# submit -> the chief's first `mnist_tf: step=` line, submit -> `done step=`,
# the chief's running time, and the node-seconds the Slurm job held
# ((EndTime - StartTime) x NumNodes). Starts its own Slurm cluster and
# tfslurmd (default settings); the TensorFlow python is deploy/install-tf.sh's.
#
#   bench/tf_ps.sh [--runs 3] [--steps 300] [--limit-min 2]
#     --runs N    runs of each way (default 3): 2N runs, a and b in turn
#     --steps S   the chief's target global step (default 300); with
#                 --checkpoint-every 100 --steps-per-dispatch 25. (a) has
#                 --limit-min in all: S must be reachable well within it.
#     --limit-min M  (a)'s time limit in minutes (default 2): how long it
#                 holds its nodes. The smoke run (bench/run.sh --smoke) takes
#                 1, with few steps: its chief is done in about 15 s.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

runs=3 steps=300 limit_min=2
while (($#)); do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --limit-min) limit_min="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive integer, not '$runs'"
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive integer, not '$steps'"
[[ "$limit_min" =~ ^[1-9][0-9]*$ ]] || die "--limit-min must be a positive integer, not '$limit_min'"
command_line="bench/tf_ps.sh --runs $runs --steps $steps --limit-min $limit_min"

tf_python="$("$REPO/deploy/install-tf.sh")" || die "deploy/install-tf.sh failed"
build_all
work="$(mktemp -d /tmp/bench-tfps-XXXX)"
chmod 755 "$work"
clean_up_on_exit "$work"
start_cluster
# tfslurmd's defaults: poll 2 s, heartbeat 5 s, shutdown grace 10 s.
start_tfslurmd "$work/svc"

# ------------------------------------------------ (a) the seeds' way ----
seeds="$work/seeds"
mkdir -p "$seeds"
cat >"$seeds/tfconfig_from_slurm.py" <<'PY'
#!/usr/bin/env python3
"""TF_CONFIG for this srun task, made from the Slurm allocation the way
TensorFlow's SlurmClusterResolver makes its cluster spec; then exec of the
program (the arguments after --).

SlurmClusterResolver (tensorflow/python/distribute/cluster_resolver/
slurm_cluster_resolver.py), as read in the TensorFlow 2.21 that
deploy/install-tf.sh installs and in the older upstream version
(tensorflow/tensorflow@0db332dc):
  - hosts: the step's nodes, expanded from the Slurm hostlist (2.21:
    expand_hostlist(SLURM_STEP_NODELIST), iterated sorted; older:
    `scontrol show hostname`, i.e. SLURM_JOB_NODELIST); here `scontrol show
    hostnames $SLURM_JOB_NODELIST`, the same nodes for this one-step job;
  - tasks per node: SLURM_STEP_TASKS_PER_NODE ("2(x3)");
  - addresses: for each host in order, for each of its tasks k,
    host:(port_base + k), port_base=8888 by default, the same on every host;
  - roles: the jobs dict sorted by name (chief, evaluator, ps, worker), each
    taking the next `count` addresses; a task's role is where its rank
    (SLURM_PROCID) falls. So with block distribution: rank 0 = chief on the
    first node, 1 = evaluator, 2-3 = ps on the second, 4-5 = workers on the
    third.
Two departures, both for this machine or this program, not for Slurm:
  - ports: the local cluster's three nodes are one machine (NodeHostname=vm,
    NodeAddr=127.0.0.1), so port_base + k would collide between nodes; each
    node gets its own range, 8888 + 10 x node index + k (the node index is
    SLURM_NODEID for the task's own node). On a real cluster, one host per
    node, SlurmClusterResolver's plain 8888 + SLURM_LOCALID is what is used.
    Host names: the nodes' NodeAddr from `scontrol show node` (node1..3 do
    not resolve here; on a real cluster NodeAddr is the host name itself).
  - the evaluator: SlurmClusterResolver puts every job, evaluator included,
    in the cluster spec, but the evaluator runs no server; with it in the
    cluster the parameter-server chief waits for it forever (seen on this
    machine with TF 2.21: no output in 13 minutes). The evaluator keeps its
    rank and slot, and is left out of TF_CONFIG's "cluster", as TensorFlow's
    TF_CONFIG convention has it (and as tfslurm does).
"""
import json
import os
import re
import subprocess
import sys

PORT_BASE = 8888  # SlurmClusterResolver's default port_base
NODE_PORT_STRIDE = 10  # local cluster only (see above); 0 on a real cluster


def expand_tasks_per_node(value):
    """"2(x3)" or "2,1" -> [2, 2, 2] / [2, 1], as SlurmClusterResolver's does."""
    out = []
    for part in value.split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part)
        if not m:
            raise ValueError(f"cannot read SLURM_STEP_TASKS_PER_NODE={value!r}")
        out += [int(m.group(1))] * int(m.group(2) or 1)
    return out


def node_addresses(nodelist):
    out = subprocess.run(["scontrol", "-o", "show", "node", nodelist], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    addr = {}
    for line in out.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        addr[fields["NodeName"]] = fields.get("NodeAddr") or fields["NodeName"]
    return addr


def main():
    sep = sys.argv.index("--")
    jobs = {}
    for item in sys.argv[1:sep]:  # chief=1 evaluator=1 ps=2 worker=2
        name, count = item.split("=")
        jobs[name] = int(count)
    program = sys.argv[sep + 1:]
    rank = int(os.environ["SLURM_PROCID"])
    nodelist = os.environ["SLURM_JOB_NODELIST"]
    hosts = subprocess.run(["scontrol", "show", "hostnames", nodelist], check=True,
                           stdout=subprocess.PIPE, text=True).stdout.split()
    tasks = expand_tasks_per_node(os.environ["SLURM_STEP_TASKS_PER_NODE"])
    addr = node_addresses(nodelist)
    task_list = []
    for node_index, (host, count) in enumerate(sorted(zip(hosts, tasks))):
        for k in range(count):
            task_list.append(f"{addr[host]}:{PORT_BASE + NODE_PORT_STRIDE * node_index + k}")
    if sum(jobs.values()) != len(task_list):
        sys.exit(f"tfconfig_from_slurm: jobs {jobs} need {sum(jobs.values())} tasks, the step has {len(task_list)}")
    own_port = PORT_BASE + NODE_PORT_STRIDE * int(os.environ["SLURM_NODEID"]) + int(os.environ["SLURM_LOCALID"])
    if not task_list[rank].endswith(f":{own_port}"):
        # SlurmClusterResolver assumes block distribution (rank = position in
        # the host-ordered list); anything else would give a wrong spec.
        sys.exit(f"tfconfig_from_slurm: rank {rank} got {task_list[rank]}, its own port is {own_port}")
    cluster, start, role, index = {}, 0, None, None
    for name, count in sorted(jobs.items()):
        cluster[name] = task_list[start:start + count]
        if start <= rank < start + count:
            role, index = name, rank - start
        start += count
    cluster.pop("evaluator", None)
    os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": role, "index": index}})
    print(f"tfconfig_from_slurm: rank={rank} role={role} index={index} address={task_list[rank]} "
          f"TF_CONFIG={os.environ['TF_CONFIG']}", file=sys.stderr, flush=True)
    os.execvp(program[0], program)


if __name__ == "__main__":
    main()
PY

# One file for every run: each job's outputs and MODEL_DIR go under
# job-$SLURM_JOB_ID, so every run starts from step 0.
cat >"$seeds/tf_ps.sbatch" <<EOF
#!/bin/bash
#SBATCH --job-name=tf-ps-seeds
#SBATCH --partition=debug
#SBATCH --nodes=3
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
#SBATCH --time=$limit_min
#SBATCH --output=$seeds/batch-%j.out
#
# mnist_tf as one would run it with plain Slurm: one srun step of 6 tasks,
# TF_CONFIG made in each task by tfconfig_from_slurm.py (SlurmClusterResolver's
# rules). The chief exits 0 at --steps; the ps and workers serve and the
# evaluator waits for checkpoints until killed, so srun, and with it the job,
# lasts until the time limit ($limit_min minutes), when Slurm ends it as TIMEOUT.
set -eu
run="$seeds/job-\$SLURM_JOB_ID"
mkdir -p "\$run"
export MODEL_DIR="\$run/model" TF_CPP_MIN_LOG_LEVEL=2 TF_NUM_INTRAOP_THREADS=1
srun --output="\$run/task-%t.out" "$tf_python" "$seeds/tfconfig_from_slurm.py" chief=1 evaluator=1 ps=2 worker=2 -- \\
  "$tf_python" "$REPO/examples/mnist_tf/train.py" --data synthetic --steps $steps --checkpoint-every 100 --steps-per-dispatch 25
EOF

wait_quiet 300

python3 "$BENCH_DIR/tf_ps.py" --api "$API" --repo "$REPO" --python "$tf_python" --runs "$runs" --steps "$steps" \
  --seeds-dir "$seeds" --slurmctld-log "$CLUSTER_DIR/log/slurmctld.log" >"$work/table.md" || {
  cat "$work/table.md"
  results_append "TensorFlow parameter-server training: hand-written sbatch vs tfslurm (issue 14) -- FAILED RUNS" \
    "$command_line" "$work/table.md"
  die "some runs went wrong (see the problems column)"
}
{
  cat "$work/table.md"
  cat <<'NOTE'

(a) is a hand-written sbatch script (`--nodes=3 --ntasks-per-node=2
--cpus-per-task=1 --time=M`, M from --limit-min: 2 unless the command line
says otherwise) whose srun runs a wrapper in every task: it
builds TF_CONFIG by SlurmClusterResolver's rules (hosts from the job's
nodelist through `scontrol show hostnames`, port 8888 + the task's local id,
roles by sorted job name over the ranks: chief = rank 0, evaluator 1, ps 2-3,
workers 4-5) and execs train.py. Two departures: the three local nodes are
one machine, so each node's ports start 10 higher (8888 + 10 x SLURM_NODEID +
SLURM_LOCALID; on a real cluster 8888 + SLURM_LOCALID), and the evaluator is
left out of TF_CONFIG's cluster (with it there, the parameter-server chief
waits for the evaluator's server forever). (b) is tfslurmd with its defaults
(poll 2 s, heartbeat 5 s, grace 10 s), the spec with the same program,
arguments and environment, 3 nodes x 2 tasks, 1 CPU each, `success: chief`,
a 10-minute limit (tfslurm reaps the tasks; its limit is never reached).
Both ways: TF_CPP_MIN_LOG_LEVEL=2, TF_NUM_INTRAOP_THREADS=1, a fresh
MODEL_DIR per run (start_step=0), `--data synthetic --checkpoint-every 100
--steps-per-dispatch 25`. Runs take turns (a, b, a, b ...), one at a time,
each starting once the previous job has ended and every node is idle again.

How each figure is taken. "submit": just before `sbatch` is started (a) or
the POST is sent (b). "first step" and "done": the chief's output file
(a: srun's `task-0.out`; b: `<model_dir>/logs/attempt-1/task-<proc>.out`)
is read by the benchmark every 20 ms, and a line counts from the moment it
is first seen (so late by up to 20 ms plus the output's way to the file; no
wrapper stamps lines). The first `step=` line comes after the first dispatch
round of 25 steps. "of which submit -> chief start" and "of which chief start
-> first step" split that time: the launch (Slurm starting the job, the batch
script, srun, then the wrapper (a) or tfslurm's agents, their registration
and rendezvous (b)), then TensorFlow's own start-up in the same program
(imports, the data set, connecting to the ps and workers, 25 steps). "chief ran": the chief's train.py process, found in
/proc by its environment (a: SLURM_JOB_ID and SLURM_PROCID=0; b:
EXPERIMENT_ID and TFSLURM_ROLE=chief), from its start time in
/proc/PID/stat (10 ms ticks; in (a) that is the wrapper's start, which then
execs train.py in the same process) to when it leaves /proc (watched every
20 ms). "held, Slurm": EndTime - StartTime from `scontrol -o show job` once
the job has ended (whole seconds, so +-1 s; MinJobAge=3600 on the local
cluster keeps ended jobs visible); node-seconds = that x NumNodes. "held,
polled": the same interval from `scontrol -o show job` polled by the
benchmark (every 50 ms until the job runs, every 1 s while it trains, every
50 ms for 10 s after the chief's exit, then every 0.5 s): first seen RUNNING
-> first seen no longer RUNNING, each late by up to one interval plus one
call (~10-30 ms). "ratio" = held / chief ran = node-seconds held /
(chief ran x NumNodes): how much longer than its chief the job kept its
nodes; the target is judged on the polled one, whose error is a few
hundredths of a second instead of +-1 s. "job RUNNING -> chief start" and
"chief exit -> job no longer RUNNING" use the polled times. For (b) the
service's own view of the chief (registered_at -> ended_at from GET
/experiments/{id}: from the agent's registration, before the rendezvous, to
the Exited report) is given too, and when the last of the other five tasks
ended (their ended_at: the reaped tasks' Exited reports) after the chief's
exit. "load" is the 1-minute load average when
the run was submitted: the machine is shared. (a)'s "Time limit exhausted"
time is slurmctld's log line for the job, against its StartTime: slurmctld
ends jobs at their limit from a periodic check, not at the limit itself.
NOTE
} >"$work/section.md"
results_append "TensorFlow parameter-server training: hand-written sbatch vs tfslurm (issue 14)" "$command_line" \
  "$work/section.md"
cat "$work/section.md"
