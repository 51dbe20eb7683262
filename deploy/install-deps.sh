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
  libcpp-httplib-dev nlohmann-json3-dev libsqlite3-dev sqlite3 libspdlog-dev libfmt-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libcli11-dev libyaml-cpp-dev libgtest-dev libgmock-dev libssl-dev zlib1g-dev prometheus-cpp-dev
  libboost-dev  # header-only Boost.CRC: the agent's CRC32C of TensorBoard event files
  libslurm-dev slurm-wlm slurmctld slurmd slurm-client munge
  libmunge-dev  # tfctl proves its Unix user to tfslurmd with a MUNGE credential
  python3 python3-numpy python3-pytest python3-venv curl procps iproute2 jq
  # PyTorch for examples/ddp and its tests: Debian's 1.13 has gloo and
  # torch.distributed (docs/pytorch.md says why not a PyPI wheel).
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
  # The slurm packages start their daemons from postinst when a policy allows
  # it; the project runs its own cluster under a private directory instead.
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#packages[@]} packages present"
fi
