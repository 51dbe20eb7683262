#!/usr/bin/env bash
# Certificate rotation during a rendezvous storm (issue 45): N simulated
# agents connect, each with its own TLS handshake verifying the service, and
# register while the server's certificate is rotated every EVERY ms (`tls
# init` again, then SIGHUP, as an admin rotates). No agent may be refused,
# broken or missing, and both ports must present the last certificate
# afterwards: bench_rendezvous_storm exits non-zero otherwise, and so does
# this script. Prints the storm's table (its "certificate rotations" count
# says how many happened during it). A check more than a figure: nothing is
# appended to RESULTS.md. About 10 s on 2 quiet cores (4,096 handshakes are
# ~12 s of CPU on both sides; a minute or more at a high load).
#
#   bench/tls_rotation.sh [--agents 4096] [--every-ms 300]
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

agents=4096 every_ms=300
while (($#)); do
  case "$1" in
    --agents) agents="$2"; shift 2 ;;
    --every-ms) every_ms="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done

build_all
work="$(mktemp -d /tmp/bench-rotation-XXXX)"
trap 'rm -rf "$work"' EXIT
log "storm of $agents TLS agents while the certificate rotates every $every_ms ms"
"$BENCH_BIN/bench_rendezvous_storm" --server "$BENCH_BIN/bench_rendezvous_server" --sizes "$agents" \
  --runs 1 --warmup 0 --dir "$work/srv" --tls "$work/pki" --rotate-every-ms "$every_ms" ||
  die "the storm of $agents agents through certificate rotations failed (its table and stderr say why)"
