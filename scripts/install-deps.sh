#!/usr/bin/env bash
# Installs everything ibdt needs to build, test and benchmark on Debian 12,
# by package name, and nothing that is already there.
set -euo pipefail
packages=(
  # build
  build-essential cmake ninja-build pkg-config python3
  # tests, benchmarks, command line and JSON output
  googletest libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  # RDMA (verbs provider) and launchers (PMIx, Open MPI, MPICH, Slurm)
  libibverbs-dev librdmacm-dev rdma-core ibverbs-utils perftest
  libpmix-dev openmpi-bin libopenmpi-dev mpich libmpich-dev slurm-wlm munge
  # ibdt-sim: the all-to-all simulator at scale (docs/simulator.md)
  libsimgrid-dev
  # Soft-RoCE guest for the verbs tests, fuzzing runtime
  qemu-system-x86 libclang-rt-14-dev clang bc
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
