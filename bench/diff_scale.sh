#!/usr/bin/env bash
# `commprof diff` at scale: makes two synthetic profiles (bench/make_synthetic_profile) of the same
# job, EVENTS events over RANKS ranks each, and times `commprof diff BASE NEW --max-regression 10%
# --format json` as a whole process under /usr/bin/time (wall and CPU seconds, median of REPS
# warm-cache runs; peak RSS, the largest). BASE has rank 5 computing 300 us longer before every
# blocking collective, NEW 600 us: the others wait longer, so the diff must exit 1 and name the
# waiting as regressed (checked: a fast but wrong diff fails the script).
# Builds nothing: run it from the repository root after
# `cmake --preset release && cmake --build --preset release`.
#
#   bench/diff_scale.sh [--build DIR] [--work DIR] [--reps N] [--events N] [--ranks N] [--keep]
#
# Defaults: build/release, /tmp/commprof-diff-scale, 3 runs, 10000000 events, 64 ranks.
# Exit status: 0 when every run gave the expected verdict (whatever the timings), 1 otherwise,
# 2 on bad arguments or a missing binary.
set -euo pipefail

BUILD=build/release
WORK=/tmp/commprof-diff-scale
REPS=3
EVENTS=10000000
RANKS=64
KEEP=0
while (($#)); do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --events) EVENTS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "diff_scale: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "diff_scale: --reps must be a positive integer" >&2; exit 2; }
COMMPROF=$BUILD/cli/commprof
MAKER=$BUILD/bench/make_synthetic_profile
for b in "$COMMPROF" "$MAKER"; do
  [[ -x $b ]] || { echo "diff_scale: $b not built" >&2; exit 2; }
done
mkdir -p "$WORK"
BASE=$WORK/base.h5
NEW=$WORK/new.h5
"$MAKER" --ranks "$RANKS" --events "$EVENTS" --out "$BASE" --slow-rank 5 --slow-us 300 --clock-offset-us 2000 >/dev/null
"$MAKER" --ranks "$RANKS" --events "$EVENTS" --out "$NEW" --slow-rank 5 --slow-us 600 --clock-offset-us 2000 >/dev/null

walls=() cpus=() rss=0
for ((i = 0; i < REPS; i++)); do
  set +e
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/time" "$COMMPROF" diff "$BASE" "$NEW" --max-regression 10% \
    --format json >"$WORK/diff.json" 2>"$WORK/diff.err"
  rc=$?
  set -e
  if ((rc != 1)); then
    echo "diff_scale: run $i: exit $rc, expected 1 (a regression)" >&2
    cat "$WORK/diff.err" >&2
    exit 1
  fi
  /usr/bin/python3 - "$WORK/diff.json" <<'PY' || exit 1
import json, sys
doc = json.load(open(sys.argv[1]))
bad = [r for r in doc["rows"] if r["status"] == "regressed"]
ok = any(r["group"] == "rank" and r["metric"] == "wait_time" for r in bad)
if not ok:
    sys.exit("diff_scale: no rank's wait_time regressed: " + json.dumps(bad)[:2000])
PY
  # GNU time puts "Command exited with non-zero status 1" first: the figures are the last line.
  read -r wall user sys maxrss < <(tail -n 1 "$WORK/time")
  walls+=("$wall")
  cpus+=("$(echo "$user + $sys" | bc)")
  ((maxrss > rss)) && rss=$maxrss
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "diff ${EVENTS} events x ${RANKS} ranks (each file): wall $(median "${walls[@]}") s, CPU $(median "${cpus[@]}") s," \
  "peak RSS $((rss / 1024)) MiB ($(wc -c <"$BASE") + $(wc -c <"$NEW") bytes of files; $REPS runs)"
if ((KEEP == 0)); then
  rm -f "$BASE" "$NEW" "$WORK/diff.json" "$WORK/diff.err" "$WORK/time"
fi
