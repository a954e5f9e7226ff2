#!/usr/bin/env bash
# The demo, end to end: installs what it needs, builds, profiles a 4-rank MPI job with a planted
# straggler (rank 2 computes 3 ms longer per iteration), prints what was recorded and the
# cross-rank report naming the straggler, and writes demo-output/demo.h5 (with its /analysis
# group), report.json, report.html and the merged Chrome/Perfetto trace demo.trace.json.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --demo  # the build and run set only (scripts/test.sh installs the test toolchain)
# Without the test toolchain (a fresh machine) the tree is configured without tests and benchmarks,
# which need it; scripts/test.sh turns them on again.
CONFIGURE=(cmake --preset release)
if ! dpkg-query -W -f='${Status}' libgtest-dev 2>/dev/null | grep -q "install ok installed" ||
  ! command -v python3 >/dev/null; then
  CONFIGURE+=(-DCOMMPROF_BUILD_TESTS=OFF -DCOMMPROF_BUILD_BENCH=OFF)
fi
"${CONFIGURE[@]}" >/dev/null
# Only what the demo runs (the command, with the collector and NCCL plugin it depends on, and the
# example job): not the tests and benchmarks, which scripts/test.sh builds.
cmake --build --preset release --target commprof_cli mpi_straggler
mkdir -p demo-output
MPIRUN=(mpirun --oversubscribe -np 4)
if [ "$(id -u)" -eq 0 ]; then MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 4); fi
build/release/cli/commprof run -o demo-output/demo.h5 -- "${MPIRUN[@]}" \
  build/release/examples/mpi_straggler --iters 200 --bytes 4096 --compute-us 1000 --slow-rank 2 --slow-us 3000
build/release/cli/commprof info demo-output/demo.h5
echo
build/release/cli/commprof report demo-output/demo.h5
build/release/cli/commprof report --format json -o demo-output/report.json demo-output/demo.h5
build/release/cli/commprof report --format html -o demo-output/report.html demo-output/demo.h5
build/release/cli/commprof export --format chrome -o demo-output/demo.trace.json demo-output/demo.h5
echo
out="$PWD/demo-output"
echo "demo: wrote $out/demo.h5 (read it with h5py: docs/file-format.md), report.json, report.html"
echo "      and demo.trace.json (open it in https://ui.perfetto.dev or chrome://tracing)"
echo "      the command: $PWD/build/release/cli/commprof (docs/cli.md)"
