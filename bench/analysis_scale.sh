#!/usr/bin/env bash
# Analysis at scale: makes synthetic profiles (bench/make_synthetic_profile) of several sizes and
# times the analysis on each, as a whole process under /usr/bin/time:
#   commprof report --format json FILE -o OUT                     always
#   commprof export --format chrome -o OUT FILE                   when this build has `commprof export`
# For each case it prints wall seconds (median of REPS warm-cache runs, plus one cold-cache run
# after the file was evicted from the page cache), CPU seconds (user + system, median), peak RSS
# (largest of the runs), events/s, for the export the MB/s of JSON written, and the load other
# processes put on the machine meanwhile (largest over the runs; a figure is clean near 0).
# Builds nothing: run it from the repository root after
# `cmake --preset release && cmake --build --preset release`.
#
#   bench/analysis_scale.sh [--build DIR] [--work DIR] [--reps N] [--keep] [--quick] [CASE...]
#
#   CASE    EVENTSxRANKS or EVENTSxRANKS:gpu, EVENTS with an optional k/M suffix (10Mx64:gpu).
#           Default: an events sweep at 64 ranks (1M 3M 10M 30M) and a ranks sweep at 10M
#           (8 16 64 256), each once without and once with --gpu.
#   --quick 1Mx64 and 1Mx64:gpu only (a smoke test, seconds).
#   --build build tree (build/release); --work where files go (/tmp/commprof-analysis-scale,
#           each profile is removed after its case unless --keep); --reps warm runs (3).
# Every profile has a straggler planted (rank 5, +300 us before each blocking collective) and
# clock offsets up to 2 ms with drift, so the report does its whole job (alignment, matching,
# metrics, verdict); the script checks that the report names rank 5, with every instance
# complete and no clock-condition violation after alignment.
# Exit status: 0 when every run succeeded (whatever the timings: it measures, it does not judge),
# 1 when a run failed or the verdict was wrong, 2 on bad arguments or a missing binary.
set -euo pipefail

BUILD=build/release
WORK=/tmp/commprof-analysis-scale
REPS=3
KEEP=0
CASES=()
while (($#)); do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --quick) CASES+=(1Mx64 1Mx64:gpu); shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "analysis_scale: unknown option $1" >&2; exit 2 ;;
    *) CASES+=("$1"); shift ;;
  esac
done
if ((${#CASES[@]} == 0)); then
  for c in 1Mx64 3Mx64 10Mx64 30Mx64 10Mx8 10Mx16 10Mx256; do CASES+=("$c" "$c:gpu"); done
fi
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "analysis_scale: --reps must be a positive integer" >&2; exit 2; }

GEN=$BUILD/bench/make_synthetic_profile
CP=$BUILD/cli/commprof
for bin in "$GEN" "$CP"; do
  if [[ ! -x $bin ]]; then
    echo "analysis_scale: $bin not found: build first (cmake --preset release && cmake --build --preset release)" >&2
    exit 2
  fi
done
[[ -x /usr/bin/time ]] || { echo "analysis_scale: /usr/bin/time is needed (Debian: apt install time)" >&2; exit 2; }
HAVE_EXPORT=0
# `commprof export --help` also exits 0 where there is no export (CLI11 then prints the main help),
# so look for the subcommand's own usage line.
if "$CP" export --help 2>/dev/null | grep -q 'Usage:.* export'; then HAVE_EXPORT=1; fi
mkdir -p "$WORK"
LOG=$WORK/log.txt
: >"$LOG"
RESULTS=$WORK/results.tsv
printf 'tool\tevents\tranks\tgpu\twarm_s\tcold_s\tcpu_s\trss_kb\tevents_per_s\tout_bytes\tout_mb_per_s\tothers_cores\n' \
  >"$RESULTS"

count() {  # 10M -> 10000000, 300k -> 300000
  local v=$1
  case $v in
    *M) echo $(( ${v%M} * 1000000 )) ;;
    *k) echo $(( ${v%k} * 1000 )) ;;
    *) echo "$v" ;;
  esac
}

# Drops FILE's pages from the page cache (clean pages only, hence the sync first), so the next
# read comes from the disk. Prints "cold" when it worked.
evict() {
  sync "$1" 2>/dev/null || sync
  /usr/bin/python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)' "$1" 2>/dev/null && echo cold
}

# Busy CPU ticks of the whole machine (user + nice + system + irq + softirq + steal), in USER_HZ.
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
HZ=$(getconf CLK_TCK)

# timed CMD...: runs CMD under /usr/bin/time; sets T_WALL (s), T_RSS (KB), T_CPU (user + sys s)
# and T_OTHERS: the cores' worth of CPU that other processes used meanwhile (machine-wide busy
# time minus ours, over the wall time). On a shared machine that says whether a figure is clean.
timed() {
  local tf=$WORK/time.txt b0 b1 u sy
  b0=$(busy_ticks)
  if ! /usr/bin/time -f '%e %M %U %S' -o "$tf" "$@" >>"$LOG" 2>&1; then
    echo "analysis_scale: command failed: $*" >&2
    tail -n 20 "$LOG" >&2
    exit 1
  fi
  b1=$(busy_ticks)
  read -r T_WALL T_RSS u sy <"$tf"
  T_CPU=$(awk -v u="$u" -v s="$sy" 'BEGIN { printf "%.2f", u + s }')
  T_OTHERS=$(awk -v b="$((b1 - b0))" -v hz="$HZ" -v c="$T_CPU" -v w="$T_WALL" \
                 'BEGIN { o = (b / hz - c) / (w > 0.01 ? w : 0.01); printf "%.2f", (o > 0 ? o : 0) }')
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# measure TOOL EVENTS RANKS GPU OUT CMD...: one cold run, REPS warm runs; appends a row.
measure() {
  local tool=$1 events=$2 ranks=$3 gpu=$4 out=$5 file=$6
  shift 6
  local walls=() cpus=() rss=0 cold=n/a others=0
  if [[ $(evict "$file") == cold ]]; then
    rm -f "$out"
    timed "$@"
    cold=$T_WALL
    ((T_RSS > rss)) && rss=$T_RSS
    others=$(awk -v a="$others" -v b="$T_OTHERS" 'BEGIN { print (b > a ? b : a) }')
  fi
  for ((i = 0; i < REPS; ++i)); do
    rm -f "$out"
    timed "$@"
    walls+=("$T_WALL")
    cpus+=("$T_CPU")
    ((T_RSS > rss)) && rss=$T_RSS
    others=$(awk -v a="$others" -v b="$T_OTHERS" 'BEGIN { print (b > a ? b : a) }')
  done
  local warm cpu bytes
  warm=$(median "${walls[@]}")
  cpu=$(median "${cpus[@]}")
  bytes=$(stat -c %s "$out")
  awk -v tool="$tool" -v ev="$events" -v rk="$ranks" -v gpu="$gpu" -v w="$warm" -v c="$cold" -v cpu="$cpu" \
      -v rss="$rss" -v b="$bytes" -v o="$others" 'BEGIN {
        t = (w > 0 ? w : 0.005)   # /usr/bin/time has 10 ms resolution
        printf "%s\t%d\t%d\t%s\t%.2f\t%s\t%.2f\t%d\t%.0f\t%d\t%.1f\t%.2f\n", tool, ev, rk, gpu, w, c, cpu, rss, ev / t, b,
               b / 1e6 / t, o
      }' >>"$RESULTS"
}

echo "analysis_scale: build $BUILD, work $WORK, $REPS warm runs per case, export $( ((HAVE_EXPORT)) && echo yes || echo 'not available (skipped)')"
for c in "${CASES[@]}"; do
  spec=${c%%:*}
  gpu=off
  [[ $c == *:gpu ]] && gpu=on
  if ! [[ $spec =~ ^([0-9]+[kM]?)x([0-9]+)$ ]]; then
    echo "analysis_scale: bad case '$c' (want EVENTSxRANKS[:gpu], e.g. 10Mx64:gpu)" >&2
    exit 2
  fi
  events=$(count "${BASH_REMATCH[1]}")
  ranks=${BASH_REMATCH[2]}
  file=$WORK/synthetic-${events}x${ranks}-gpu${gpu}.h5
  gen=("$GEN" --ranks "$ranks" --events "$events" --out "$file" --slow-rank 5 --slow-us 300 --clock-offset-us 2000
       --seed 1)
  [[ $gpu == on ]] && gen+=(--gpu)
  timed "${gen[@]}"
  echo
  echo "  $(tail -n 1 "$LOG")"
  echo "    generated in $T_WALL s, peak RSS $((T_RSS / 1024)) MiB"

  measure report "$events" "$ranks" "$gpu" "$WORK/report.json" "$file" \
    "$CP" report --format json "$file" -o "$WORK/report.json"
  # The file is built so that every instance is complete, the aligned clocks show no violation
  # and rank 5 is the straggler: a report that says otherwise is wrong, however fast.
  if ! /usr/bin/python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
s = j["stragglers"]
ok = s and s[0]["rank"] == 5 and j["instances"]["incomplete"] == 0 and j["clock"]["violations"] == 0
sys.exit(0 if ok else 1)' "$WORK/report.json"; then
    echo "analysis_scale: the report of $file does not show what was planted (straggler rank 5, every" \
         "instance complete, no clock violation after alignment): see $WORK/report.json" >&2
    exit 1
  fi
  if ((HAVE_EXPORT)); then
    measure export "$events" "$ranks" "$gpu" "$WORK/trace.json" "$file" \
      "$CP" export --format chrome -o "$WORK/trace.json" "$file"
    rm -f "$WORK/trace.json"
  fi
  tail -n $((1 + HAVE_EXPORT)) "$RESULTS" | awk -F'\t' '{
    printf "    %-6s warm %6.2f s  cold %6s s  cpu %6.2f s  %6.0f MiB  %5.2f M events/s%s  (others used %.2f cores)\n",
           $1, $5, $6, $7, $8 / 1024, $9 / 1e6, ($1 == "export" ? sprintf("  %.0f MB/s of JSON (%.0f MB)", $11, $10 / 1e6) : ""), $12
  }'
  ((KEEP)) || rm -f "$file"
done

echo
echo "| tool | events | ranks | gpu | wall s (median of $REPS) | cold-cache s | CPU s | peak RSS MiB | M events/s | JSON MB/s | others' load (cores) |"
echo "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
tail -n +2 "$RESULTS" | awk -F'\t' '{
  ev = ($2 >= 1e6 ? sprintf("%gM", $2 / 1e6) : ($2 >= 1e3 ? sprintf("%gk", $2 / 1e3) : $2))
  printf "| %s | %s | %d | %s | %.2f | %s | %.2f | %.0f | %.2f | %s | %.2f |\n", $1, ev, $3, $4, $5, $6, $7, $8 / 1024,
         $9 / 1e6, ($1 == "export" ? sprintf("%.0f", $11) : "-"), $12
}'
echo
echo "raw results: $RESULTS"
