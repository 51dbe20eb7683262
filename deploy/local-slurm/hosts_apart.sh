# The local cluster as separate network hosts (start.sh --hosts-apart DIR):
# each host a network namespace of its own, joined by two bridges. Sourced
# by start.sh, stop.sh and on-host.sh (after common.sh, with DIR set); never
# executed. README.md beside this file, "Hosts apart", says what it makes
# and why.
# shellcheck shell=bash

# DIR/etc/network: this cluster's network, KEY=VALUE lines (sourced). Its
# presence is what makes a DIR a hosts-apart cluster.
HA_FILE="$DIR/etc/network"
HA_LOCK=/run/lock/tfslurm-hosts-apart.lock
# The cluster's hosts besides the compute nodes (LOCAL_SLURM_NODES).
# shellcheck disable=SC2034 # used by the scripts that source this file
HA_SERVERS=(ctld svc login)

hosts_apart_enabled() { [[ -s "$HA_FILE" ]]; }

# hosts_apart_load: sets HA_INDEX (N), HA_DOMAIN, HA_SVC_NETNS,
# HA_SVC_OWNED and HA_SVC_IF from HA_FILE.
hosts_apart_load() {
  # shellcheck source=/dev/null
  source "$HA_FILE"
  [[ "${HA_INDEX:-}" =~ ^[0-9]+$ && -n "${HA_SVC_NETNS:-}" ]] || die "$HA_FILE is not a network file of start.sh"
}

# host_netns HOST: the network namespace HOST runs in.
host_netns() {
  if [[ "$1" == svc ]]; then printf '%s\n' "$HA_SVC_NETNS"; else printf 'tfs%s-%s\n' "$HA_INDEX" "$1"; fi
}
# host_addr HOST [ib]: HOST's address on the cluster network (198.18.N.0/24)
# or, with ib, on the compute nodes' second one (198.19.N.0/24).
host_addr() {
  local last
  case "$1" in
    ctld) last=2 ;;
    svc) last=3 ;;
    login) last=4 ;;
    node[0-9]*) last=$((10 + ${1#node})) ;;
    *) die "no host '$1' in the cluster" ;;
  esac
  if [[ "${2:-}" == ib ]]; then printf '198.19.%s.%s\n' "$HA_INDEX" "$last"; else printf '198.18.%s.%s\n' "$HA_INDEX" "$last"; fi
}
# host_fqdn HOST: the name HOST calls itself (its UTS hostname), which every
# host resolves through /etc/hosts.
host_fqdn() { printf '%s.%s\n' "$1" "$HA_DOMAIN"; }

# on_host HOST CMD...: runs CMD on HOST: in its network namespace and in a
# UTS namespace of its own named after it. The mount namespace stays the
# machine's (the shared file system, cgroups, mounts made later); `ip netns
# exec` would make a new one and mount a fresh /sys over the cgroups.
on_host() {
  local host="$1"
  shift
  nsenter --net="/run/netns/$(host_netns "$host")" -- \
    unshare --uts -- /bin/sh -c 'hostname "$0" && exec "$@"' "$(host_fqdn "$host")" "$@"
}

# _ha_pick_index: the lowest N whose switch namespace does not exist (under
# the lock).
_ha_pick_index() {
  local n
  for n in $(seq 0 255); do
    if [[ ! -e "/run/netns/tfs$n-sw" ]]; then
      printf '%s\n' "$n"
      return
    fi
  done
  die "every hosts-apart network index 0-255 is taken (ip netns list)"
}

# _ha_link SWITCH_PORT NETNS IFNAME BRIDGE ADDR: a veth pair from the
# switch's BRIDGE to NETNS, where it is IFNAME with ADDR/24; nothing when
# NETNS has IFNAME already.
_ha_link() {
  local port="$1" ns="$2" ifname="$3" bridge="$4" addr="$5" sw
  sw="$(host_netns sw)"
  if ip -n "$ns" link show "$ifname" >/dev/null 2>&1; then return; fi
  ip -n "$sw" link add "$port" type veth peer name "$ifname" netns "$ns"
  ip -n "$sw" link set "$port" master "$bridge" up
  ip -n "$ns" addr add "$addr/24" dev "$ifname"
  ip -n "$ns" link set "$ifname" up
}

# hosts_apart_up [SERVICE_NETNS]: makes (or completes) the namespaces,
# bridges, links and addresses, and the /etc/hosts block. SERVICE_NETNS: an
# existing namespace to be the service host (the test harness's, on another
# cluster), left in place by stop.sh. Idempotent.
hosts_apart_up() {
  local join="${1:-}" ns host lock_fd
  command -v nsenter >/dev/null && command -v unshare >/dev/null && command -v ip >/dev/null ||
    die "--hosts-apart needs ip (iproute2), nsenter and unshare (util-linux)"
  mkdir -p "$(dirname "$HA_LOCK")"
  exec {lock_fd}>"$HA_LOCK"
  flock "$lock_fd"
  if hosts_apart_enabled; then
    hosts_apart_load
  else
    HA_INDEX="$(_ha_pick_index)"
    HA_DOMAIN="tfs$HA_INDEX.test"
    if [[ -n "$join" ]]; then
      [[ -e "/run/netns/$join" ]] || die "--service-netns $join: no such network namespace (ip netns list)"
      HA_SVC_NETNS="$join" HA_SVC_OWNED=0 HA_SVC_IF="tfs$HA_INDEX"
    else
      HA_SVC_NETNS="tfs$HA_INDEX-svc" HA_SVC_OWNED=1 HA_SVC_IF=eth0
    fi
    printf 'HA_INDEX=%s\nHA_DOMAIN=%s\nHA_SVC_NETNS=%s\nHA_SVC_OWNED=%s\nHA_SVC_IF=%s\n' \
      "$HA_INDEX" "$HA_DOMAIN" "$HA_SVC_NETNS" "$HA_SVC_OWNED" "$HA_SVC_IF" >"$HA_FILE.tmp"
    mv "$HA_FILE.tmp" "$HA_FILE"
  fi
  for host in sw ctld login "${LOCAL_SLURM_NODES[@]}" svc; do
    ns="$(host_netns "$host")"
    [[ "$host" == svc && "$HA_SVC_OWNED" == 0 ]] && continue
    if [[ ! -e "/run/netns/$ns" ]]; then
      ip netns add "$ns"
    fi
    ip -n "$ns" link set lo up
  done
  ns="$(host_netns sw)"
  for bridge in eth ib; do
    if ! ip -n "$ns" link show "$bridge" >/dev/null 2>&1; then
      ip -n "$ns" link add "$bridge" type bridge
    fi
    ip -n "$ns" link set "$bridge" up
  done
  for host in ctld login "${LOCAL_SLURM_NODES[@]}"; do
    _ha_link "$host" "$(host_netns "$host")" eth0 eth "$(host_addr "$host")"
  done
  _ha_link svc "$HA_SVC_NETNS" "$HA_SVC_IF" eth "$(host_addr svc)"
  for host in "${LOCAL_SLURM_NODES[@]}"; do
    _ha_link "$host-ib" "$(host_netns "$host")" ib0 ib "$(host_addr "$host" ib)"
  done
  _ha_hosts_block_write
  exec {lock_fd}>&-
  log "hosts apart: network $(host_addr ctld | sed 's/\.2$/.0/')/24 (ib $(host_addr node1 ib | sed 's/\.11$/.0/')/24), service host $HA_SVC_NETNS"
}

# The block of /etc/hosts naming this cluster's hosts, between markers.
_ha_marker() { printf '# tfslurm hosts-apart %s (%s)' "$HA_DOMAIN" "$1"; }
_ha_hosts_block_remove() {
  local begin end
  begin="$(_ha_marker begin)" end="$(_ha_marker end)"
  # In place (cat >): /etc/hosts may be a bind mount, which a rename breaks.
  if grep -qxF "$begin" /etc/hosts; then
    awk -v b="$begin" -v e="$end" '$0 == b {skip = 1} !skip {print} $0 == e {skip = 0}' /etc/hosts >"$DIR/etc/hosts.tmp"
    cat "$DIR/etc/hosts.tmp" >/etc/hosts
    rm -f "$DIR/etc/hosts.tmp"
  fi
}
_ha_hosts_block_write() {
  local host
  _ha_hosts_block_remove
  {
    _ha_marker begin
    echo
    for host in ctld svc login "${LOCAL_SLURM_NODES[@]}"; do
      printf '%s %s\n' "$(host_addr "$host")" "$(host_fqdn "$host")"
    done
    for host in "${LOCAL_SLURM_NODES[@]}"; do
      printf '%s %s\n' "$(host_addr "$host" ib)" "$host-ib.$HA_DOMAIN"
    done
    _ha_marker end
    echo
  } >>/etc/hosts
}

# hosts_apart_netns_list: every namespace this cluster made (not a joined
# service host).
hosts_apart_netns_list() {
  local host
  for host in ctld login "${LOCAL_SLURM_NODES[@]}" sw; do host_netns "$host"; done
  if [[ "$HA_SVC_OWNED" == 1 ]]; then host_netns svc; fi
}

# hosts_apart_down: kills what still runs in the cluster's namespaces (not
# on the service host: the test harness and its tfslurmd may live there),
# deletes the namespaces (their links and the bridges go with them), the
# /etc/hosts block and DIR/etc/network. Safe when nothing is left.
hosts_apart_down() {
  local ns p lock_fd pids=()
  hosts_apart_enabled || return 0
  hosts_apart_load
  exec {lock_fd}>"$HA_LOCK"
  flock "$lock_fd"
  local mine=()
  for ns in $(hosts_apart_netns_list); do
    if [[ -e "/run/netns/$ns" && "$ns" != "$HA_SVC_NETNS" ]]; then mine+=("/run/netns/$ns"); fi
  done
  # -ef compares device and inode in bash itself: one pass over /proc with
  # no process started per entry (a stat(1) each took minutes on a loaded
  # machine).
  for p in /proc/[0-9]*; do
    for ns in "${mine[@]+"${mine[@]}"}"; do
      if [[ "$p/ns/net" -ef "$ns" ]]; then
        pids+=("${p#/proc/}")
        break
      fi
    done
  done
  if ((${#pids[@]})); then
    log "killing what still runs on the cluster's hosts (pid ${pids[*]})"
    kill -KILL "${pids[@]}" 2>/dev/null || true
  fi
  if [[ "$HA_SVC_OWNED" == 0 ]]; then
    # The joined service host keeps its namespace; its link to us goes.
    ip -n "$HA_SVC_NETNS" link del "$HA_SVC_IF" 2>/dev/null || true
  fi
  for ns in $(hosts_apart_netns_list); do
    if [[ -e "/run/netns/$ns" ]]; then ip netns del "$ns"; fi
  done
  _ha_hosts_block_remove
  rm -f "$HA_FILE"
  exec {lock_fd}>&-
  log "hosts apart: removed the namespaces of $HA_DOMAIN"
}
