# The machine conditions some tests need, checked at the start of
# tests/run.sh. A machine without one makes those tests skip; the run says so
# at its start and in its summary, and tests/skip_allowlist.txt allows the
# skip only under the condition it names, only when this check finds it
# missing (tests/lib/skips.sh). Each check tests what the test itself tests.
# shellcheck shell=bash

machine_conditions=(ipv6-loopback cgroup-v1-devices cgroup-v1-memory root)

# Plain shell, no python: this runs before deploy/install-deps.sh.
# tests/agent/port_reservation_test.cc binds an AF_INET6 socket (TF's gRPC
# server binds [::]:port) and skips on EAFNOSUPPORT: the kernel has IPv6
# when it lists its addresses, and loopback has one.
condition_ipv6_loopback() { grep -qs ' lo$' /proc/net/if_inet6; }
# tests/integration/test_gpu_binding.py's cgroup_v1_devices(): Slurm's
# task/cgroup constrains devices through cgroup v1's devices controller only.
condition_cgroup_v1_devices() { [[ -d /sys/fs/cgroup/devices ]] && mountpoint -q /sys/fs/cgroup/devices; }
# tests/integration/test_own_program.py's cgroup_v1_memory(): the local
# cluster's task/cgroup constrains memory through cgroup v1 (cgroup/v1).
condition_cgroup_v1_memory() { [[ -d /sys/fs/cgroup/memory ]] && mountpoint -q /sys/fs/cgroup/memory; }
# tests/unit/local_files_test.cc acts as other accounts (setfsuid).
condition_root() { [[ $(id -u) -eq 0 ]]; }

condition_what() {
  case "$1" in
    ipv6-loopback) echo "IPv6 on loopback (port_reservation_test: how TF's gRPC server binds its port)" ;;
    cgroup-v1-devices) echo "cgroup v1 devices controller (test_gpu_binding.py: ConstrainDevices)" ;;
    cgroup-v1-memory) echo "cgroup v1 memory controller (test_own_program.py: ConstrainRAMSpace, an OOM kill)" ;;
    root) echo "running as root (local_files_test: acting as another account)" ;;
  esac
}

# Checks every condition, prints one line each, and sets MISSING_CONDITIONS
# to the names of those this machine lacks.
check_machine_conditions() {
  local c
  MISSING_CONDITIONS=()
  for c in "${machine_conditions[@]}"; do
    if "condition_${c//-/_}"; then
      printf '  %-18s present   %s\n' "$c" "$(condition_what "$c")"
    else
      MISSING_CONDITIONS+=("$c")
      printf '  %-18s MISSING   %s\n' "$c" "$(condition_what "$c")"
    fi
  done
  if ((${#MISSING_CONDITIONS[@]})); then
    printf '\n!!! This machine lacks: %s.\n' "${MISSING_CONDITIONS[*]}"
    printf '!!! The tests that need it will skip, and this run does NOT test what they test\n'
    printf '!!! (tests/skip_allowlist.txt names them). Run on a machine that has it to test everything.\n'
  fi
}
