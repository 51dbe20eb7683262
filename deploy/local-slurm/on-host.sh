#!/usr/bin/env bash
# on-host.sh DIR HOST CMD...: runs CMD on HOST of the hosts-apart cluster
# started by start.sh --hosts-apart DIR (HOST: ctld, svc, login, node1..3):
# in HOST's network namespace, with its hostname, on the machine's file
# system. Its exit status is CMD's. For example, tfctl from the login host:
#   deploy/local-slurm/on-host.sh DIR login tfctl --url http://svc.tfs0.test:8080 list
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"
[[ $# -ge 3 ]] || die "usage: $0 DIR HOST CMD..."
DIR="$(resolve_dir "$1")" || die "no cluster directory $1"
host="$2"
shift 2
# shellcheck source-path=SCRIPTDIR source=hosts_apart.sh
source "$here/hosts_apart.sh"
hosts_apart_enabled || die "$DIR is not a hosts-apart cluster (start.sh --hosts-apart $DIR)"
hosts_apart_load
[[ "$host" == svc || "$host" == ctld || "$host" == login || " ${LOCAL_SLURM_NODES[*]} " == *" $host "* ]] ||
  die "no host '$host': one of ctld svc login ${LOCAL_SLURM_NODES[*]}"
on_host "$host" "$@"
