#!/usr/bin/env bash
# Runs every benchmark, in order, and appends their figures to
# bench/RESULTS.md. For a fresh machine (Debian 12, root: the local Slurm
# cluster needs it): installs what is missing through deploy/install-deps.sh,
# plus wrk, slurmrestd and libtorch-dev (torch_rendezvous.sh), builds, then
# runs. Each benchmark starts what it
# needs and stops it again; one failing does not stop the others.
#
#   bench/run.sh [--quick]     --quick: fewer runs and requests (a smoke test)
set -uo pipefail
here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd -- "$here/.." && pwd)"
quick=0
[[ "${1:-}" == --quick ]] && quick=1

[[ $(id -u) -eq 0 ]] || { echo "bench/run.sh: run as root (the local Slurm cluster needs it)" >&2; exit 1; }
"$repo/deploy/install-deps.sh" || exit 1
missing=()
for p in wrk slurmrestd libtorch-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } || exit 1
fi

if ((quick)); then
  runs=(
    "rendezvous.sh --runs 3 --runs-4096 2 --warmup 1"
    "torch_rendezvous.sh --runs 3 --runs-4096 2 --warmup 1"
    "reaping.sh --runs 2"
    "tf_ps.sh --runs 1"
    "api_latency.sh --rates 500,2000 --list-rates 25 --page-rates 500 --duration 3"
    "submit.sh --count 50 --rounds 2"
    "slurm_load.sh --experiments 100 --cycles 3"
    "status_vs_slurmrestd.sh --experiments 100 --requests 300"
    "hang.sh --runs 1 --stall-timeouts 10"
  )
else
  runs=(
    "rendezvous.sh"
    "torch_rendezvous.sh"
    "reaping.sh"
    "tf_ps.sh"
    "api_latency.sh"
    "submit.sh"
    "slurm_load.sh"
    "status_vs_slurmrestd.sh"
    "hang.sh"
  )
fi
failed=()
for r in "${runs[@]}"; do
  echo "=== bench/$r" >&2
  # shellcheck disable=SC2086
  "$here"/$r || failed+=("$r")
done
if ((${#failed[@]})); then
  printf 'bench/run.sh: failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "bench/run.sh: all benchmarks ran; figures in $here/RESULTS.md" >&2
