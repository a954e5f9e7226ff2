#!/usr/bin/env bash
# The report (or stats, or export) as an MPI job against K processes
# (docs/scale.md#distributed-analysis): makes a synthetic profile (bench/make_synthetic_profile, a
# planted straggler and clock offsets) and times the command by one process and by `mpirun -np K`
# for each K, as whole processes (wall seconds, median of REPS runs, and the largest peak RSS of one
# process), checking that every K gives the one-process output byte for byte. Builds nothing: run it
# from the repository root after `cmake --preset release && cmake --build --preset release`.
#
#   bench/distributed_report.sh [--build DIR] [--work DIR] [--reps N] [--ranks R] [--events E]
#                               [--command report|stats|chrome|perfetto] [K...]
#
#   K       process counts to time besides one (default: 2 3 4); more than the machine's cores
#           oversubscribe it, and the figures then say so
#   --events events of the profile (default 10000000), --ranks its ranks (64), --reps runs (3)
#   --command what is timed: report (`report --format json`, the default), stats (`stats --format
#           json`), chrome or perfetto (`export -q --format chrome|perfetto`)
# Exit status: 0 when every run succeeded and every output was identical, 1 otherwise, 2 on bad
# arguments or a missing binary. It measures; it does not judge the timings.
set -euo pipefail

BUILD=build/release
WORK=/tmp/commprof-distributed-report
REPS=3
RANKS=64
EVENTS=10000000
COMMAND=report
KS=()
while (($#)); do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --events) EVENTS=$2; shift 2 ;;
    --command) COMMAND=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "distributed_report: unknown option $1" >&2; exit 2 ;;
    *) KS+=("$1"); shift ;;
  esac
done
((${#KS[@]})) || KS=(2 3 4)
case $COMMAND in
  report) ARGS=(report --format json) ;;
  stats) ARGS=(stats --format json) ;;
  chrome|perfetto) ARGS=(export -q --format "$COMMAND") ;;
  *) echo "distributed_report: --command $COMMAND is not report, stats, chrome or perfetto" >&2; exit 2 ;;
esac
for v in "$REPS" "$RANKS" "$EVENTS" "${KS[@]}"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "distributed_report: '$v' is not a positive integer" >&2; exit 2; }
done
GEN=$BUILD/bench/make_synthetic_profile
CP=$BUILD/cli/commprof
for bin in "$GEN" "$CP"; do
  [[ -x $bin ]] || { echo "distributed_report: $bin not found: build first" >&2; exit 2; }
done
[[ -x /usr/bin/time ]] || { echo "distributed_report: /usr/bin/time is needed (Debian: apt install time)" >&2; exit 2; }
MPIRUN=(mpirun --oversubscribe)
[[ $(id -u) == 0 ]] && MPIRUN+=(--allow-run-as-root)

mkdir -p "$WORK"
FILE=$WORK/profile.h5
"$GEN" --ranks "$RANKS" --events "$EVENTS" --out "$FILE" --slow-rank 5 --slow-us 300 --clock-offset-us 2000 >/dev/null

# One timed run: prints "wall_s peak_rss_kb" (peak: the largest of the processes).
timed() {
  local out=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  /usr/bin/time -o "$WORK/time.txt" -f "%M" "$@" >/dev/null
  t1=$(date +%s.%N)
  echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') $(sort -n "$WORK/time.txt" | tail -1)"
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "$COMMAND of a profile of $RANKS ranks, $EVENTS events; $(nproc) cores; $REPS runs each"
printf '%-10s %8s %8s %12s %10s\n' processes "wall s" "min s" "peak MiB" identical
fail=0
for k in 1 "${KS[@]}"; do
  walls=() peak=0
  for ((i = 0; i < REPS; i++)); do
    out=$WORK/output.$k
    # Not timed: replacing a large output frees the old file's pages inside the timed rename.
    rm -f "$out"
    if ((k == 1)); then
      read -r wall rss < <(timed "$out" "$CP" "${ARGS[@]}" "$FILE" -o "$out")
    else
      # /usr/bin/time around each process: each writes its own peak into time.txt.$rank.
      rm -f "$WORK"/time.txt.*
      t0=$(date +%s.%N)
      "${MPIRUN[@]}" -np "$k" bash -c "/usr/bin/time -o $WORK/time.txt.\$OMPI_COMM_WORLD_RANK -f %M \"\$@\"" _ \
        "$CP" "${ARGS[@]}" "$FILE" -o "$out" >/dev/null
      t1=$(date +%s.%N)
      wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
      rss=$(cat "$WORK"/time.txt.* | sort -n | tail -1)
    fi
    walls+=("$wall")
    ((rss > peak)) && peak=$rss
  done
  same=yes
  if ((k > 1)) && ! cmp -s "$WORK/output.1" "$WORK/output.$k"; then
    same=NO
    fail=1
  fi
  printf '%-10s %8.2f %8.2f %12d %10s\n' "$k" "$(printf '%s\n' "${walls[@]}" | median)" \
    "$(printf '%s\n' "${walls[@]}" | sort -n | head -1)" $((peak / 1024)) "$same"
done
rm -f "$FILE" "$WORK"/output.*
exit $fail
