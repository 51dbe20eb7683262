#!/usr/bin/env bash
# start.sh DIR: runs a real Slurm cluster (munged, slurmctld, three slurmd)
# on this machine with all config, state, sockets and logs under DIR.
#
# Prints exactly one line on stdout, SLURM_CONF=DIR/etc/slurm.conf, so that
#   eval "export $(deploy/local-slurm/start.sh DIR)"
# works; everything else goes to stderr. Idempotent: daemons already running
# from DIR (pid file + live process of the right name) are left alone.
# See README.md beside this file.
set -euo pipefail

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$here/common.sh"

# Keep the real stdout on fd 3 for the single result line; any tool that
# prints to stdout below lands on stderr and cannot break the caller's eval.
exec 3>&1 1>&2

# --accounting (or LOCAL_SLURM_ACCOUNTING=1): also MariaDB and slurmdbd
# under DIR, with enforced associations, accounts and QOS (accounting.sh).
# --slurm-prefix PREFIX (or LOCAL_SLURM_PREFIX): the Slurm installation in
# PREFIX (bin/, sbin/, lib/; e.g. one build-slurm.sh made) instead of
# Debian's; DIR remembers it, so stop.sh and env.sh use the same one.
# --hosts-apart (or LOCAL_SLURM_HOSTS_APART=1): every host in a network
# namespace of its own (hosts_apart.sh; README.md, "Hosts apart"); DIR
# remembers it until stop.sh. --service-netns NAME: with it, NAME (an
# existing namespace, e.g. the test harness's service host of another
# cluster) is this cluster's service host too.
# --containers CDIR (or LOCAL_SLURM_CONTAINERS): the container runtimes of
# CDIR, as deploy/containers/setup.sh made it for this Slurm release: its
# plugstack.conf (pyxis) and oci.conf (Slurm's OCI support, runc) go into
# DIR/etc, and its bin/ (enroot) onto the daemons' PATH, where pyxis runs
# enroot from.
accounting="${LOCAL_SLURM_ACCOUNTING:-0}"
private_data="${LOCAL_SLURM_PRIVATE_DATA-jobs}"
prefix="${LOCAL_SLURM_PREFIX:-}"
containers="${LOCAL_SLURM_CONTAINERS:-}"
hosts_apart="${LOCAL_SLURM_HOSTS_APART:-0}"
service_netns=""
while [[ $# -gt 1 ]]; do
  case "$1" in
    --accounting) accounting=1 ;;
    --hosts-apart) hosts_apart=1 ;;
    --service-netns)
      service_netns="${2:-}"
      hosts_apart=1
      shift
      ;;
    --containers)
      containers="${2:-}"
      shift
      ;;
    --slurm-prefix)
      prefix="${2:-}"
      shift
      ;;
    *) break ;;
  esac
  shift
done
[[ $# -eq 1 && "$1" != -* ]] || die "usage: $0 [--accounting] [--slurm-prefix PREFIX] [--hosts-apart [--service-netns NAME]] [--containers CDIR] DIR"
[[ $(id -u) -eq 0 ]] || die "must run as root (slurmd launches jobs for any user)"
if [[ -n "$prefix" ]]; then
  [[ -x "$prefix/sbin/slurmctld" && -x "$prefix/sbin/slurmd" && -x "$prefix/bin/sinfo" ]] ||
    die "--slurm-prefix $prefix: no Slurm installation there (sbin/slurmctld, sbin/slurmd, bin/sinfo)"
  prefix="$(cd -- "$prefix" && pwd -P)"
  export PATH="$prefix/bin:$prefix/sbin:$PATH"
fi
for tool in munged mungekey munge unmunge slurmctld slurmd sinfo scontrol python3 runuser; do
  command -v "$tool" >/dev/null || die "$tool not found; run deploy/install-deps.sh"
done
# "slurm 26.05.3", or Debian's "slurm-wlm 22.05.8".
release="$(slurmctld -V | sed -n 's/^slurm[a-z-]* \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p')"
[[ -n "$release" ]] || die "cannot tell the Slurm release of $(command -v slurmctld) (slurmctld -V: $(slurmctld -V 2>&1))"
# release_at_least YY.MM: this installation is that release or a later one.
release_at_least() {
  local want_y="${1%.*}" want_m="${1#*.}" have_y="${release%.*}" have_m="${release#*.}"
  ((10#$have_y > 10#$want_y || (10#$have_y == 10#$want_y && 10#$have_m >= 10#$want_m)))
}
log "Slurm $release ($(command -v slurmctld))"

DIR="$(resolve_dir "$1" create)"
CONF="$DIR/etc/slurm.conf"
MUNGE_DIR="$DIR/munge"
MUNGE_SOCKET="$MUNGE_DIR/munge.socket.2"
PORTS_FILE="$DIR/etc/ports"
HOST="$(hostname -s)"
DEADLINE_SECONDS=60
# shellcheck source-path=SCRIPTDIR source=hosts_apart.sh
source "$here/hosts_apart.sh"
# A DIR started apart stays apart until stop.sh (node_fault.py's
# restore_node starts a node again with no flags).
if hosts_apart_enabled; then hosts_apart=1; fi
# shellcheck source-path=SCRIPTDIR source=accounting.sh
source "$here/accounting.sh"

# on_daemon_host HOST CMD...: CMD on HOST when the hosts are apart, else
# here. client CMD...: a Slurm client (sinfo, sacctmgr, ...) on a host that
# reaches slurmctld: the login host when apart.
on_daemon_host() {
  local host="$1"
  shift
  if [[ "$hosts_apart" == 1 ]]; then on_host "$host" "$@"; else "$@"; fi
}
client() { on_daemon_host login "$@"; }

# Unix socket paths are limited to 108 bytes. slurmd's step sockets are the
# longest: SPOOL/node1/HOST_JOBID.STEPID with 10-digit ids.
longest="$DIR/spool/node1/${HOST}_4294967295.4294967295"
((${#longest} < 108)) || die "DIR is too long for unix socket paths ($longest); use a shorter DIR"

export SLURM_CONF="$CONF"

mkdir -p "$DIR/etc" "$DIR/log" "$DIR/run" "$DIR/state" "$MUNGE_DIR"
# The installation this cluster runs, for stop.sh and env.sh; a DIR started
# with another one before must be stopped first (its state files are that
# release's).
if [[ -f "$DIR/etc/slurm-prefix" && "$(cat "$DIR/etc/slurm-prefix")" != "$prefix" &&
  -n "$(ls -A "$DIR/state")" ]]; then
  die "$DIR holds the state of the Slurm in '$(cat "$DIR/etc/slurm-prefix")' ('' is the system's), not of '$prefix': use another DIR"
fi
printf '%s\n' "$prefix" >"$DIR/etc/slurm-prefix"
for n in "${LOCAL_SLURM_NODES[@]}"; do mkdir -p "$DIR/spool/$n"; done

if [[ "$hosts_apart" == 1 ]]; then
  if [[ -n "$service_netns" ]] && hosts_apart_enabled; then
    hosts_apart_load
    [[ "$HA_SVC_NETNS" == "$service_netns" ]] ||
      die "$DIR runs with service host $HA_SVC_NETNS, not $service_netns: stop.sh $DIR first"
  fi
  hosts_apart_up "$service_netns"
fi

# ---------------------------------------------------------------- munge ----
# munged refuses to run with insecure paths: its key, socket, pid and seed
# directory must belong to the munge user and not be group/world writable,
# and every ancestor of DIR must be searchable by that user.
chown munge:munge "$MUNGE_DIR"
chmod 0711 "$MUNGE_DIR" # 0711: other users' Slurm clients must reach the socket
runuser -u munge -- test -x "$MUNGE_DIR" ||
  die "user munge cannot reach $MUNGE_DIR; every parent of DIR needs o+x (e.g. not under /root)"

if [[ ! -s "$MUNGE_DIR/munge.key" ]]; then
  # Own key per cluster: nothing under /etc/munge is read or needed.
  log "creating munge key $MUNGE_DIR/munge.key"
  rm -f "$MUNGE_DIR/munge.key"
  mungekey --create --keyfile="$MUNGE_DIR/munge.key" 2>/dev/null ||
    dd if=/dev/urandom of="$MUNGE_DIR/munge.key" bs=1024 count=1 status=none
fi
chown munge:munge "$MUNGE_DIR/munge.key"
chmod 0400 "$MUNGE_DIR/munge.key"

# munged opens its log file as the munge user, which cannot create files in
# root's DIR/log: create the file ahead, owned by munge, not world-writable.
touch "$DIR/log/munged.log"
chown munge:munge "$DIR/log/munged.log"
chmod 0640 "$DIR/log/munged.log"

munge_ok() {
  munge -n -S "$MUNGE_SOCKET" 2>/dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1
}

if [[ -n "$(daemon_pid "$MUNGE_DIR/munged.pid" munged)" ]]; then
  log "munged already running"
else
  # A stale socket or pid file from a crash makes munged refuse to start.
  rm -f "$MUNGE_DIR/munged.pid" "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
  log "starting munged"
  # munged daemonizes only after it is initialised and exits non-zero if
  # initialisation failed, so its exit status is meaningful here.
  if ! detached runuser -u munge -- munged \
    --socket="$MUNGE_SOCKET" \
    --key-file="$MUNGE_DIR/munge.key" \
    --pid-file="$MUNGE_DIR/munged.pid" \
    --seed-file="$MUNGE_DIR/munged.seed" \
    --log-file="$DIR/log/munged.log" >>"$DIR/log/munged.out" 2>&1; then
    tail -n 20 "$DIR/log/munged.log" >&2 || true
    die "munged failed to start"
  fi
fi
munge_ok || {
  tail -n 20 "$DIR/log/munged.log" >&2 || true
  die "munge round trip over $MUNGE_SOCKET failed"
}

# ------------------------------------------------------------- GPUs ----
# Each node has LOCAL_SLURM_GPUS_PER_NODE "GPUs": character device files of
# its own under DIR/dev/NODE, named in gres.conf. Slurm's gres/gpu plugin
# needs no driver, only files that stat() as char or block devices
# (_set_gres_device_desc in src/plugins/gres/common/gres_common.c,
# slurm-22-05-8-1); their major:minor is what task/cgroup's ConstrainDevices
# allows or denies. The major is one the kernel has no driver for (from the
# range Linux reserves for local use, 240-254, skipping any in
# /proc/devices), so opening such a file reaches no device (ENXIO), and the
# files are root-only besides. Minors run on across nodes, so no two nodes
# share a device number.
gpu_major() {
  local m used
  used="$(sed -n '/^Character devices:/,/^$/p' /proc/devices | awk '{print $1}')"
  for m in $(seq 240 254); do
    if ! grep -qx "$m" <<<"$used"; then
      printf '%s\n' "$m"
      return
    fi
  done
  die "no free character device major in 240-254 for the GPU device files"
}
major=""
minor=0
for n in "${LOCAL_SLURM_NODES[@]}"; do
  mkdir -p "$DIR/dev/$n"
  for ((g = 0; g < LOCAL_SLURM_GPUS_PER_NODE; g++)); do
    f="$DIR/dev/$n/gpu$g"
    if [[ ! -c "$f" ]]; then
      [[ -n "$major" ]] || major="$(gpu_major)"
      rm -f "$f"
      mknod -m 0600 "$f" c "$major" "$minor" || die "mknod $f failed (needs CAP_MKNOD)"
    fi
    minor=$((minor + 1))
  done
done

# ---------------------------------------------------------- slurm.conf ----
ctld_pid="$(daemon_pid "$DIR/run/slurmctld.pid" slurmctld)"
any_slurm_running="$ctld_pid"
for n in "${LOCAL_SLURM_NODES[@]}"; do
  if [[ -n "$(daemon_pid "$DIR/run/slurmd-$n.pid" slurmd)" ]]; then any_slurm_running=yes; fi
done

if [[ -n "$any_slurm_running" && -s "$CONF" && -s "$PORTS_FILE" ]]; then
  # Daemons already use this config and its ports: rewriting it now would
  # split the cluster between old and new ports.
  log "keeping existing $CONF (daemons running)"
else
  # Fresh ports on every cold start so that a second cluster (another DIR)
  # or any other service never silently shares ours. They are picked below
  # the kernel's ephemeral range (32768+) so outgoing connections (srun,
  # slurmd replies) cannot grab them between now and the daemons binding.
  if [[ "$hosts_apart" == 1 ]]; then
    # Every daemon has an address of its own: Slurm's own ports, as at a site.
    ctld_port=6817 node1_port=6818 node2_port=6818 node3_port=6818
  else
    read -r ctld_port node1_port node2_port node3_port < <(python3 "$here/pick_ports.py" 4 0.0.0.0) || true
    [[ -n "${node3_port:-}" ]] || die "could not pick free ports"
  fi
  cat >"$PORTS_FILE" <<EOF
SlurmctldPort=$ctld_port
node1=$node1_port
node2=$node2_port
node3=$node3_port
EOF
  log "ports: slurmctld=$ctld_port node1=$node1_port node2=$node2_port node3=$node3_port"
  # What accounting changes in slurm.conf; without it, the lines as always.
  acct_storage=accounting_storage/none
  acct_gather=jobacct_gather/none
  if [[ "$accounting" == 1 ]]; then
    accounting_ports
    log "ports: mariadb=$db_port slurmdbd=$dbd_port"
    acct_storage=accounting_storage/slurmdbd
    # jobacct_gather/linux reads /proc: no cgroups needed for sacct's usage.
    acct_gather=jobacct_gather/linux
  fi

  # LOCAL_SLURM_CONSTRAIN_DEVICES=1: task/cgroup with ConstrainDevices, so a
  # task can open only its own GPUs' device files and CUDA_VISIBLE_DEVICES
  # counts them from 0. Off by default: cgroup v1 paths are
  # /sys/fs/cgroup/<controller>/slurm_<node>/uid_<uid>/job_<id>, shared by
  # every cluster on this host (same node names), so two clusters with the
  # same job ids would step on each other's cgroups. A random FirstJobId
  # keeps this cluster's ids apart from the others' (which start at 1).
  # LOCAL_SLURM_CONSTRAIN_MEMORY=1: task/cgroup with ConstrainRAMSpace, so a
  # job gets the memory it asked for (--mem-per-cpu, tfslurm's
  # mem_per_task_mb) as a cgroup limit and the kernel's OOM killer ends a
  # task that goes over it, as on a site's cluster. Off by default for the
  # same reason, and because every test would then run under that limit.
  task_plugin=task/none
  first_job_id=1
  constrain_devices="${LOCAL_SLURM_CONSTRAIN_DEVICES:-0}"
  constrain_memory="${LOCAL_SLURM_CONSTRAIN_MEMORY:-0}"
  if [[ "$constrain_devices" == 1 || "$constrain_memory" == 1 ]]; then
    if [[ "$constrain_devices" == 1 ]]; then
      [[ "$(stat -fc %T /sys/fs/cgroup/devices 2>/dev/null)" == cgroupfs ]] ||
        die "LOCAL_SLURM_CONSTRAIN_DEVICES=1 needs the cgroup v1 devices controller at /sys/fs/cgroup/devices"
    fi
    if [[ "$constrain_memory" == 1 ]]; then
      [[ "$(stat -fc %T /sys/fs/cgroup/memory 2>/dev/null)" == cgroupfs ]] ||
        die "LOCAL_SLURM_CONSTRAIN_MEMORY=1 needs the cgroup v1 memory controller at /sys/fs/cgroup/memory"
    fi
    yes_no() { if [[ "$1" == 1 ]]; then echo yes; else echo no; fi; }
    task_plugin=task/cgroup
    first_job_id=$((1000000 + RANDOM * 100))
    cat >"$DIR/etc/cgroup.conf" <<EOF
# Generated by deploy/local-slurm/start.sh (LOCAL_SLURM_CONSTRAIN_DEVICES=$constrain_devices,
# LOCAL_SLURM_CONSTRAIN_MEMORY=$constrain_memory).
# cgroup v1: this host mounts the v1 controllers (src/plugins/cgroup/v1).
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainDevices=$(yes_no "$constrain_devices")
ConstrainCores=no
ConstrainRAMSpace=$(yes_no "$constrain_memory")
ConstrainSwapSpace=$(yes_no "$constrain_memory")
EOF
  elif release_at_least 24.05; then
    # From 24.05 slurmd loads a cgroup plugin at start unless told not to
    # (CgroupPlugin's default is "autodetect" up to 25.05, "disabled" from
    # 25.11: src/interfaces/cgroup.c at slurm-24-05-8-1 and slurm-25-11-7-1;
    # "disabled" exists from 24.05). Nothing here uses cgroups, and three
    # slurmd on one host would share one cgroup tree.
    cat >"$DIR/etc/cgroup.conf" <<EOF
# Generated by deploy/local-slurm/start.sh: no cgroups (task/none, proctrack/linuxproc).
CgroupPlugin=disabled
EOF
  else
    rm -f "$DIR/etc/cgroup.conf"
  fi

  # From 25.11 slurmctld and slurmd also answer HTTP on their ports, which
  # needs http_parser plugins this cluster has no use for (and 26.05.3 logs
  # "cannot create http_parser context" without them); disable_http turns it
  # off (CommunicationParameters in slurm.conf(5) at slurm-26-05-3-1).
  comm_params=""
  if release_at_least 25.11; then comm_params="CommunicationParameters=disable_http"; fi

  # Empty plugstack so a system /etc/slurm/plugstack.conf (SPANK plugins) is
  # never loaded: the cluster must not depend on /etc/slurm.
  : >"$DIR/etc/plugstack.conf"

  # Where each daemon is: all on this host's loopback, each slurmd on a
  # port of its own; or (--hosts-apart) each on its own host and address,
  # named by the short hostname slurmctld and slurmd find in their UTS
  # namespace (slurmctld compares SlurmctldHost with it).
  declare -A node_where
  if [[ "$hosts_apart" == 1 ]]; then
    ctld_where="ctld($(host_addr ctld))"
    for n in "${LOCAL_SLURM_NODES[@]}"; do
      node_where[$n]="NodeHostname=$(host_fqdn "$n") NodeAddr=$(host_addr "$n")"
    done
  else
    ctld_where="$HOST(127.0.0.1)"
    for n in "${LOCAL_SLURM_NODES[@]}"; do
      port_var="${n}_port"
      node_where[$n]="NodeHostname=$HOST NodeAddr=127.0.0.1 Port=${!port_var}"
    done
  fi

  # A node cut off from everything (tests/integration/test_network_faults.py)
  # is DOWN after SlurmdTimeout of silence: 300 s by default, 30 s when the
  # hosts are apart, where a network can fail. On one host it cannot.
  slurmd_timeout=300
  if [[ "$hosts_apart" == 1 ]]; then slurmd_timeout=30; fi

  cat >"$CONF.tmp" <<EOF
# Generated by deploy/local-slurm/start.sh; rewritten on every cold start.
ClusterName=tfslurm-local
SlurmctldHost=$ctld_where
SlurmctldPort=$ctld_port
# On one host, every node overrides it with Port= (three slurmd share it).
SlurmdPort=$node1_port
SlurmUser=root
SlurmdUser=root
# Users see only their own jobs: a job's name holds its experiment's id, and
# tfslurmd --site refuses to start without it (docs/site-deployment.md).
# LOCAL_SLURM_PRIVATE_DATA= (empty) leaves it out.
${private_data:+PrivateData=$private_data}

# All clients (sbatch, squeue, libslurm via SLURM_CONF) and the daemons talk
# to our own munged. cred_expire also sets how long a requeued (preempted)
# job waits before it may start again (default 120 s: too slow for tests).
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET,cred_expire=30

StateSaveLocation=$DIR/state
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdSpoolDir=$DIR/spool/%n
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$DIR/etc/plugstack.conf
$comm_params
# The node sizes below are fiction (this host has fewer cores); trust them.
SlurmdParameters=config_overrides

# No systemd here: track processes by parent pid. Tasks are bound to nothing
# unless LOCAL_SLURM_CONSTRAIN_DEVICES=1 or LOCAL_SLURM_CONSTRAIN_MEMORY=1 (task/cgroup,
# devices or memory only).
ProctrackType=proctrack/linuxproc
TaskPlugin=$task_plugin
FirstJobId=$first_job_id
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=$acct_gather
AccountingStorageType=$acct_storage
JobCompType=jobcomp/none
# The default /usr/bin/mail is absent; slurmctld logs an error without this.
MailProg=/bin/true

SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# GPUs: gres/gpu with the device files above (gres.conf beside this file).
GresTypes=gpu
# Without a default a job that does not ask for memory gets a whole node's,
# and then no two jobs can share a node. 4 CPUs x 2000 MB = RealMemory.
DefMemPerCPU=2000
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=2,sched_interval=5,batch_sched_delay=1

# Jobs in partition urgent (PriorityTier 10) requeue jobs in debug (1).
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
JobRequeue=1

ReturnToService=2
SlurmdTimeout=$slurmd_timeout
# Keep finished jobs visible to slurm_load_jobs/scontrol for an hour.
MinJobAge=3600
# Short grace between SIGTERM and SIGKILL so signal tests are quick.
KillWait=5
OverTimeLimit=0
InactiveLimit=0

# Features and the partitions psmem and compute let a heterogeneous job put
# its components on different nodes (per-role resources, issue 19): node1 is
# the "bigmem" node, node2 and node3 the "compute" nodes.
NodeName=node1 ${node_where[node1]} CPUs=4 RealMemory=8000 Gres=gpu:$LOCAL_SLURM_GPUS_PER_NODE Features=bigmem State=UNKNOWN
NodeName=node2 ${node_where[node2]} CPUs=4 RealMemory=8000 Gres=gpu:$LOCAL_SLURM_GPUS_PER_NODE Features=compute State=UNKNOWN
NodeName=node3 ${node_where[node3]} CPUs=4 RealMemory=8000 Gres=gpu:$LOCAL_SLURM_GPUS_PER_NODE Features=compute State=UNKNOWN

PartitionName=debug Nodes=node[1-3] Default=YES MaxTime=INFINITE PriorityTier=1 State=UP
PartitionName=urgent Nodes=node[1-3] Default=NO MaxTime=INFINITE PriorityTier=10 PreemptMode=OFF State=UP
PartitionName=psmem Nodes=node1 Default=NO MaxTime=INFINITE PriorityTier=1 State=UP
PartitionName=compute Nodes=node[2-3] Default=NO MaxTime=INFINITE PriorityTier=1 State=UP
EOF
  # slurmd reads gres.conf from slurm.conf's directory. Every node names its
  # own files; without File= Slurm would count GPUs but set no
  # CUDA_VISIBLE_DEVICES (common_gres_set_env in
  # src/plugins/gres/common/gres_common.c, slurm-22-05-8-1, returns early
  # without a device bitmap).
  {
    echo "# Generated by deploy/local-slurm/start.sh with slurm.conf."
    for n in "${LOCAL_SLURM_NODES[@]}"; do
      echo "NodeName=$n Name=gpu File=$DIR/dev/$n/gpu[0-$((LOCAL_SLURM_GPUS_PER_NODE - 1))]"
    done
  } >"$DIR/etc/gres.conf"
  if [[ "$accounting" == 1 ]]; then accounting_slurm_conf >>"$CONF.tmp"; fi
  mv "$CONF.tmp" "$CONF"
fi

{
  echo "# Source this to point Slurm clients at the local cluster in $DIR."
  echo "export SLURM_CONF=$CONF"
  if [[ -n "$prefix" ]]; then echo "export PATH=$prefix/bin:$prefix/sbin:\$PATH"; fi
} >"$DIR/env.sh"

if [[ -n "$containers" ]]; then
  [[ -f "$containers/plugstack.conf" && -f "$containers/oci.conf" && -d "$containers/bin" ]] ||
    die "--containers $containers: not a directory deploy/containers/setup.sh made"
  cp "$containers/plugstack.conf" "$DIR/etc/plugstack.conf"
  cp "$containers/oci.conf" "$DIR/etc/oci.conf"
  export PATH="$containers/bin:$PATH"
  log "containers: $containers (plugstack.conf, oci.conf, PATH)"
fi

# ---------------------------------------------------------- daemons ----
print_logs() {
  local f
  for f in "$DIR/log/munged.log" "$DIR/log/slurmctld.log" "$DIR"/log/slurmd-node*.log "$DIR"/log/*.out; do
    [[ -s "$f" ]] || continue
    printf '==> %s <==\n' "$f" >&2
    tail -n 25 "$f" >&2
  done
}
fail() {
  print_logs
  die "$* (logs above; deploy/local-slurm/stop.sh $DIR cleans up)"
}

# Accounting first: slurmctld registers with slurmdbd at start, and with
# AccountingStorageEnforce=associations it refuses every job of a cluster
# that slurmdbd does not know.
if [[ "$accounting" == 1 ]]; then
  grep -q '^AccountingStorageType=accounting_storage/slurmdbd' "$CONF" ||
    die "$CONF has no accounting (daemons running from a start without --accounting); stop.sh $DIR first"
  accounting_start
  accounting_register
fi

# Slurm daemons daemonize themselves and write their pid files. They also
# kill whatever pid an old pid file names, so stale files are removed first.
if [[ -n "$ctld_pid" ]]; then
  log "slurmctld already running (pid $ctld_pid)"
else
  rm -f "$DIR/run/slurmctld.pid"
  log "starting slurmctld"
  detached on_daemon_host ctld slurmctld -f "$CONF" >>"$DIR/log/slurmctld.out" 2>&1 || fail "slurmctld exited with $?"
fi

for n in "${LOCAL_SLURM_NODES[@]}"; do
  if [[ -n "$(daemon_pid "$DIR/run/slurmd-$n.pid" slurmd)" ]]; then
    log "slurmd $n already running"
    continue
  fi
  rm -f "$DIR/run/slurmd-$n.pid"
  log "starting slurmd $n"
  node_local=()
  if [[ -n "$containers" ]]; then
    # A node's local disk: each slurmd (and every job step it starts) sees
    # DIR/node-local/NODE at /var/tmp/tfslurm-node, where enroot keeps the
    # node's imports (build-runtimes.sh's enroot.conf). The three slurmd
    # share one host; without this their imports would be one directory
    # that two nodes fill at once.
    mkdir -p "$DIR/node-local/$n" /var/tmp/tfslurm-node
    chmod 1777 "$DIR/node-local/$n"
    node_local=(unshare --mount --propagation slave -- sh -c
      'mount --bind "$1" /var/tmp/tfslurm-node && shift && exec "$@"' sh "$DIR/node-local/$n")
  fi
  detached on_daemon_host "$n" "${node_local[@]}" slurmd -N "$n" -f "$CONF" >>"$DIR/log/slurmd-$n.out" 2>&1 ||
    fail "slurmd $n exited with $?"
done

started=$SECONDS

# ------------------------------------------------------------- wait ----
# Ready = slurmctld answers and every node is registered and usable. A node
# already running jobs (second start on a busy cluster) counts as ready too.
deadline=$((SECONDS + DEADLINE_SECONDS))
while :; do
  states="$(client sinfo -h -N -p debug -o '%N %T' 2>/dev/null || true)"
  ready=0
  while read -r _ state; do
    case "$state" in
      idle | mixed | allocated | completing) ready=$((ready + 1)) ;;
    esac
  done <<<"$states"
  ((ready == ${#LOCAL_SLURM_NODES[@]})) && break
  if ((SECONDS >= deadline)); then
    printf 'sinfo:\n%s\n' "$states" >&2
    fail "nodes not ready after ${DEADLINE_SECONDS}s"
  fi
  # A daemon that died will never become ready: fail now, not at the
  # deadline. Slurm daemons write their pid file right after forking, so
  # only a missing file older than a couple of seconds means death.
  if ((SECONDS >= started + 3)); then
    [[ -n "$(daemon_pid "$DIR/run/slurmctld.pid" slurmctld)" ]] || fail "slurmctld is not running (died or never started)"
    for n in "${LOCAL_SLURM_NODES[@]}"; do
      [[ -n "$(daemon_pid "$DIR/run/slurmd-$n.pid" slurmd)" ]] || fail "slurmd $n is not running (died or never started)"
    done
  fi
  sleep 0.5
done
log "cluster ready in $DIR: $(tr '\n' ' ' <<<"$states")"

printf 'SLURM_CONF=%s\n' "$CONF" >&3
