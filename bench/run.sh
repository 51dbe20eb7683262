#!/usr/bin/env bash
# Runs every benchmark, in order, and appends their figures to
# bench/RESULTS.md. For a fresh machine (Debian 12, root: the local Slurm
# cluster needs it): installs what is missing through deploy/install-deps.sh
# (each script installs what it alone needs: wrk, slurmrestd, libtorch-dev),
# builds, then runs. Each benchmark starts what it needs and stops it again;
# one failing does not stop the others.
#
#   bench/run.sh [--quick | --smoke]
#     --quick  fewer runs and requests
#     --smoke  every bench script (soak.sh and rendezvous_pairs.sh too) at its
#              smallest size, without waiting for a quiet machine, figures to a
#              scratch file rather than RESULTS.md: whether each still runs, not
#              what it measures. tests/run.sh runs this (with
#              TFSLURM_BENCH_BUILD=build); one line "bench smoke SCRIPT: ok" or
#              "FAILED" per script.
set -uo pipefail
here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd -- "$here/.." && pwd)"
mode=full failed=()
case "${1:-}" in
  --quick) mode=quick ;;
  --smoke) mode=smoke ;;
  "") ;;
  *) { sed -n '9,16p' "$0"; exit 2; } >&2 ;;
esac

[[ $(id -u) -eq 0 ]] || { echo "bench/run.sh: run as root (the local Slurm cluster needs it)" >&2; exit 1; }
"$repo/deploy/install-deps.sh" || exit 1

if [[ $mode == quick ]]; then
  runs=(
    "rendezvous.sh --runs 3 --runs-4096 2 --warmup 1"
    "in_place_rendezvous.sh --runs 3 --runs-4096 2 --warmup 1"
    "torch_rendezvous.sh --runs 3 --runs-4096 2 --warmup 1"
    "reaping.sh --runs 2"
    "tf_ps.sh --runs 1"
    "api_latency.sh --rates 500,2000 --list-rates 25 --page-rates 500 --duration 3"
    "submit.sh --count 50 --rounds 2"
    "slurm_load.sh --experiments 100 --cycles 3"
    "status_vs_slurmrestd.sh --experiments 100 --requests 300"
    "hang.sh --runs 1 --stall-timeouts 10"
    "in_place.sh --runs 2 --busy-runs 1 --node-runs 2 --node-busy-runs 1"
    "lone_restart.sh --runs 2"
    "framework_restarts.sh --runs 2 --busy-runs 1 --floor-runs 1"
    "sweep.sh --steps 200 --rungs 10,40 --shuffle-seeds 0"
    "http_flood.sh"
    "sweep_stop.sh --runs 2"
    "lossy_rendezvous.sh --runs 3"
    "big_experiment.sh --duration 3"
  )
elif [[ $mode == smoke ]]; then
  # Each at its smallest: one size, one run, a few agents or experiments.
  # What each cost on 2 shared cores at load 8-10 (2026-11-26; most of it is
  # starting a local cluster and tfslurmd, and TensorFlow's import), about
  # 6 min in all:
  runs=(
    "rendezvous.sh --sizes 64 --runs 1 --warmup 0 --rounds 1 -- --agents-per-connection 8 --node-streams" # 7 s: 8 node streams, their agents as lanes
    "in_place_rendezvous.sh --sizes 64 --runs 1 --warmup 0 -- --agents-per-connection 8 --node-streams" # 1 s
    "torch_rendezvous.sh --sizes 64 --runs 1 --warmup 0" # 3 s; the first time 1-2 min more (libtorch-dev, its build)
    "rendezvous_pairs.sh --size 64 --pairs 1"            # 1 s
    "reaping.sh --runs 1 --steps 30"                     # 5 s
    "tf_ps.sh --runs 1 --steps 50 --limit-min 1"         # 2 min: the hand-written job holds its nodes to its 1-min limit
    "hang.sh --runs 1 --stall-timeouts 10 --backoff-s 1" # 23 s
    "in_place.sh --runs 1 --busy-runs 0 --node-runs 1 --node-busy-runs 0 --backoff-s 1" # 50 s
    "lone_restart.sh --runs 1 --warmup-s 5 --after-s 5"  # 40 s: TensorFlow's start-up, mostly
    "framework_restarts.sh --runs 1 --busy-runs 0 --floor-runs 1 --backoff-s 1 --workloads ddp" # 55 s at load 4: one DDP run in place, one requeued, one by hand
    "soak.sh --experiments 1 --daemon-kills 1 --steps 200 --fault-interval 5 --disk-faults 0" # 17 s
    "api_latency.sh --rates 100 --list-rates 10 --page-rates 100 --connections 1 --duration 1 --experiments 10" # 41 s
    "api_latency.sh --tls --rates 100 --rounds 1 --connections 1 --duration 1" # plaintext and TLS side by side (api_latency_tls.sh)
    "tls_rotation.sh"                                    # ~10 s quiet: 4,096 TLS agents while the certificate rotates every 300 ms
    "submit.sh --count 5 --rounds 1"                     # 5 s
    "slurm_load.sh --experiments 5 --cycles 1"           # 11 s
    "status_vs_slurmrestd.sh --experiments 5 --requests 50" # 20 s
    "sweep.sh --steps 40 --rungs 10,20 --shuffle-seeds 0" # 68 s: four 16-trial sweeps of 40 steps
    "http_flood.sh --bodies 1 --body-mb 64 --floods 1 --flood-fields 3000" # 3 s: 24 MB, past the gate's 16 MiB drain
    "sweep_stop.sh --runs 1"                             # 30 s: one stop and one scancel; most of it the cluster's start
    "lossy_rendezvous.sh --runs 1"                       # ~25 s: a hosts-apart cluster, two 6-task experiments
    "big_experiment.sh --tasks 512 --rate 20 --whole-rate 2 --duration 1 --connections 1" # ~20 s: the cluster's start, mostly
    "containers.sh --runs 1"                             # ~20 s: a cluster with pyxis, 5 sruns (images from tests/containers.sh, cached)
  )
  # Scripts that measure nothing of their own: they run the others.
  drivers=(
    run.sh          # this one
    before_after.sh # builds another revision from scratch first (~25 min on 2 cores)
  )
  # Files that other scripts source, run by the entries that source them.
  parts=(
    lib.sh             # every script's
    api_latency_tls.sh # api_latency.sh --tls's
  )
  # A new script must be added to one of the lists: one that no smoke run
  # covers is one that can rot unseen.
  for script in "$here"/*.sh; do
    name=$(basename "$script")
    listed=0
    for r in "${runs[@]%% *}" "${drivers[@]}" "${parts[@]}"; do [[ $r == "$name" ]] && listed=1; done
    ((listed)) && continue
    echo "bench smoke $name: FAILED (not in bench/run.sh's smoke list, nor among its drivers)"
    failed+=("$name (not listed)")
  done
  TFSLURM_BENCH_RESULTS="$(mktemp /tmp/bench-smoke-XXXX.md)"
  export TFSLURM_BENCH_RESULTS BENCH_MAX_WAIT=0
else
  runs=(
    "rendezvous.sh"
    "in_place_rendezvous.sh"
    "torch_rendezvous.sh"
    "reaping.sh"
    "tf_ps.sh"
    "api_latency.sh"
    "api_latency.sh --tls"
    "tls_rotation.sh"
    "submit.sh"
    "slurm_load.sh"
    "status_vs_slurmrestd.sh"
    "hang.sh"
    "in_place.sh"
    "lone_restart.sh"
    "framework_restarts.sh"
    "sweep.sh"
    "http_flood.sh"
    "sweep_stop.sh"
    "lossy_rendezvous.sh"
    "big_experiment.sh"
    "containers.sh"
    "containers.sh --slurm 26.05.3" # Slurm's OCI support through tfslurmd (23.02+); builds 26.05.3 once (cached)
  )
fi
for r in "${runs[@]}"; do
  echo "=== bench/$r" >&2
  started=$SECONDS
  outcome=ok
  # shellcheck disable=SC2086
  "$here"/$r || { failed+=("$r"); outcome=FAILED; }
  [[ $mode == smoke ]] && echo "bench smoke ${r%% *}: $outcome ($((SECONDS - started)) s: bench/$r)"
done
if [[ $mode == smoke ]]; then
  rm -f "$TFSLURM_BENCH_RESULTS"
fi
if ((${#failed[@]})); then
  printf 'bench/run.sh: failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
[[ $mode == smoke ]] && { echo "bench/run.sh: every benchmark ran at its smallest size" >&2; exit 0; }
echo "bench/run.sh: all benchmarks ran; figures in $here/RESULTS.md" >&2
