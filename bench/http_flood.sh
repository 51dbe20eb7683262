#!/usr/bin/env bash
# Strangers flooding the REST port (issue 41, point 1): tfslurmd's peak RSS
# and /healthz's answers while 4 chunked request bodies of 1 GB and 4 GETs
# with 40,000 header fields of 8 KB arrive at once, with no token; beside
# the issue's target (peak RSS under 256 MB, /healthz answered throughout)
# and the probe's figures on Debian's cpp-httplib 0.11.4. Starts its own
# Slurm cluster and tfslurmd (with tokens, as a deployment runs). See
# http_flood.py; exits 1 when a target is missed or an attack is not refused.
#
#   bench/http_flood.sh [--bodies 4] [--body-mb 1024] [--floods 4]
#                       [--flood-fields 40000] [--build DIR]
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

bodies=4 body_mb=1024 floods=4 fields=40000 prebuilt=""
while (($#)); do
  case "$1" in
    --bodies) bodies="$2"; shift 2 ;;
    --body-mb) body_mb="$2"; shift 2 ;;
    --floods) floods="$2"; shift 2 ;;
    --flood-fields) fields="$2"; shift 2 ;;
    --build) prebuilt="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
command_line="bench/http_flood.sh --bodies $bodies --body-mb $body_mb --floods $floods --flood-fields $fields${prebuilt:+ --build $prebuilt}"

use_binaries "$prebuilt"
work="$(mktemp -d /tmp/bench-flood-XXXX)"
chmod 755 "$work"
clean_up_on_exit "$work"
start_cluster
TFSLURMD_AUTH=token start_tfslurmd "$work/svc"
wait_quiet 300

status=0
python3 "$BENCH_DIR/http_flood.py" --api "$API" --pid "$TFSLURMD_PID" --bodies "$bodies" --body-mb "$body_mb" \
  --floods "$floods" --flood-fields "$fields" >"$work/table.md" || status=$?
title="Strangers flooding the REST port: peak RSS and /healthz (issue 41)"
((status == 0)) || bench_error "$(grep '^FAILED' "$work/table.md" || echo "http_flood.py exited $status")"
{
  printf -- '- binaries: %s\n' "$binaries"
  printf -- '- load average at the end %s\n\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
  cat "$work/table.md"
  cat <<NOTE

The gate in front of the REST port (service/api/request_gate.h) reads each
request before any thread, route or token sees it: a body needs a
Content-Length (411 for Transfer-Encoding), the header fields are at most
32 KiB and 64 of them (431). After the answer it reads and drops what the
client still sends, up to 16 MiB or 2 s, so that an honest client reads the
answer rather than a reset; tfslurmd keeps none of it. The anchors of
0.11.4 are the probe's (issue 41), on the same kind of machine.
NOTE
} >"$work/section.md"
results_append "$title" "$command_line" "$work/section.md"
cat "$work/section.md"
