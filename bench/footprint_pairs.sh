#!/usr/bin/env bash
# Whole-process wall time of a profiled command against its bare baseline, in alternated pairs,
# each run started on a quiet machine: before every run the script waits until no background
# analysis of an earlier `commprof run --analysis background` is left (its process is named
# commprof-analys) and a further 0.3 s. Without that wait the background work of one run would
# slow the next, and a pair timer would charge it to whichever command came next.
#
#   bench/footprint_pairs.sh RUNS 'BASELINE COMMAND' 'PROFILED COMMAND'
#
# Prints every pair and then the medians: baseline, profiled, and the median of the pairs' ratios.
set -euo pipefail
if [ $# -ne 3 ]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
runs=$1
baseline=$2
profiled=$3

quiet() {
  while pgrep -x commprof-analys >/dev/null; do sleep 0.05; done
  sleep 0.3
}

timed() {  # one run of "$1", its output discarded; prints the wall seconds
  local t0 t1
  t0=$(date +%s.%N)
  bash -c "$1" >/dev/null 2>&1 || { echo "footprint_pairs: '$1' failed" >&2; exit 1; }
  t1=$(date +%s.%N)
  python3 -c "print(f'{$t1 - $t0:.4f}')"
}

results=()
quiet
timed "$baseline" >/dev/null  # warm-up, not counted
for ((i = 1; i <= runs; i++)); do
  quiet
  b=$(timed "$baseline")
  quiet
  p=$(timed "$profiled")
  echo "pair $i: baseline ${b} s, profiled ${p} s"
  results+=("$b $p")
done
quiet
printf '%s\n' "${results[@]}" | python3 -c '
import statistics, sys
pairs = [tuple(map(float, line.split())) for line in sys.stdin if line.strip()]
b = statistics.median(p[0] for p in pairs)
a = statistics.median(p[1] for p in pairs)
r = statistics.median(p[1] / p[0] for p in pairs)
print(f"median: baseline {b:.3f} s, profiled {a:.3f} s, ratio of pairs {r:.4f} ({(r - 1) * 100:+.1f} %)")
'
