#!/usr/bin/env bash
# `commprof stats` at scale: makes a synthetic profile (bench/make_synthetic_profile) and times
# `commprof stats` on it as a whole process under /usr/bin/time -v: wall seconds and user seconds
# (median of REPS runs) and peak RSS (largest of the runs), for the default rows by name (text) and
# for every split at once (--by comm,size,rank --format json). The figures go to bench/README.md
# ("commprof stats"). Builds nothing: run it from the repository root after
# `cmake --preset release && cmake --build --preset release`.
#
#   bench/stats_scale.sh [--build DIR] [--work DIR] [--reps N] [--events N] [--ranks N] [--gpu] [--keep]
#
#   --events total events (10000000); --ranks ranks (64); --gpu adds the synthetic GPU records;
#   --build build tree (build/release); --work where the file goes (/tmp/commprof-stats-scale,
#   removed afterwards unless --keep); --reps runs per case (3).
# The script also checks the figures it can know: MPI_Allreduce's calls over every rank equal
# twice the iterations times the ranks the generator reports (2 per iteration: world and half).
# Exit status: 0 when every run succeeded (it measures, it does not judge), 1 when a run failed or
# a check did not hold, 2 on bad arguments or a missing binary.
set -euo pipefail

BUILD=build/release
WORK=/tmp/commprof-stats-scale
REPS=3
EVENTS=10000000
RANKS=64
GPU=()
KEEP=0
while (($#)); do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --events) EVENTS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --gpu) GPU=(--gpu); shift ;;
    --keep) KEEP=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "stats_scale: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "stats_scale: --reps must be a positive integer" >&2; exit 2; }
GEN=$BUILD/bench/make_synthetic_profile
CP=$BUILD/cli/commprof
for bin in "$GEN" "$CP"; do
  [[ -x $bin ]] || { echo "stats_scale: $bin not found: build first" >&2; exit 2; }
done
[[ -x /usr/bin/time ]] || { echo "stats_scale: /usr/bin/time is needed (Debian: apt install time)" >&2; exit 2; }
mkdir -p "$WORK"
FILE=$WORK/stats-${EVENTS}x${RANKS}${GPU:+-gpu}.h5
trap '[[ $KEEP == 1 ]] || rm -f "$FILE"' EXIT

echo "making $FILE: $EVENTS events, $RANKS ranks ${GPU[*]}"
"$GEN" --ranks "$RANKS" --events "$EVENTS" --out "$FILE" "${GPU[@]}" > "$WORK/gen.log"
cat "$WORK/gen.log"

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

run_case() {  # NAME ARGS...
  local name=$1; shift
  local walls=() users=() rss=0
  for ((i = 0; i < REPS; i++)); do
    /usr/bin/time -v "$CP" stats "$FILE" "$@" -o "$WORK/out" 2> "$WORK/time.log" ||
      { echo "stats_scale: $name failed:"; cat "$WORK/time.log"; exit 1; } >&2
    walls+=("$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0;
                for (j = 1; j <= n; j++) s = s * 60 + t[j]; print s }' "$WORK/time.log")")
    users+=("$(awk -F': ' '/User time/ { print $2 }' "$WORK/time.log")")
    local r; r=$(awk -F': ' '/Maximum resident/ { print $2 }' "$WORK/time.log")
    ((r > rss)) && rss=$r
  done
  printf '%-40s wall %6.2f s  user %6.2f s  peak RSS %5d MiB  %5.1f M events/s\n' "$name" \
    "$(printf '%s\n' "${walls[@]}" | median)" "$(printf '%s\n' "${users[@]}" | median)" $((rss / 1024)) \
    "$(awk -v e="$EVENTS" -v w="$(printf '%s\n' "${walls[@]}" | median)" 'BEGIN { print e / w / 1e6 }')"
}

run_case "stats (text, by name)"
run_case "stats --by comm,size,rank --format json" --by comm,size,rank --format json --top 0

# What the generator's design fixes: 2 MPI_Allreduce per iteration per rank (world and the half).
"$CP" stats "$FILE" --kinds mpi --format json -o "$WORK/check.json"
/usr/bin/python3 - "$WORK/check.json" "$WORK/gen.log" <<'PY'
import json, re, sys
doc = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
m = re.search(r"(\d+) iterations", log)
[ar] = [r for r in doc["rows"] if r["name"] == "MPI_Allreduce"]
print(f"check: MPI_Allreduce calls {ar['calls']}, percentiles exact: {ar['percentiles_exact']}")
if m:
    want = 2 * int(m.group(1)) * len(doc["ranks_read"])
    if ar["calls"] != want:
        sys.exit(f"stats_scale: MPI_Allreduce calls {ar['calls']}, the generator made {want}")
PY
