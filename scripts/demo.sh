#!/usr/bin/env bash
# The demo, end to end: installs what it needs, builds, profiles a 4-rank MPI job with a planted
# straggler (rank 2 computes 3 ms longer per iteration), prints what was recorded and writes
# demo-output/demo.h5.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
mkdir -p demo-output
MPIRUN=(mpirun --oversubscribe -np 4)
if [ "$(id -u)" -eq 0 ]; then MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 4); fi
build/release/cli/commprof run -o demo-output/demo.h5 -- "${MPIRUN[@]}" \
  build/release/examples/mpi_straggler --iters 200 --bytes 4096 --compute-us 1000 --slow-rank 2 --slow-us 3000
build/release/cli/commprof info demo-output/demo.h5
echo
echo "demo: wrote demo-output/demo.h5 (read it with h5py: see docs/file-format.md)"
