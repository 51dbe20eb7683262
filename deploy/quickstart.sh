#!/usr/bin/env bash
# deploy/quickstart.sh: from a fresh Debian machine to a finished
# distributed-training experiment on a real (local) Slurm cluster.
#   1. installs the dependencies        (deploy/install-deps.sh)
#   2. builds tfslurmd, tfslurm-agent, tfctl into build/bin
#   3. starts a 3-node Slurm cluster     (deploy/local-slurm/start.sh)
#   4. starts tfslurmd
#   5. runs examples/linear_ps (2 ps + 4 workers) to the end
#   6. prints where to look
# Everything it starts lives under $TFSLURM_QUICKSTART_DIR (default
# /tmp/tfslurm-quickstart); deploy/quickstart.sh --stop stops it.
set -euo pipefail

repo="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${TFSLURM_QUICKSTART_DIR:-/tmp/tfslurm-quickstart}"
port="${TFSLURM_PORT:-8080}"
agent_port="${TFSLURM_AGENT_PORT:-8081}"
url="http://127.0.0.1:$port"

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

if [[ "${1:-}" == "--stop" ]]; then
  if [[ -f "$dir/tfslurmd.pid" ]]; then kill "$(cat "$dir/tfslurmd.pid")" 2>/dev/null || true; fi
  "$repo/deploy/local-slurm/stop.sh" "$dir/slurm"
  echo "stopped; state is kept in $dir"
  exit 0
fi

say "installing dependencies (Debian packages)"
"$repo/deploy/install-deps.sh"

say "building"
cmake -S "$repo" -B "$repo/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$repo/build" -j2 tfslurmd tfslurm-agent tfctl

say "starting a local Slurm cluster (munged, slurmctld, slurmd node1..node3)"
mkdir -p "$dir"
chmod 755 "$dir"
conf_line="$("$repo/deploy/local-slurm/start.sh" "$dir/slurm")"
export "${conf_line?}"
sinfo

say "starting tfslurmd on $url"
if [[ -f "$dir/tfslurmd.pid" ]] && kill -0 "$(cat "$dir/tfslurmd.pid")" 2>/dev/null; then
  echo "already running (pid $(cat "$dir/tfslurmd.pid"))"
else
  rm -f "$dir/ready.json"
  # As root (a container, a throwaway VM) the jobs run as root: tfslurmd
  # wants that said (--allow-root). A shared machine wants --site instead.
  root=()
  ((EUID == 0)) && root=(--allow-root)
  # The agent endpoint on loopback too: this cluster's nodes are this
  # host's processes. tfslurmd serves it off loopback only with TLS
  # (docs/site-deployment.md says how a site's does).
  nohup "$repo/build/bin/tfslurmd" --listen "127.0.0.1:$port" --agent-listen "127.0.0.1:$agent_port" \
    --db "$dir/tfslurm.db" "${root[@]}" \
    --output-root "$dir/output" --ready-file "$dir/ready.json" >>"$dir/tfslurmd.log" 2>&1 &
  echo $! >"$dir/tfslurmd.pid"
  for _ in $(seq 100); do [[ -s "$dir/ready.json" ]] && break; sleep 0.1; done
  [[ -s "$dir/ready.json" ]] || { tail "$dir/tfslurmd.log"; echo "tfslurmd did not start" >&2; exit 1; }
fi
curl -fsS "$url/healthz"; echo

# Every route but /healthz needs a token; the quickstart makes one admin
# token for you and keeps it (mode 600) in $dir/token.
if [[ ! -s "$dir/token" ]]; then
  (umask 077 && "$repo/build/bin/tfslurmd" --db "$dir/tfslurm.db" token create --user "$(id -un)" --admin >"$dir/token")
fi
export TFSLURM_URL="$url" TFSLURM_TOKEN="$(cat "$dir/token")"
auth=(-H "Authorization: Bearer $TFSLURM_TOKEN")

say "submitting examples/linear_ps: 2 parameter servers + 4 workers on 3 nodes"
id="linear-ps-quickstart-$(date +%s)"
sed -e "s|@REPO@|$repo|g" -e "s|\"linear-ps-demo\"|\"$id\"|" "$repo/examples/linear_ps/experiment.json.in" >"$dir/experiment.json"
curl -fsS "${auth[@]}" -X POST "$url/experiments" -H 'Content-Type: application/json' -d @"$dir/experiment.json" >/dev/null
echo "submitted $id; following it with tfctl:"
"$repo/build/bin/tfctl" status "$id"

deadline=$((SECONDS + 300))
while :; do
  state="$(curl -fsS "${auth[@]}" "$url/experiments/$id" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')"
  case "$state" in succeeded | failed | cancelled) break ;; esac
  ((SECONDS < deadline)) || { echo "timed out waiting for $id (state $state)" >&2; exit 1; }
  printf '  %s\n' "$state"
  sleep 2
done
"$repo/build/bin/tfctl" status "$id"

say "done: $id $state"
cat <<INFO
Where to look (your token is in $dir/token):
  dashboard         $url/   (paste the token when it asks)
  REST API          curl -H "Authorization: Bearer \$(cat $dir/token)" $url/experiments/$id
  CLI               TFSLURM_URL=$url TFSLURM_TOKEN=\$(cat $dir/token) $repo/build/bin/tfctl status $id
  training loss     TFSLURM_URL=$url TFSLURM_TOKEN=\$(cat $dir/token) $repo/build/bin/tfctl metrics $id   (and the dashboard's charts)
  task logs         $dir/output/$id/logs/attempt-1/task-*.out
  checkpoints       $dir/output/$id/
  sbatch script     curl -H "Authorization: Bearer \$(cat $dir/token)" $url/experiments/$id/sbatch
  service log       $dir/tfslurmd.log
  Slurm             SLURM_CONF=$SLURM_CONF squeue / scontrol show job
Stop everything:    $repo/deploy/quickstart.sh --stop
INFO
[[ "$state" == succeeded ]]
