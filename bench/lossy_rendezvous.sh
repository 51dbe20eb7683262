#!/usr/bin/env bash
# The rendezvous on a lossy, slow link against a clean one (issue 43): 6
# tasks over 3 nodes of the local cluster with its hosts apart
# (deploy/local-slurm/start.sh --hosts-apart), node2's link clean and with
# 5% loss and 100 ms delay, alternately (bench/lossy_rendezvous.py). About
# 2 minutes with 5 runs each on 2 cores. Run as root.
#
#   bench/lossy_rendezvous.sh [--runs 5] [--delay-ms 100] [--loss 5]
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

runs=5 delay=100 loss=5
while (($#)); do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --delay-ms) delay="$2"; shift 2 ;;
    --loss) loss="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
[[ $(id -u) -eq 0 ]] || die "run as root: the cluster's hosts are network namespaces"
command_line="bench/lossy_rendezvous.sh --runs $runs --delay-ms $delay --loss $loss"

build_all
work="$(mktemp -d /tmp/bench-lossy-XXXX)"
trap stop_cluster EXIT
LOCAL_SLURM_HOSTS_APART=1 start_cluster
wait_quiet 120
set +e
"$REPO/deploy/local-slurm/on-host.sh" "$CLUSTER_DIR" svc python3 "$BENCH_DIR/lossy_rendezvous.py" \
  --slurm-conf "$SLURM_CONF" --bin "$BENCH_BIN" --runs "$runs" --delay-ms "$delay" --loss "$loss" | tee "$work/out"
rc=${PIPESTATUS[0]}
set -e
{
  sed -n '/^| link/,$p' "$work/out"
  cat <<NOTE

From the first agent's start to the last Assignment, read from the agents'
logs: their connections to tfslurmd over node2's link, the registrations,
the barrier and the Assignments back. The slow link is
tests/integration/helpers/netfault.py's (tc netem where the kernel has it;
this one has no sch_netem, so iptables' statistic match drops and an NFQUEUE
holds each packet for the delay), on node2's outgoing packets.
NOTE
} >"$work/table.md"
results_append "Rendezvous on a lossy link (issue 43)$([[ $rc -eq 0 ]] || echo ' -- FAILED')" "$command_line" "$work/table.md"
exit "$rc"
