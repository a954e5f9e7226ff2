#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds the release preset, checks the style
# (scripts/lint.sh: clang-format and clang-tidy) and runs every test (unit, real 4-rank Open MPI
# end-to-end, fuzz replay), then builds the ASan+UBSan preset and runs the unit tests under it, then
# the ThreadSanitizer preset and the unit tests of the multi-threaded modules under it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export OMPI_MCA_rmaps_base_oversubscribe=1
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
JOBS=$(nproc)

cmake --preset release >/dev/null
cmake --build --preset release -j "$JOBS"
scripts/lint.sh --build build/release --jobs "$JOBS"
ctest --preset release -j "$JOBS"

cmake --preset asan >/dev/null
cmake --build --preset asan -j "$JOBS"
ctest --preset asan -j "$JOBS"

cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$JOBS"
ctest --preset tsan -j "$JOBS"
