#!/usr/bin/env bash
# Whole-process wall time of profiled commands against their bare baseline, in alternated rounds,
# each run started on a quiet machine: before every run the script waits until no background
# analysis of an earlier `commprof run --analysis background` is left (its process is named
# commprof-analys) and a further 0.3 s. Without that wait the background work of one run would
# slow the next, and a pair timer would charge it to whichever command came next.
#
#   bench/footprint_pairs.sh RUNS 'BASELINE COMMAND' 'PROFILED COMMAND' ['ANOTHER PROFILED COMMAND' ...]
#
# Each round runs the baseline, then every profiled command in turn (so two variants are compared
# under the same drift of the machine). Prints every round and then, per profiled command, the
# medians: baseline, profiled, and the median of the rounds' ratios.
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
runs=$1
shift
commands=("$@")

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
timed "${commands[0]}" >/dev/null  # warm-up, not counted
for ((i = 1; i <= runs; i++)); do
  row=()
  for c in "${commands[@]}"; do
    quiet
    row+=("$(timed "$c")")
  done
  echo "round $i: baseline ${row[0]} s, profiled ${row[*]:1} s"
  results+=("${row[*]}")
done
quiet
printf '%s\n' "${results[@]}" | python3 -c '
import statistics, sys
rows = [list(map(float, line.split())) for line in sys.stdin if line.strip()]
b = statistics.median(r[0] for r in rows)
for k in range(1, len(rows[0])):
    a = statistics.median(r[k] for r in rows)
    q = statistics.median(r[k] / r[0] for r in rows)
    label = "" if len(rows[0]) == 2 else f"command {k}: "
    print(f"median: {label}baseline {b:.3f} s, profiled {a:.3f} s, ratio of pairs {q:.4f} ({(q - 1) * 100:+.1f} %)")
'
