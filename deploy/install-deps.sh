#!/usr/bin/env bash
# Installs every Debian package tfslurm needs to build, test and run a local
# Slurm cluster. Idempotent: packages already present are skipped, so a second
# run costs one dpkg query.
#
#   deploy/install-deps.sh            build + runtime + local Slurm
#   deploy/install-deps.sh --browser  also Chromium and Node.js (dashboard tests)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config clang-format clang libclang-rt-14-dev
  ccache  # tests/lib/ccache.sh: the compat stage's second build of tfslurmd reuses the first's
  nlohmann-json3-dev libsqlite3-dev sqlite3 libspdlog-dev libfmt-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libcli11-dev libyaml-cpp-dev libgtest-dev libgmock-dev libssl-dev zlib1g-dev prometheus-cpp-dev
  libboost-dev  # header-only Boost.CRC: the agent's CRC32C of TensorBoard event files
  libgoogle-perftools-dev  # tcmalloc_minimal, tfslurmd's allocator (CMakeLists.txt says why)
  libslurm-dev slurm-wlm slurmctld slurmd slurm-client munge
  # Accounting for the local cluster (start.sh --accounting): slurmdbd and
  # the MariaDB server it stores into.
  slurmdbd mariadb-server mariadb-client
  libmunge-dev  # tfctl proves its Unix user to tfslurmd with a MUNGE credential
  libsystemd-dev  # sd_notify: tfslurmd tells systemd (Type=notify) when it listens
  # Building other Slurm releases from source (deploy/local-slurm/build-slurm.sh):
  # slurmdbd's accounting_storage/mysql plugin needs MariaDB's client library.
  libmariadb-dev xz-utils
  # Slurm's serializer/json plugin (build-slurm.sh --with-json): slurmstepd
  # reads an OCI bundle's config.json through it (srun --container).
  libjson-c-dev
  python3 python3-numpy python3-pytest python3-venv curl procps iproute2 jq
  # The hosts-apart cluster's network faults (tests/integration/helpers/
  # netfault.py: nftables drops, iptables' NFQUEUE delay where the kernel
  # has no netem) and the record of its traffic (helpers/capture.py).
  nftables iptables tcpdump
  # PyTorch for examples/ddp and its tests: Debian's 1.13 has gloo and
  # torch.distributed (the README's PyTorch section says why not a PyPI wheel).
  python3-torch
)
if [[ "${1:-}" == "--browser" ]]; then
  packages+=(chromium nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # The slurm and mariadb-server packages start their daemons from postinst
  # through invoke-rc.d when policy-rc.d allows it; the project runs its own
  # daemons under a private directory instead, and a container has no init
  # to start them with. Exit status 101 of /usr/sbin/policy-rc.d is "action
  # forbidden" (invoke-rc.d(8), README.policy-rc.d of sysv-rc), so postinst
  # skips the start; the file is removed again unless it was there before.
  policy_added=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod 0755 /usr/sbin/policy-rc.d
    policy_added=1
  fi
  status=0
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" || status=$?
  if [[ -n "$policy_added" ]]; then $SUDO rm -f /usr/sbin/policy-rc.d; fi
  ((status == 0)) || exit "$status"
else
  echo "install-deps: all ${#packages[@]} packages present"
fi
