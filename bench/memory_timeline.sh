#!/usr/bin/env bash
# The memory timeline at scale: writes a planted allocation pattern (tests/e2e/make_memory_profile,
# its header states the truth) of RANKS ranks x (4 + 2 CHURN) alloc/free records, then times
#   commprof export FILE --format memory-json -o OUT      (every record: the largest output)
#   commprof export FILE --format memory-html -o OUT      (downsampled to 1000 points per chart)
# as whole processes under /usr/bin/time: wall seconds (median of REPS warm-cache runs), peak RSS
# (largest of the runs), records/s. It checks that the JSON's peaks are the planted ones
# ((r % 4 + 1) GiB + 4096 B at (5 + 3r) ms). Builds nothing: run it from the repository root
# after `cmake --preset release && cmake --build --preset release`.
#
#   bench/memory_timeline.sh [--build DIR] [--work DIR] [--reps N] [--ranks R] [--churn K]
#
# Defaults: build/release, /tmp/commprof-memory-timeline, 3 reps, 256 ranks, churn 5000
# (2.56 M records, a 170 MB file). Exit 0 when every run succeeded and the peaks are right, 1
# otherwise, 2 on bad arguments or a missing binary.
set -euo pipefail

BUILD=build/release
WORK=/tmp/commprof-memory-timeline
REPS=3
RANKS=256
CHURN=5000
while (($#)); do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --churn) CHURN=$2; shift 2 ;;
    *) echo "memory_timeline.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
COMMPROF=$BUILD/cli/commprof
WRITER=$BUILD/tests/e2e/make_memory_profile
for b in "$COMMPROF" "$WRITER"; do
  [[ -x $b ]] || { echo "memory_timeline.sh: $b not built" >&2; exit 2; }
done
mkdir -p "$WORK"
FILE=$WORK/mem.h5
"$WRITER" "$FILE" --ranks "$RANKS" --churn "$CHURN"
RECORDS=$((RANKS * (4 + 2 * CHURN)))
echo "file: $FILE, $RANKS ranks, $RECORDS records, $(du -m "$FILE" | cut -f1) MB"

for fmt in memory-json memory-html; do
  walls=() rss=0
  for ((i = 0; i < REPS; i++)); do
    out=$WORK/out.${fmt#memory-}
    /usr/bin/time -f "%e %M" -o "$WORK/time.txt" "$COMMPROF" export "$FILE" --format "$fmt" -o "$out" -q
    read -r wall kb < "$WORK/time.txt"
    walls+=("$wall")
    ((kb > rss)) && rss=$kb
  done
  median=$(printf '%s\n' "${walls[@]}" | sort -n | sed -n "$(((REPS + 1) / 2))p")
  printf '%-12s wall %6.2f s (median of %d)  peak RSS %5d MiB  %5.2f M records/s  output %d MB\n' "$fmt" \
    "$median" "$REPS" $((rss / 1024)) "$(echo "$RECORDS / $median / 1000000" | bc -l)" \
    "$(du -m "$out" | cut -f1)"
done

/usr/bin/python3 - "$WORK/out.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
bad = [d["rank"] for d in doc["devices"]
       if (d["peak"]["time_ns"], d["peak"]["bytes"]) != ((5 + 3 * d["rank"]) * 10**6, (d["rank"] % 4 + 1) * 2**30 + 4096)]
print("peaks: %d charts, %s" % (len(doc["devices"]), "all as planted" if not bad else "WRONG on ranks %s" % bad[:10]))
sys.exit(1 if bad else 0)
PY
