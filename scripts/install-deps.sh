#!/usr/bin/env bash
# Installs the Debian 12 packages commprof builds, tests and runs with.
# Idempotent and quiet when everything is already there. Needs root (or sudo).
#
#   scripts/install-deps.sh           everything scripts/test.sh needs (the whole suite)
#   scripts/install-deps.sh --demo    only what scripts/demo.sh builds and runs (the commprof command,
#                                     the collector, the example job): no test toolchain
#   scripts/install-deps.sh --list [--demo]   print the package names, install nothing
set -euo pipefail

# The demo's set: the compilers and build tools, and what the library, the command and the example
# job link (tests/e2e/cli_usage.py, case demo_packages, checks that a build configured as demo.sh
# configures it finds nothing outside these packages and their dependencies).
DEMO_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libopenmpi-dev openmpi-bin
  libhdf5-dev liblz4-dev
  libboost-dev libssl-dev
  libcli11-dev nlohmann-json3-dev
  libsimdjson-dev zlib1g-dev
)

PACKAGES=(
  "${DEMO_PACKAGES[@]}"
  clang libclang-rt-14-dev
  binutils                      # addr2line: symbolizes `commprof run --stacks` call sites
  gfortran                      # the Fortran MPI binding tests (tests/e2e/fortran_*.f90)
  hdf5-tools python3-h5py python3-numpy
  hdf5-filter-plugin python3-hdf5plugin   # h5dump and h5py read those tables (tests; docs/file-format.md)
  libgtest-dev libgmock-dev libbenchmark-dev
  protobuf-compiler             # protoc: decodes the Perfetto export in its tests (tests/e2e/perfetto_export.py)
  chromium                      # browser tests of the HTML report (tests/browser)
  python3-pandas python3-matplotlib python3-pytest python3-venv python3-pip python3-setuptools  # python/commprof and its tests
  python3-torch                 # torch.distributed.run (torchrun) with CPU/gloo workers (tests/e2e/torchrun_e2e.py)
  libslurm-dev slurmctld slurmd slurm-client munge   # the SPANK plugin and the real single-node Slurm test
)

list=0
for arg in "$@"; do
  case "$arg" in
    --demo) PACKAGES=("${DEMO_PACKAGES[@]}") ;;
    --list) list=1 ;;
    *) echo "install-deps: unknown option $arg (--demo, --list)" >&2; exit 2 ;;
  esac
done
if [ "$list" -eq 1 ]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || echo "install-deps: apt-get update failed; trying the install with the current lists" >&2
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
