# Sourced by tests/packages.sh: the packages in a Debian 12 system container
# on the local Slurm cluster. Uses tests/packages.sh's ok/bad, $this and
# $prev (the package directories), $tree (the Debian 12 tree), $work and the
# container helpers.
# shellcheck shell=bash

# The compute nodes of the local cluster are this machine's slurmd
# processes: their tfslurm-agent is the package's, unpacked at $nodes, and
# replaced at the upgrade as the package would be on a node (a new file, by
# rename: the running agents keep theirs).
install_agent() {
  local from="$1" tmp="$work/agent-unpack"
  rm -rf "$tmp" && dpkg-deb -x "$from"/tfslurm-agent_*.deb "$tmp" &&
    mkdir -p "$nodes/usr/bin" && mv -f "$tmp/usr/bin/tfslurm-agent" "$nodes/usr/bin/tfslurm-agent"
}

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# tfctl in the container, at the URL of the service as its settings in force
# say (service_url): https with the settings' CA when tls-cert is set.
url="" cacert=""
tfctl_ct() { ct env TFSLURM_URL="$url" TFSLURM_CACERT="$cacert" TFSLURM_TOKEN="$token" tfctl "$@"; }
service_url() {
  local settings
  settings="$(ct tfslurmd --print-config 2>/dev/null)"
  cacert="$(sed -n 's/^tls-ca = "\(\/[^"]*\)".*/\1/p' <<<"$settings")"
  if grep -q '^tls-cert = "/' <<<"$settings"; then
    url="https://127.0.0.1:$http_port"
  else
    url="http://127.0.0.1:$http_port" cacert=""
  fi
}
state_of() { tfctl_ct status "$1" -o json 2>/dev/null | jq -r .state; }
# wait_state ID SECONDS STATE...: until the experiment is in one of STATEs.
wait_state() {
  local id="$1" deadline=$((SECONDS + $2)) s=""
  shift 2
  while ((SECONDS < deadline)); do
    s="$(state_of "$id")"
    for want in "$@"; do [[ $s == "$want" ]] && return 0; done
    sleep 1
  done
  echo "experiment $id: state '$s' after the wait, not $*" >&2
  return 1
}
unit() { ct systemctl show tfslurmd -p "$1" --value; }
wait_active() { # SECONDS: until tfslurmd.service is active again
  local deadline=$((SECONDS + $1))
  until [[ $(unit ActiveState) == active ]]; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}
db=/var/lib/tfslurm/tfslurm.db
sql() { ct runuser -u tfslurm -- sqlite3 "$db" "$1"; }

# The packages installed with systemd running, the settings file pointed at
# the local cluster, `systemctl start`, an experiment to COMPLETED.
system_install() {
  ct groupadd --system --gid "$(id -g tfslurm)" tfslurm &&
    ct useradd --system --uid "$(id -u tfslurm)" --gid "$(id -g tfslurm)" --home-dir /var/lib/tfslurm \
      --no-create-home --shell /usr/sbin/nologin tfslurm || return 1
  # Not started by the install: its settings are not written yet (a site
  # installs, edits one file, starts). policy-rc.d's 101 is "forbidden".
  ct sh -c 'printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
  ct dpkg -i $(debs_of "$prev") >"$work/install.log" 2>&1 || { cat "$work/install.log"; return 1; }
  ct rm -f /usr/sbin/policy-rc.d
  write_settings || return 1
  ct systemctl daemon-reload && ct systemctl start tfslurmd || {
    ct journalctl -u tfslurmd --no-pager | tail -n 20
    return 1
  }
  service_url
  token="$(ct runuser -u tfslurm -- tfslurmd token create --user tester --admin 2>/dev/null)"
  [[ $token == tfs_* ]] || { echo "no token: '$token'" >&2; return 1; }
}

# The one file a site edits: each setting replaced where the packaged file
# has it (commented out or not), or added; checked with --print-config.
write_settings() {
  local key value
  while read -r key value; do
    if ct grep -q "^#\?$key = " /etc/tfslurm/tfslurmd.conf </dev/null; then
      ct sed -i "s|^#\?$key = .*|$key = \"$value\"|" /etc/tfslurm/tfslurmd.conf </dev/null
    else
      echo "$key = \"$value\"" | ct tee -a /etc/tfslurm/tfslurmd.conf >/dev/null
    fi
  done <<SETTINGS
slurm-conf $slurm_conf
listen 127.0.0.1:$http_port
agent-listen 127.0.0.1:$agent_port
output-root $out
agent-path $nodes/usr/bin/tfslurm-agent
SETTINGS
  ct tfslurmd --print-config >"$work/print-config.txt" || return 1
  grep -q "^listen = \"127.0.0.1:$http_port\" *# /etc/tfslurm/tfslurmd.conf" "$work/print-config.txt" || {
    cat "$work/print-config.txt"
    return 1
  }
}

# The container helpers of the agent's package: the bundle its postinst made
# from the tree's libraries runs on them and its own loader; a library
# package's change (the ldconfig trigger) makes it again; the launcher
# answers; and the packaged tfslurmd's default --container-agent-dir is that
# bundle (its start line says it).
system_container_helpers() {
  local bundle=/var/lib/tfslurm-agent/agent-bundle launcher=/usr/libexec/tfslurm/tfslurm-container-launch
  bundle_runs() {
    ct "$bundle/loader" --library-path "$bundle/lib" "$bundle/tfslurm-agent" --help >/dev/null
  }
  bundle_runs || { echo "the postinst's $bundle does not run" >&2; return 1; }
  ct rm "$bundle/lib/libssl.so.3"
  ct sh -c 'dpkg-trigger --no-await ldconfig && dpkg --triggers-only --pending' >/dev/null
  bundle_runs || { echo "the ldconfig trigger did not make $bundle again" >&2; return 1; }
  local usage
  usage="$(ct "$launcher" 2>&1)" # exits 2, a usage error
  grep -q "usage: tfslurm-container-launch" <<<"$usage" ||
    { echo "$launcher printed no usage: $usage" >&2; return 1; }
  ct journalctl -u tfslurmd --no-pager | grep -q "(in containers: $bundle)" ||
    { ct journalctl -u tfslurmd --no-pager | grep "output root" >&2; return 1; }
}

system_first_experiment() {
  tfctl_ct submit --id first --workers 2 --workdir /tmp --wait -- \
    /bin/sh -c 'echo "hello from $TFSLURM_ROLE $TFSLURM_INDEX as $(id -un)"' >"$work/first.log" 2>&1 ||
    { cat "$work/first.log"; return 1; }
  # tfctl's --wait ends when tfslurmd says COMPLETED, as the agents report
  # their programs' ends; slurmctld shows the job COMPLETING until its
  # steps and epilog are done (job_state_string puts the flag first).
  local deadline=$((SECONDS + 30))
  until scontrol -o show job 2>/dev/null | grep "JobName=tfx-first-a1 " | grep -q "JobState=COMPLETED"; do
    if ((SECONDS >= deadline)); then
      echo "slurmctld has no COMPLETED job tfx-first-a1 30 s after tfctl's: $(scontrol -o show job 2>&1 | grep -o 'JobName=tfx-first-a1 .*JobState=[A-Z_]*' | sed 's/ .*JobState=/ JobState=/')" >&2
      return 1
    fi
    sleep 0.5
  done
  tfctl_ct logs first --task worker:0 | grep -q "hello from worker 0 as tfslurm"
}

# A running experiment and a stored spec, then the upgrade to this commit.
system_upgrade_under_load() {
  tfctl_ct submit --id long --workers 2 --workdir /tmp -- /bin/sh -c \
    'for i in $(seq 1 40); do echo "step $i"; sleep 0.5; done; touch "$MODEL_DIR/done-$TFSLURM_INDEX"' \
    >/dev/null || return 1
  tfctl_ct submit --id kept --workers 1 --workdir /tmp --env WHO=kept --time 00:05:00 -- /bin/true >/dev/null ||
    return 1
  wait_state long 60 running || return 1
  local before after
  before="$(tfctl_ct status kept -o json | jq -S .spec)"
  install_agent "$this"
  local started=$SECONDS
  # As an unattended upgrade does: the site's edited settings file is kept
  # (a packaged file that changed beside it is left as .dpkg-dist).
  ct dpkg -i --force-confdef --force-confold $(debs_of "$this") >"$work/upgrade.log" 2>&1 ||
    { cat "$work/upgrade.log"; return 1; }
  [[ $(ct dpkg-query -W -f='${Version}' tfslurmd) == "$this_version" ]] || return 1
  [[ $(unit ActiveState) == active ]] || { echo "tfslurmd is $(unit ActiveState) after the upgrade" >&2; return 1; }
  echo "packages: upgraded to $this_version in $((SECONDS - started)) s, tfslurmd restarted"
  service_url
  wait_state long 120 succeeded || return 1
  local attempts
  attempts="$(tfctl_ct status long -o json | jq '.attempts | length')"
  [[ $attempts == 1 && -e $out/long/done-0 && -e $out/long/done-1 ]] || {
    echo "long: $attempts attempts, done files: $(ls "$out/long")" >&2
    return 1
  }
  after="$(tfctl_ct status kept -o json | jq -S .spec)"
  [[ -n $before && $before != null && $before == "$after" ]] || {
    diff <(echo "$before") <(echo "$after") >&2
    return 1
  }
}

# Writes (submissions from 3 clients) while tfslurmd is killed -9 twice and
# restarted by systemd, and online backups meanwhile: each copy passes
# PRAGMA integrity_check.
system_backup_under_chaos() {
  local restarts_before copies=0 good=0
  restarts_before="$(unit NRestarts)"
  (
    for c in 1 2 3; do
      (for i in $(seq 1 8); do
        tfctl_ct submit --id "soak-$c-$i" --workers 1 --workdir /tmp -- /bin/true >/dev/null 2>&1 || sleep 1
      done) &
    done
    wait
  ) &
  local writers=$!
  for round in 1 2 3 4 5 6; do
    if ((round == 2 || round == 4)); then
      # Killed while it runs (not while systemd waits RestartSec to start it).
      wait_active 30 && ct systemctl kill -s KILL tfslurmd
    fi
    if ct tfslurmd backup --to "/root/copy-$round.db" >/dev/null 2>"$work/backup-$round.err"; then
      copies=$((copies + 1))
      [[ $(ct sqlite3 "/root/copy-$round.db" "PRAGMA integrity_check") == ok ]] && good=$((good + 1))
    else
      cat "$work/backup-$round.err" >&2
    fi
    sleep 2
  done
  wait "$writers"
  wait_active 30
  local restarts
  restarts=$(($(unit NRestarts) - restarts_before))
  echo "packages: $copies backups while writing, $good passed integrity_check; systemd restarted tfslurmd $restarts times"
  ((copies == 6 && good == 6 && restarts >= 2)) && [[ $(unit ActiveState) == active ]]
}

system_second_start_refused() {
  local err rc=0
  err="$(ct runuser -u tfslurm -- tfslurmd 2>&1)" || rc=$?
  [[ $rc == 3 && $err == *"pid $(unit MainPID) "* ]] || {
    echo "second tfslurmd: exit $rc, '$err'" >&2
    return 1
  }
}

# A migration that fails, and a downgrade: refused, the database left as
# it was, the service stopped (not restarted) with the reason in the journal.
system_refused_start() { # USER_VERSION GREP_REASON
  local latest restarts
  latest="$(sql 'PRAGMA user_version')"
  ct systemctl stop tfslurmd
  sql "PRAGMA user_version=$1" || return 1
  local since
  since="$(ct date '+%Y-%m-%d %H:%M:%S')"
  if ct systemctl start tfslurmd 2>/dev/null; then echo "tfslurmd started on user_version $1" >&2; return 1; fi
  sleep 7 # past RestartSec: a restart would have begun
  local state status version journal
  state="$(unit ActiveState)" status="$(unit ExecMainStatus)" version="$(sql 'PRAGMA user_version')"
  # A start by hand sets NRestarts to 0; only systemd's own restarts count.
  restarts="$(unit NRestarts)"
  journal="$(ct journalctl -u tfslurmd --since "$since" --no-pager)"
  sql "PRAGMA user_version=$latest"
  ct systemctl reset-failed tfslurmd
  ct systemctl start tfslurmd || return 1
  [[ $state == failed && $status == 3 && $version == "$1" && $restarts == 0 ]] &&
    grep -q "$2" <<<"$journal" || {
    echo "on user_version $1: state $state, exit $status, user_version $version, $restarts restarts; journal:" >&2
    tail -n 8 <<<"$journal" >&2
    return 1
  }
}

system_purge() {
  local err
  err="$(ct dpkg --purge tfslurmd 2>&1)" || { echo "$err" >&2; return 1; }
  ct test -e "$db" && ! ct test -e /etc/tfslurm/tfslurmd.conf && ! ct test -e /etc/tfslurm/tls &&
    grep -q "/var/lib/tfslurm is kept" <<<"$err"
}

# A first installation of this commit's packages (after the purge: no
# settings, no TLS files; the database kept): the postinst makes the CA and
# the server certificate the packaged settings name, the keys 0600 and
# tfslurm's; the service starts serving TLS, and refuses plaintext.
system_tls_install() {
  local since
  since="$(ct date '+%Y-%m-%d %H:%M:%S')"
  ct sh -c 'printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
  ct dpkg -i $(debs_of "$this") >"$work/install-tls.log" 2>&1 || { cat "$work/install-tls.log"; return 1; }
  ct rm -f /usr/sbin/policy-rc.d
  local modes
  modes="$(ct stat -c '%n %a %U' /etc/tfslurm/tls/ca.key /etc/tfslurm/tls/server.key \
    /etc/tfslurm/tls/server.pem /etc/tfslurm/tls/ca.pem | tr '\n' ' ')"
  [[ $modes == "/etc/tfslurm/tls/ca.key 600 tfslurm /etc/tfslurm/tls/server.key 600 tfslurm "* &&
    $modes == *"server.pem 644 root /etc/tfslurm/tls/ca.pem 644 root "* ]] || {
    echo "the TLS files after a first installation: '$modes'" >&2
    cat "$work/install-tls.log" >&2
    return 1
  }
  # daemon-reload: the generator's drop-in lets the sandbox write output-root.
  write_settings && ct systemctl daemon-reload && ct systemctl start tfslurmd || {
    ct journalctl -u tfslurmd --no-pager | tail -n 20
    return 1
  }
  service_url
  [[ $url == https://* && $cacert == /etc/tfslurm/tls/ca.pem ]] || {
    echo "the packaged settings do not serve TLS: url '$url', CA '$cacert'" >&2
    return 1
  }
  ct journalctl -u tfslurmd --since "$since" --no-pager | grep -q "TLS on both ports" || return 1
  # Plaintext to the REST port gets no answer from the API.
  if ct env TFSLURM_URL="http://127.0.0.1:$http_port" TFSLURM_TOKEN="$token" tfctl list >/dev/null 2>&1; then
    echo "tfslurmd answered plaintext" >&2
    return 1
  fi
}

# An experiment to COMPLETED over TLS: tfctl verifies the service against
# the package's CA, and the jobs' agents (the packaged agent, on the nodes)
# against the CA every job carries, before they register. Then a
# certificate rotation: `systemctl reload` (SIGHUP) reads the files again.
system_tls_experiment() {
  tfctl_ct submit --id tls --workers 2 --workdir /tmp --wait -- \
    /bin/sh -c 'echo "over TLS: $TFSLURM_ROLE $TFSLURM_INDEX"' >"$work/tls.log" 2>&1 ||
    { cat "$work/tls.log"; return 1; }
  scontrol -o show job 2>/dev/null | grep "JobName=tfx-tls-a1 " | grep -q "JobState=COMPLETED" || {
    echo "slurmctld has no COMPLETED job tfx-tls-a1" >&2
    return 1
  }
  tfctl_ct logs tls --task worker:1 | grep -q "over TLS: worker 1" || return 1
  local since
  since="$(ct date '+%Y-%m-%d %H:%M:%S')"
  ct tfslurmd tls init --dir /etc/tfslurm/tls --user tfslurm >/dev/null &&
    ct systemctl reload tfslurmd || return 1
  local deadline=$((SECONDS + 20))
  until ct journalctl -u tfslurmd --since "$since" --no-pager | grep -q "SIGHUP: TLS certificate reloaded"; do
    ((SECONDS < deadline)) || { echo "no reload in the journal after systemctl reload" >&2; return 1; }
    sleep 0.5
  done
  tfctl_ct status tls -o json | jq -e '.state == "succeeded"' >/dev/null
}

run_system_test() {
  local started=$SECONDS
  getent passwd tfslurm >/dev/null ||
    useradd --system --user-group --home-dir /var/lib/tfslurm --no-create-home --shell /usr/sbin/nologin tfslurm
  cluster="$work/c"
  mkdir -p "$cluster"
  local conf_line
  # Every host on this machine's network, as the container shares it.
  if ! conf_line="$(LOCAL_SLURM_HOSTS_APART=0 deploy/local-slurm/start.sh "$cluster")"; then
    bad container "the local Slurm cluster did not start"
    return
  fi
  slurm_conf="${conf_line#SLURM_CONF=}"
  export SLURM_CONF="$slurm_conf"
  out="$work/out" nodes="$work/nodes"
  install -d -o tfslurm -g tfslurm -m 755 "$out"
  install_agent "$prev"
  http_port="$(free_port)" agent_port="$(free_port)"
  if ! ct_boot "$tree" "tfspkg$$" "$work" "$this" "$prev"; then
    bad container "the system container did not boot"
    return
  fi
  ct systemctl mask --now munge.service >/dev/null 2>&1 # the cluster's munged serves it
  echo "packages: the cluster and the container up in $((SECONDS - started)) s"
  local check
  for check in install first_experiment upgrade_under_load container_helpers backup_under_chaos second_start_refused; do
    if "system_$check"; then ok "$check"; else bad "$check" "see above"; fi
  done
  local latest
  latest="$(sql 'PRAGMA user_version')"
  if system_refused_start "$((latest - 1))" "migration .* failed: .* is unchanged, at schema version $((latest - 1))"; then
    ok failed_migration
  else
    bad failed_migration "see above"
  fi
  if system_refused_start "$((latest + 1))" "has schema version $((latest + 1)), newer than this tfslurmd"; then
    ok downgrade_refused
  else
    bad downgrade_refused "see above"
  fi
  if system_purge; then ok purge "database kept, settings removed"; else bad purge "see above"; fi
  for check in tls_install tls_experiment; do
    if "system_$check"; then ok "$check"; else bad "$check" "see above"; fi
  done
  if system_purge; then ok tls_purge "database kept, settings and TLS files removed"; else bad tls_purge "see above"; fi
  echo "packages: the container checks took $((SECONDS - started)) s"
  ct_stop
}
