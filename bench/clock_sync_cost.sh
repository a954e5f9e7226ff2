#!/usr/bin/env bash
# Cost of the clock alignment at MPI_Init, by number of ranks: set-up and first epoch, which ends
# with a broadcast from rank 0, so rank 0's figure is the whole job's start-up sync (set
# COMMPROF_FAKE_HOST to simulate hosts, docs/clock-alignment.md). Prints the median of RUNS runs
# per size, read from the rank's `clock_sync_init_ns` counter in the output file.
# Usage: bench/clock_sync_cost.sh [BUILD_DIR] [RUNS] [SIZES...]   (defaults: build/release 5 2 4 8)
# HOSTS=each puts every rank on its own simulated host (COMMPROF_FAKE_HOST=0,1,...,N-1): the tree
# of host leaders then has ceil(log2 N) rounds. HOSTS=H (a number) spreads the ranks over H
# simulated hosts in contiguous blocks, as a launcher places them (rank i on host i * H / N).
# RANK_PREFIX="chrt --idle 0" starts each rank under that command: with hundreds of ranks on a few
# cores, ranks at the idle priority leave the launcher the CPU it needs to start them all (without
# it, 1024 ranks on 2 cores were not all started after 16 minutes).
set -euo pipefail
BUILD=${1:-build/release}
RUNS=${2:-5}
shift $(( $# > 2 ? 2 : $# )) || true
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(2 4 8)
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && MPIRUN+=(--allow-run-as-root)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
printf "%6s %14s %14s %14s %22s\n" ranks "median ms" "min ms" "max ms" "per other rank (us)"
for n in "${SIZES[@]}"; do
  vals=()
  if [ "${HOSTS:-}" = each ]; then
    COMMPROF_FAKE_HOST=$(seq -s, 0 $((n - 1)))
    export COMMPROF_FAKE_HOST
  elif [[ ${HOSTS:-} =~ ^[1-9][0-9]*$ ]]; then
    COMMPROF_FAKE_HOST=$(for ((r = 0; r < n; ++r)); do printf '%d\n' $((r * HOSTS / n)); done | paste -sd,)
    export COMMPROF_FAKE_HOST
  elif [ -n "${HOSTS:-}" ]; then
    echo "clock_sync_cost: HOSTS=$HOSTS is neither 'each' nor a number of hosts" >&2
    exit 2
  fi
  for ((i = 0; i < RUNS; ++i)); do
    # shellcheck disable=SC2086 # RANK_PREFIX is a command and its arguments
    "$BUILD/cli/commprof" run -q -o "$OUT/s.h5" -- "${MPIRUN[@]}" -np "$n" ${RANK_PREFIX:-} \
      "$BUILD/examples/mpi_straggler" --iters 10 --compute-us 10 >/dev/null
    vals+=("$("$PY" -c "import h5py,sys; print(int(h5py.File(sys.argv[1])['ranks']['0'].attrs['clock_sync_init_ns']))" "$OUT/s.h5")")
  done
  "$PY" - "$n" "${vals[@]}" <<'PYEOF'
import statistics, sys
n = int(sys.argv[1]); v = [int(x) / 1e6 for x in sys.argv[2:]]
med = statistics.median(v)
print(f"{n:6d} {med:14.3f} {min(v):14.3f} {max(v):14.3f} {med * 1000 / max(1, n - 1):22.1f}")
PYEOF
done
