#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds the release preset, checks the style
# (scripts/lint.sh: clang-format and clang-tidy) and runs every test (unit, real 4-rank Open MPI
# end-to-end, fuzz replay), then runs the unit tests under the ASan+UBSan preset and the unit tests
# of the multi-threaded modules under the ThreadSanitizer preset.
#
# The two sanitizer trees are built in the background at the lowest CPU priority (nice 19) while
# the style checks and the release tests run: most release tests are several-rank jobs that sleep
# and wait (planted delays, hang timeouts), which leaves a 2-core machine half idle for minutes;
# the niced compilers take that idle time and yield the CPU whenever a test wants it. Every
# timing test is built to hold on a loaded machine (it passes beside a full-priority CPU hog), so
# this load does not change its verdict. The build's output goes to build/sanitizers-build.log,
# shown when it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export OMPI_MCA_rmaps_base_oversubscribe=1
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
JOBS=$(nproc)

# Tests and benchmarks on, whatever an earlier scripts/demo.sh configured.
cmake --preset release -DCOMMPROF_BUILD_TESTS=ON -DCOMMPROF_BUILD_BENCH=ON >/dev/null
cmake --build --preset release -j "$JOBS"

SANITIZER_LOG=build/sanitizers-build.log
# In a session of its own (setsid), so that its whole process group can be ended at once. A new
# session is also a new scheduling autogroup (Linux's sched_autogroup), which competes with ours
# as an equal whatever its processes' nice values: the group itself is niced to 19 as well.
setsid -w bash -c "{ echo 19 >/proc/self/autogroup; } 2>/dev/null; exec nice -n 19 bash -c '
    cmake --preset asan && cmake --build --preset asan -j $JOBS &&
    cmake --preset tsan && cmake --build --preset tsan -j $JOBS'" >"$SANITIZER_LOG" 2>&1 &
sanitizer_build=$!
# A failing step below ends the script: the background build must not outlive it.
trap 'kill -- "-$sanitizer_build" 2>/dev/null || true' EXIT

scripts/lint.sh --build build/release --jobs "$JOBS"
ctest --preset release -j "$JOBS"

echo "test.sh: waiting for the sanitizer builds (log: $SANITIZER_LOG)"
if ! wait "$sanitizer_build"; then
  tail -n 60 "$SANITIZER_LOG" >&2
  echo "test.sh: the sanitizer builds failed (whole log: $SANITIZER_LOG)" >&2
  exit 1
fi
trap - EXIT
ctest --preset asan -j "$JOBS"
ctest --preset tsan -j "$JOBS"
