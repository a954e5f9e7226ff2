#!/usr/bin/env bash
# End-to-end overhead of `commprof run` on a real MPI job: the whole-process wall time of
#   mpirun ... examples/mpi_straggler ...                                  (bare)
#   commprof run -q -o OUT.h5 -- mpirun ... examples/mpi_straggler ...     (profiled)
# run alternately (bare, profiled, bare, ...) so that a drift in the machine's speed hits both
# alike. Prints every run's wall time, both medians and the ratio profiled/bare (of the medians,
# and the median of the per-pair ratios). Builds nothing: point it at a built tree.
#
#   bench/e2e_overhead.sh [BUILD_DIR [RUNS]]      defaults: build/release 7
#
# Environment: NP (4), ITERS (2000), BYTES (8), COMPUTE_US (1000), WARMUP (1 pair, not counted),
# OUT (/tmp/x.h5, removed before each profiled run).
# Exit status: 0 when every run succeeded (whatever the ratio: this script measures, it does not
# judge), 1 when a run failed, 2 on bad arguments or a missing binary.
set -euo pipefail

BUILD=${1:-build/release}
RUNS=${2:-7}
NP=${NP:-4}
ITERS=${ITERS:-2000}
BYTES=${BYTES:-8}
COMPUTE_US=${COMPUTE_US:-1000}
WARMUP=${WARMUP:-1}
OUT=${OUT:-/tmp/x.h5}

for bin in "$BUILD/examples/mpi_straggler" "$BUILD/cli/commprof"; do
  if [[ ! -x $bin ]]; then
    echo "e2e_overhead: $bin not found: build first (cmake --preset release && cmake --build build/release)" >&2
    exit 2
  fi
done
if ! [[ $RUNS =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 [BUILD_DIR [RUNS]]" >&2
  exit 2
fi
command -v mpirun >/dev/null || { echo "e2e_overhead: mpirun not on PATH" >&2; exit 2; }

APP=(mpirun --allow-run-as-root --oversubscribe -np "$NP" "$BUILD/examples/mpi_straggler"
     --iters "$ITERS" --bytes "$BYTES" --compute-us "$COMPUTE_US")
PROF=("$BUILD/cli/commprof" run -q -o "$OUT" -- "${APP[@]}")
LOG=$(mktemp /tmp/e2e_overhead.XXXXXX.log)

# Runs "$@" with its output in $LOG; sets ELAPSED to the wall seconds. Fails loudly.
timed() {
  local t0 t1
  t0=$EPOCHREALTIME
  if ! "$@" >>"$LOG" 2>&1; then
    echo "e2e_overhead: command failed: $*" >&2
    tail -n 20 "$LOG" >&2
    exit 1
  fi
  t1=$EPOCHREALTIME
  ELAPSED=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
}

clean_out() { rm -rf "$OUT" "$OUT.spool"; }

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "bare:     ${APP[*]}"
echo "profiled: ${PROF[*]}"
loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?"; }
echo "$RUNS pairs, alternating, after $WARMUP warm-up pair(s); $(nproc) cores; load average $(loadavg)"

for ((i = 0; i < WARMUP; ++i)); do
  timed "${APP[@]}"
  clean_out
  timed "${PROF[@]}"
done

bare=()
prof=()
ratios=()
printf '%-5s %10s %12s %8s\n' run bare_s profiled_s ratio
for ((i = 1; i <= RUNS; ++i)); do
  timed "${APP[@]}"
  b=$ELAPSED
  clean_out
  timed "${PROF[@]}"
  p=$ELAPSED
  r=$(awk -v p="$p" -v b="$b" 'BEGIN { printf "%.4f", p / b }')
  bare+=("$b")
  prof+=("$p")
  ratios+=("$r")
  printf '%-5s %10s %12s %8s\n' "$i" "$b" "$p" "$r"
done
clean_out

mb=$(median "${bare[@]}")
mp=$(median "${prof[@]}")
mr=$(median "${ratios[@]}")
echo "median bare:     $mb s"
echo "median profiled: $mp s"
awk -v p="$mp" -v b="$mb" -v r="$mr" 'BEGIN {
  printf "ratio of medians (profiled/bare): %.4f  (%+.1f%%)\n", p / b, (p / b - 1) * 100
  printf "median of per-pair ratios:        %.4f  (%+.1f%%)\n", r, (r - 1) * 100 }'
echo "load average at the end: $(loadavg) (the job's own $NP busy ranks account for about $NP)"
rm -f "$LOG"
exit 0
