# Accounting for the local cluster (start.sh --accounting DIR): MariaDB and
# slurmdbd under DIR, and the cluster's accounts, QOS and root's association.
# Sourced by start.sh (after common.sh and hosts_apart.sh, with DIR, HOST,
# CONF, MUNGE_SOCKET and PORTS_FILE set, and its on_daemon_host, client and
# hosts_apart) and by stop.sh; never executed. With the hosts apart, MariaDB
# and slurmdbd run on the ctld host, MariaDB on its loopback.
# shellcheck shell=bash

# What start.sh --accounting registers. Tests and the README name them.
# shellcheck disable=SC2034 # used by the scripts that source this file
LOCAL_SLURM_ACCOUNTS=(tfs-research tfs-other)
# shellcheck disable=SC2034
LOCAL_SLURM_QOS=(tfs-high tfs-low)

ACCT_DB_DIR="$DIR/mariadb"
ACCT_DB_SOCKET="$ACCT_DB_DIR/mariadbd.sock"
ACCT_DB_PID="$ACCT_DB_DIR/mariadbd.pid"
ACCT_DBD_PID="$DIR/run/slurmdbd.pid"
ACCT_PORTS_FILE="$DIR/etc/accounting-ports"

# accounting_ports: picks MariaDB's and slurmdbd's TCP ports once per cold
# start, as start.sh picks Slurm's (below 32768, bound while choosing, and
# none of the ports in PORTS_FILE), into ACCT_PORTS_FILE; sets db_port and
# dbd_port.
accounting_ports() {
  if [[ "${hosts_apart:-0}" == 1 ]]; then
    db_port=3306 dbd_port=6819 # their own host: the usual ports
  else
    read -r db_port dbd_port < <(python3 "$here/pick_ports.py" 2 127.0.0.1 "$PORTS_FILE") || true
  fi
  [[ -n "${dbd_port:-}" ]] || die "could not pick ports for MariaDB and slurmdbd"
  printf 'MariaDB=%s\nSlurmdbd=%s\n' "$db_port" "$dbd_port" >"$ACCT_PORTS_FILE"
}

# accounting_read_ports: sets db_port and dbd_port from ACCT_PORTS_FILE.
accounting_read_ports() {
  db_port="$(sed -n 's/^MariaDB=//p' "$ACCT_PORTS_FILE" 2>/dev/null)"
  dbd_port="$(sed -n 's/^Slurmdbd=//p' "$ACCT_PORTS_FILE" 2>/dev/null)"
  [[ -n "$db_port" && -n "$dbd_port" ]] || die "no accounting ports in $ACCT_PORTS_FILE"
}

# accounting_slurm_conf: the lines slurm.conf gets besides
# AccountingStorageType and JobAcctGatherType.
accounting_slurm_conf() {
  cat <<EOF
# Accounting (start.sh --accounting): slurmdbd under $DIR, MariaDB behind it.
# Enforce associations, their limits and QOS, as sites do: a job needs an
# account the user is associated with, and a QOS the association allows.
AccountingStorageHost=$(dbd_addr)
AccountingStoragePort=$dbd_port
# For slurmdbd connections this is the munged socket (slurm.conf(5)):
# without it slurmctld and sacctmgr would look for the system's.
AccountingStoragePass=$MUNGE_SOCKET
AccountingStorageEnforce=associations,limits,qos
JobAcctGatherFrequency=30
EOF
}

# Where slurmdbd listens and what it calls its host: this host's loopback,
# or the ctld host's address and short name when the hosts are apart.
dbd_addr() { if [[ "${hosts_apart:-0}" == 1 ]]; then host_addr ctld; else echo 127.0.0.1; fi; }
dbd_host() { if [[ "${hosts_apart:-0}" == 1 ]]; then echo ctld; else echo "$HOST"; fi; }

db() { mariadb --no-defaults --socket="$ACCT_DB_SOCKET" -u root "$@"; }

# accounting_start: MariaDB (own datadir, socket and pid under DIR; TCP on
# 127.0.0.1:db_port only, for slurmdbd, which connects by host and port:
# mysql_real_connect with no socket, src/database/mysql_common.c,
# slurm-22-05-8-1), then slurmdbd. Both run as root. Idempotent.
accounting_start() {
  local need pass pid deadline
  for need in mariadbd mariadb-install-db mariadb mariadb-admin slurmdbd sacctmgr; do
    command -v "$need" >/dev/null || die "$need not found; run deploy/install-deps.sh"
  done
  accounting_read_ports
  mkdir -p "$ACCT_DB_DIR"
  chmod 0700 "$ACCT_DB_DIR"
  if [[ ! -d "$ACCT_DB_DIR/data/mysql" ]]; then
    log "initialising MariaDB in $ACCT_DB_DIR/data"
    rm -rf "$ACCT_DB_DIR/data"
    mariadb-install-db --no-defaults --user=root --datadir="$ACCT_DB_DIR/data" \
      --auth-root-authentication-method=socket --skip-test-db \
      >>"$DIR/log/mariadb-install.out" 2>&1 || {
      tail -n 20 "$DIR/log/mariadb-install.out" >&2
      die "mariadb-install-db failed"
    }
  fi
  if [[ -n "$(daemon_pid "$ACCT_DB_PID" mariadbd)" ]]; then
    log "mariadbd already running"
  else
    rm -f "$ACCT_DB_PID" "$ACCT_DB_SOCKET"
    log "starting mariadbd (127.0.0.1:$db_port)"
    # mariadbd stays in the foreground: setsid --fork runs it in a session
    # of its own and returns at once, so it outlives this script and its
    # caller's terminal, and holds none of the caller's pipes (detached).
    detached on_daemon_host ctld setsid --fork mariadbd --no-defaults --user=root --datadir="$ACCT_DB_DIR/data" \
      --socket="$ACCT_DB_SOCKET" --pid-file="$ACCT_DB_PID" \
      --bind-address=127.0.0.1 --port="$db_port" --skip-name-resolve \
      --log-error="$DIR/log/mariadb.log" --innodb-buffer-pool-size=64M \
      --innodb-lock-wait-timeout=900 >>"$DIR/log/mariadb.out" 2>&1
    deadline=$((SECONDS + 60))
    until mariadb-admin --no-defaults --socket="$ACCT_DB_SOCKET" -u root ping >/dev/null 2>&1; do
      if ((SECONDS >= deadline)); then
        tail -n 20 "$DIR/log/mariadb.log" >&2 || true
        die "mariadbd not answering on $ACCT_DB_SOCKET after 60s"
      fi
      sleep 0.3
    done
  fi

  # slurmdbd's database user; its password lives in slurmdbd.conf (0600).
  if [[ ! -s "$ACCT_DB_DIR/slurm.pass" ]]; then
    (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$ACCT_DB_DIR/slurm.pass")
  fi
  pass="$(cat "$ACCT_DB_DIR/slurm.pass")"
  db -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
         ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
         GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" ||
    die "could not create slurmdbd's database user"

  # slurmdbd reads slurmdbd.conf beside SLURM_CONF (get_extra_conf_path) and
  # refuses one not 0600 or not owned by its SlurmUser (read_config.c).
  (
    umask 077
    cat >"$DIR/etc/slurmdbd.conf.tmp" <<EOF
# Generated by deploy/local-slurm/start.sh --accounting.
DbdHost=$(dbd_host)
DbdAddr=$(dbd_addr)
DbdPort=$dbd_port
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
PidFile=$ACCT_DBD_PID
LogFile=$DIR/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=$pass
StorageLoc=slurm_acct_db
EOF
  )
  chmod 0600 "$DIR/etc/slurmdbd.conf.tmp"
  mv "$DIR/etc/slurmdbd.conf.tmp" "$DIR/etc/slurmdbd.conf"

  pid="$(daemon_pid "$ACCT_DBD_PID" slurmdbd)"
  if [[ -n "$pid" ]]; then
    log "slurmdbd already running (pid $pid)"
  else
    rm -f "$ACCT_DBD_PID"
    log "starting slurmdbd ($(dbd_addr):$dbd_port)"
    detached on_daemon_host ctld slurmdbd >>"$DIR/log/slurmdbd.out" 2>&1 || {
      tail -n 20 "$DIR/log/slurmdbd.log" >&2 || true
      die "slurmdbd exited with $?"
    }
  fi
  # Ready when it answers sacctmgr (it creates its tables on first start).
  # It writes its pid file right after forking: a file still missing after
  # a few seconds means it died.
  local started=$SECONDS
  deadline=$((SECONDS + 60))
  until client sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      tail -n 20 "$DIR/log/slurmdbd.log" >&2 || true
      die "slurmdbd not answering sacctmgr after 60s"
    fi
    if ((SECONDS >= started + 3)) && [[ -z "$(daemon_pid "$ACCT_DBD_PID" slurmdbd)" ]]; then
      tail -n 20 "$DIR/log/slurmdbd.log" >&2 || true
      die "slurmdbd is not running (died or never started)"
    fi
    sleep 0.3
  done
}

# accounting_register: the cluster, the accounts and QOS, and root's
# association with tfs-research (QOS normal and tfs-high; tfs-low exists but
# is not allowed to it). Before slurmctld starts, so it finds its cluster
# registered and loads the associations. sacctmgr -i: no prompt; adding what
# exists already is a no-op.
accounting_register() {
  local cluster
  cluster="$(sed -n 's/^ClusterName=//p' "$CONF")"
  if [[ -z "$(client sacctmgr -n -P list cluster "$cluster" format=cluster 2>/dev/null)" ]]; then
    client sacctmgr -i add cluster "$cluster" >&2 || die "sacctmgr add cluster $cluster failed"
  fi
  for q in "${LOCAL_SLURM_QOS[@]}"; do
    if [[ -z "$(client sacctmgr -n -P list qos "$q" format=name 2>/dev/null)" ]]; then
      client sacctmgr -i add qos "$q" >&2 || die "sacctmgr add qos $q failed"
    fi
  done
  for a in "${LOCAL_SLURM_ACCOUNTS[@]}"; do
    if [[ -z "$(client sacctmgr -n -P list account "$a" format=account 2>/dev/null)" ]]; then
      client sacctmgr -i add account "$a" cluster="$cluster" description="tfslurm test account" \
        organization=tfslurm >&2 || die "sacctmgr add account $a failed"
    fi
  done
  # Users added to an account later (tests' helper) inherit its QOS list.
  client sacctmgr -i modify account where name=tfs-research cluster="$cluster" \
    set qos=normal,tfs-high >&2 || true
  if [[ -z "$(client sacctmgr -n -P list assoc user=root account=tfs-research format=user 2>/dev/null)" ]]; then
    client sacctmgr -i add user root account=tfs-research cluster="$cluster" >&2 ||
      die "sacctmgr add user root account=tfs-research failed"
  fi
}

# accounting_stop: slurmdbd, then MariaDB (stop.sh, after slurmctld).
accounting_stop() {
  local p
  p="$(daemon_pid "$ACCT_DBD_PID" slurmdbd)"
  stop_pids slurmdbd ${p:+"$p"}
  p="$(daemon_pid "$ACCT_DB_PID" mariadbd)"
  stop_pids mariadbd ${p:+"$p"}
  rm -f "$ACCT_DBD_PID"
}
