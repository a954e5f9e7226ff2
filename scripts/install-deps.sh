#!/usr/bin/env bash
# Installs the Debian 12 packages commprof builds, tests and runs with.
# Idempotent and quiet when everything is already there. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  binutils                      # addr2line: symbolizes `commprof run --stacks` call sites
  gfortran                      # the Fortran MPI binding tests (tests/e2e/fortran_*.f90)
  libopenmpi-dev openmpi-bin
  libhdf5-dev hdf5-tools python3-h5py python3-numpy
  liblz4-dev                    # the events tables' LZ4 compression (HDF5 filter 32004)
  hdf5-filter-plugin python3-hdf5plugin   # h5dump and h5py read those tables (tests; docs/file-format.md)
  libboost-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev
  protobuf-compiler             # protoc: decodes the Perfetto export in its tests (tests/e2e/perfetto_export.py)
  libsimdjson-dev zlib1g-dev     # commprof import kineto: JSON parsing, .json.gz
  chromium                      # browser tests of the HTML report (tests/browser)
  python3-pandas python3-matplotlib python3-pytest python3-venv python3-pip python3-setuptools  # python/commprof and its tests
  python3-torch                 # torch.distributed.run (torchrun) with CPU/gloo workers (tests/e2e/torchrun_e2e.py)
  libslurm-dev slurmctld slurmd slurm-client munge   # the SPANK plugin and the real single-node Slurm test
)

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
