#!/usr/bin/env bash
# Relay tree throughput (bench/README.md#relays): RANKS simulated ranks on HOSTS simulated hosts
# (bench/load_generator.cc, the real wire protocol) send EVENTS events each, once straight to one
# `commprof aggregate` and once through a relay per host writing shards; prints, per mode, the
# load generator's own rate and the whole time until the job file is finalized (analysis off).
#
#   bench/relay_throughput.sh BUILD_DIR [RANKS] [HOSTS] [EVENTS]      (defaults 1024 32 10000)
set -euo pipefail
BUILD=$(cd "$1" && pwd); RANKS=${2:-1024}; HOSTS=${3:-32}; EVENTS=${4:-10000}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
for mode in direct relays; do
  t0=$(date +%s.%N)
  "$BUILD/cli/commprof" aggregate -q --no-analysis --expect "$RANKS" --listen 127.0.0.1:0 --job-id "$mode" \
    --secret-file "$W/$mode.secret" --address-file "$W/$mode.addr" --timeout 600 -o "$W/$mode.h5" &
  agg=$!
  for _ in $(seq 200); do [ -s "$W/$mode.addr" ] && break; sleep 0.05; done
  extra=()
  if [ "$mode" = relays ]; then
    mkdir -p "$W/$mode.h5.shards"
    extra=(--relay-command "$BUILD/cli/commprof" --shard-dir "$W/$mode.h5.shards")
  fi
  gen=$(TMPDIR=$W "$BUILD/bench/commprof_load_generator" --port "$(cut -d: -f2 "$W/$mode.addr")" \
    --secret "$(cat "$W/$mode.secret")" --job "$mode" --ranks "$RANKS" --events "$EVENTS" --batch 1000 \
    --threads 8 --hosts "$HOSTS" "${extra[@]}")
  wait "$agg"
  t1=$(date +%s.%N)
  total=$((RANKS * EVENTS))
  awk -v m="$mode" -v g="$gen" -v t0="$t0" -v t1="$t1" -v n="$total" \
    'BEGIN { printf "%-7s %s; until the file is finalized: %.2f s (%.2f M events/s)\n", m, g, t1 - t0, n / (t1 - t0) / 1e6 }'
done
